/* allreduce.c — all-reduce bandwidth over MPI: tg_dist_all_reduce (fixed-order reduce-scatter + all-gather,
 * src/dist/mpi.c) next to Open MPI's own MPI_Allreduce on a raw buffer, float32 sums of 1 MB to 256 MB.
 * Run under mpirun (bench/dist.sh: mpirun -np 2); rank 0 prints the table. Usage: allreduce [MAX_MB]
 * Bandwidth is bytes of the tensor over the time (the "algorithm bandwidth"); ratio = MPI's time / tgc's
 * (>= 1: tgc as fast or faster). Each size: a barrier, then tgc and MPI alternately, the median of the reps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tg.h"
#ifdef TG_BENCH_MPI
#include <mpi.h>
#endif

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
#ifndef TG_BENCH_MPI
  (void)argc;
  (void)argv;
  printf("allreduce: built without MPI (install libopenmpi-dev and rebuild)\n");
  return 0;
#else
  long max_mb = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
  if (max_mb < 1 || max_mb > 4096) {
    fprintf(stderr, "allreduce: MAX_MB %s: 1..4096\n", argv[1]);
    return 2;
  }
  if (tg_dist_init() != TG_OK) die_tg("tg_dist_init");
  int rank = tg_dist_rank(), size = tg_dist_size();
  if (rank == 0) {
    printf("all-reduce (sum) of float32 over %d ranks, %d tgc threads each\n", size, tg_num_threads());
    printf("%10s %10s %10s %10s %10s %8s\n", "bytes", "tgc ms", "tgc GB/s", "MPI ms", "MPI GB/s", "ratio");
  }
  /* 4 KB and 64 KB show the fixed cost of a collective; 1 MB.. the bandwidth */
  for (long kb = 4; kb <= max_mb * 1024; kb = kb < 64 ? 64 : kb < 1024 ? 1024 : kb * 2) {
    long mb = kb / 1024;
    int64_t n = kb * 1024 / 4;
    float *raw = malloc((size_t)n * 4), *init = malloc((size_t)n * 4);
    if (!raw || !init) die_tg("malloc");
    for (int64_t i = 0; i < n; i++) init[i] = 1.0f / (float)(1 + i % 1000);
    memcpy(raw, init, (size_t)n * 4);
    tg_tensor *t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){n}, init, (size_t)n * 4);
    if (!t) die_tg("tg_from_data");
    int reps = mb <= 16 ? 15 : mb <= 64 ? 9 : 5;
    double tt[16], tm[16];
    char label[32];
    if (kb < 1024) snprintf(label, sizeof label, "%ld KB", kb);
    else snprintf(label, sizeof label, "%ld MB", mb);
    for (int r = -1; r < reps; r++) {  /* r = -1: warm-up (first touch of the scratch and MPI's buffers) */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = bench_now_s();
      if (tg_dist_all_reduce(t, TG_DIST_SUM) != TG_OK) die_tg("tg_dist_all_reduce");
      double t1 = bench_now_s();
      MPI_Barrier(MPI_COMM_WORLD);
      double t2 = bench_now_s();
      MPI_Allreduce(MPI_IN_PLACE, raw, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t3 = bench_now_s();
      if (r >= 0) {
        tt[r] = t1 - t0;
        tm[r] = t3 - t2;
      }
    }
    double a = median(tt, reps), b = median(tm, reps), bytes = (double)n * 4;
    if (rank == 0)
      printf("%10s %10.3f %10.2f %10.3f %10.2f %7.2fx\n", label, a * 1e3, bytes / a / 1e9, b * 1e3, bytes / b / 1e9, b / a);
    tg_free(t);
    free(raw);
    free(init);
  }
  tg_dist_finalize();
  tg_collect();
  (void)size;
  return 0;
#endif
}
