/* nompi.c — the distributed layer when the library was built without MPI (Makefile: no mpicc or ompi-c):
 * the functions of tg.h's "distributed" section exist and say how to get the real ones. */
#include <math.h>
#include <stdlib.h>

#include "uop/uop.h"

static double timeout_s = -1;

static tg_status no_mpi(const char *fn) {
  tg_set_error(TG_ERR_DEVICE, "%s: tgc was built without MPI; install Open MPI (apt-get install libopenmpi-dev "
               "openmpi-bin) and rebuild (make clean && make)", fn);
  return TG_ERR_DEVICE;
}

tg_status tg_dist_init(void) { return no_mpi("tg_dist_init"); }
bool tg_dist_available(void) { return false; }
int tg_dist_rank(void) { return 0; }
int tg_dist_size(void) { return 1; }
tg_status tg_dist_all_reduce(tg_tensor *t, tg_dist_op op) { return no_mpi("tg_dist_all_reduce"); }
tg_status tg_dist_broadcast(tg_tensor *t, int root) { return no_mpi("tg_dist_broadcast"); }
tg_status tg_dist_barrier(void) { return no_mpi("tg_dist_barrier"); }
tg_status tg_dist_finalize(void) { return TG_OK; }

tg_status tg_dist_set_timeout(double seconds) {
  if (!(seconds > 0) || !isfinite(seconds)) {
    tg_set_error(TG_ERR_ARG, "tg_dist_set_timeout: %g seconds; a finite number > 0 is needed", seconds);
    return TG_ERR_ARG;
  }
  timeout_s = seconds;
  return TG_OK;
}

double tg_dist_timeout(void) {
  if (timeout_s < 0) {
    const char *e = getenv("TG_DIST_TIMEOUT");
    char *end = NULL;
    double v = e ? strtod(e, &end) : 0;
    timeout_s = e && end != e && !*end && v > 0 && isfinite(v) ? v : 60;
  }
  return timeout_s;
}
