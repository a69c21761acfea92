/* beam.c — BEAM=n: the actions for a kernel found by timing candidates on the device (tinygrad's search.py).
 *
 * The beam starts with the heuristic's actions, each prefix of them and the kernel as it is. Each round extends
 * every beam member by every single action that applies (UPCAST/UNROLL by 2..32, THREAD, SWAP, PACK), renders
 * each new kernel once (kernels that expand to the same AST are one candidate), compiles them in parallel on a
 * few threads, 16 at a time (the device's compile is thread-safe; rendering is not, the IR being one interned
 * table), runs each on the device's random inputs (best of 3, cut after one run when it is 3x slower than the
 * best so far) and keeps the n fastest (after the first round: every seed). It stops when a round from the
 * second on improves the best by less than 1%, after 8 rounds, or at the time limit, which is looked at after
 * every run: candidates not timed by then are not kept, and as the heuristic's own list is timed first, a
 * search cut short is never worse than the heuristic. The result is cached on disk under the kernel's
 * structural hash, the beam width and the device's key, so a second run does no search.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/beam.h"
#include "render/render.h"

#define BEAM_MAX_CAND 512
#define BEAM_ROUNDS 8
#define BEAM_COMPILE_THREADS 4
#define BEAM_CHUNK 16  /* candidates rendered, compiled and timed between two looks at the clock */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct cand {
  kernel_state ks;
  uop *final;       /* the expanded AST: candidates with the same one are the same kernel */
  char *src;
  launch_shape shape;
  char name[96];
  void *prog;
  double t;
} cand;

/* ---- disk cache ---------------------------------------------------------------------------------------- */

static bool cache_path(const beam_device *d, const kernel_state *ks, int width, char *out, size_t n) {
  if (!d->cache_dir || !d->cache_dir[0]) return false;
  /* "2": the file format that starts with the vector width (files of the first format are not read) */
  uint64_t h = ks->ast->hash ^ (0x9E3779B97F4A7C15ULL * (uint64_t)width) ^ 0x2ULL;
  for (const char *k = d->key ? d->key : ""; *k; k++) h = (h ^ (unsigned char)*k) * 0x100000001b3ULL;
  int w = snprintf(out, n, "%s/beam-%016llx.opts", d->cache_dir, (unsigned long long)h);
  return w > 0 && (size_t)w < n;
}

static bool cache_load(const beam_device *d, kernel_state *ks, int width) {
  char path[4096];
  if (!cache_path(d, ks, width, path, sizeof path)) return false;
  FILE *f = fopen(path, "r");
  if (!f) return false;
  kernel_state t = *ks;
  int n = 0, op, axis, vec = 0;
  long long arg;
  /* the vector width the actions were found with first: the heuristic may have chosen half vectors */
  bool ok = fscanf(f, "%d %d", &vec, &n) == 2 && (vec == ks->tg.vec_bytes || (vec >= 4 && (vec & (vec - 1)) == 0)) &&
            vec <= ks->tg.vec_bytes &&
            n >= 0 && n <= KS_MAX_OPTS;
  t.tg.vec_bytes = vec;
  for (int i = 0; ok && i < n; i++) {
    char why[160];
    ok = fscanf(f, "%d %d %lld", &op, &axis, &arg) == 3 && op >= 0 && op < OPT_COUNT &&
         apply_opt(&t, (opt){(opt_op)op, axis, arg}, why);
  }
  fclose(f);
  if (ok) *ks = t;
  return ok;
}

/* ks: the actions found for the kernel `orig` */
static void cache_store(const beam_device *d, const kernel_state *orig, const kernel_state *ks, int width) {
  char path[4096], tmp[4200];
  if (!cache_path(d, orig, width, path, sizeof path)) return;
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "%d %d", ks->tg.vec_bytes, ks->napplied);
  for (int i = 0; i < ks->napplied; i++)
    fprintf(f, " %d %d %lld", (int)ks->applied[i].op, ks->applied[i].axis, (long long)ks->applied[i].arg);
  fprintf(f, "\n");
  if (fclose(f) == 0 && rename(tmp, path) == 0) return;
  unlink(tmp);
}

/* ---- candidates ---------------------------------------------------------------------------------------- */

/* renders c (on this thread); false when codegen fails or the kernel is a duplicate */
static bool cand_render(cand *c, cand *all, int nall, const beam_device *d) {
  kernel_info info;
  memset(&info, 0, sizeof info);
  kernel_state k = c->ks;
  c->final = codegen_finish(&k, &info);
  if (!c->final) return false;
  for (int i = 0; i < nall; i++)
    if (all[i].final == c->final && all[i].ks.nthreads == c->ks.nthreads) return false;
  linear_program lp = {0};
  if (!linearize(c->final, &lp, &info)) return false;
  snprintf(c->name, sizeof c->name, "%s", info.name);
  memset(&c->shape, 0, sizeof c->shape);
  c->src = d->render(d->ctx, &lp, &info, &c->shape);
  linear_program_free(&lp);
  return c->src != NULL;
}

typedef struct compile_job { cand *c; int n; atomic_int next; const beam_device *d; } compile_job;

static void *compile_worker(void *arg) {
  compile_job *j = arg;
  for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) j->c[i].prog = j->d->compile(j->d->ctx, j->c[i].name, j->c[i].src, &j->c[i].shape);
  return NULL;
}

static void compile_all(cand *c, int n, const beam_device *d) {
  compile_job j = {.c = c, .n = n, .d = d};
  atomic_init(&j.next, 0);
  pthread_t th[BEAM_COMPILE_THREADS];
  int nt = 0;
  for (; nt < BEAM_COMPILE_THREADS && nt < n - 1; nt++)
    if (pthread_create(&th[nt], NULL, compile_worker, &j) != 0) break;
  compile_worker(&j);
  for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
}

static double time_prog(const beam_device *d, cand *c, double best) {
  double t = 1e30;
  for (int r = 0; r < 3; r++) {
    double s = d->run(d->ctx, c->prog, c->ks.nthreads);
    if (s < 0) return -1;
    if (s < t) t = s;
    if (t > 3 * best) break;
  }
  return t;
}

/* every single action that applies to ks, appended to out; a state that ends in a PACK (which must stay
 * last) grows before it: the action goes in before the PACK, applied again after it when it still applies */
static int expand_actions(const kernel_state *orig, const kernel_state *ks0, cand *out, int cap) {
  kernel_state base = *ks0;
  const kernel_state *ks = ks0;
  bool repack = ks0->napplied && ks0->applied[ks0->napplied - 1].op == OPT_PACK;
  if (repack) {
    char why[160];
    base = *orig;
    for (int i = 0; i < ks0->napplied - 1; i++)
      if (!apply_opt(&base, ks0->applied[i], why)) return 0;
    ks = &base;
  }
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = 0;
  ks_axes(ks, ax, &nout, &nred);
  static const int64_t amts[] = {2, 3, 4, 8, 16, 32};
  opt list[256];
  int nl = 0;
  for (int a = 0; a < nout; a++) {
    for (int k = 0; k < 6; k++) list[nl++] = (opt){OPT_UPCAST, a, amts[k]};
    list[nl++] = (opt){OPT_THREAD, a, ks->tg.nthreads};
    list[nl++] = (opt){OPT_PACK, a, 0};
    for (int b = a + 1; b < nout && nl < 200; b++) list[nl++] = (opt){OPT_SWAP, a, b};
  }
  for (int a = 0; a < nred && nl < 240; a++)
    for (int k = 0; k < 6; k++) list[nl++] = (opt){OPT_UNROLL, a, amts[k]};
  for (int i = 0; i < nl && n < cap; i++) {
    char why[160];
    out[n].ks = *ks;
    if (list[i].op == OPT_PACK && repack) continue;
    if (!apply_opt(&out[n].ks, list[i], why)) continue;
    if (repack) apply_opt(&out[n].ks, ks0->applied[ks0->napplied - 1], why);
    n++;
  }
  return n;
}

static void cand_free(const beam_device *d, cand *c) {
  if (c->prog) d->release(d->ctx, c->prog);
  free(c->src);
  c->prog = NULL;
  c->src = NULL;
}

static int cmp_time(const void *a, const void *b) {
  double x = ((const cand *)a)->t, y = ((const cand *)b)->t;
  return (x > y) - (x < y);
}

bool beam_search(kernel_state *ks, int width, const beam_device *d, double limit_s) {
  if (width < 1) width = 1;
  if (cache_load(d, ks, width)) return true;
  double t0 = now_s();
  cand *beam = mem_calloc((size_t)width + 8, sizeof *beam), *cands = mem_calloc(BEAM_MAX_CAND, sizeof *cands);
  if (!beam || !cands) {
    free(beam);
    free(cands);
    return false;
  }
  /* seeds: as it is, and every prefix of the heuristic's actions (PACK ends a list: the prefixes let the
   * search try other actions before it) */
  int nb = 0, nc = 0;
  kernel_state h = *ks;
  hand_coded_optimizations(&h);
  /* the search starts from the vector width the heuristic settled on: when no loop fills a whole vector it
   * takes half vectors (hand_coded_optimizations), and its actions under the full width would be scalar code
   * (MNIST's conv2 weight gradient: UPCAST(4,8) of 8 lanes, 1015 ms scalar against 108 ms in vectors) */
  kernel_state base = *ks;
  base.tg = h.tg;
  cands[nc++].ks = base;
  for (int i = 0; i < h.napplied; i++) {
    char why[160];
    cands[nc].ks = cands[nc - 1].ks;
    if (!apply_opt(&cands[nc].ks, h.applied[i], why)) break;
    nc++;
  }
  /* the heuristic's whole list is timed first: a search cut short by its time limit is never worse than it */
  for (int i = 0; i < nc / 2; i++) {
    kernel_state t = cands[i].ks;
    cands[i].ks = cands[nc - 1 - i].ks;
    cands[nc - 1 - i].ks = t;
  }
  kernel_state best = *ks;
  double best_t = 1e30;
  bool any = false, late = false;
  for (int round = 0; round <= BEAM_ROUNDS && nc; round++) {
    /* rendered, compiled and timed a chunk at a time, the time limit checked after each: a round of a few
     * hundred candidates of a big kernel (a 10 GFLOP convolution gradient: about a second per run) would
     * otherwise run far past it. Candidates not reached stay untimed. */
    int nr = 0;
    double round_best = best_t;  /* the bar a run must beat not to be cut after its first run */
    for (int i = 0; i < nc && !late;) {
      int start = nr;
      for (; i < nc && nr - start < BEAM_CHUNK; i++) {
        cands[nr] = cands[i];
        cands[nr].src = NULL;
        cands[nr].prog = NULL;
        if (cand_render(&cands[nr], cands, nr, d)) nr++;
        else free(cands[nr].src);
      }
      compile_all(cands + start, nr - start, d);
      for (int k = start; k < nr; k++) {
        cands[k].t = cands[k].prog && !late ? time_prog(d, &cands[k], round_best) : -1;
        if (cands[k].t < 0) cands[k].t = 1e30;
        if (cands[k].t < round_best) round_best = cands[k].t;
        cand_free(d, &cands[k]);
        late = now_s() - t0 > limit_s;
      }
    }
    qsort(cands, (size_t)nr, sizeof *cands, cmp_time);
    if (tg_debug_level() >= 2 && nr) {
      char b[160];
      fprintf(stderr, "beam round %d: %d candidates, best %.3f ms %s\n", round, nr, cands[0].t * 1e3, opts_str(&cands[0].ks, b, sizeof b));
    }
    bool improved = nr && cands[0].t < best_t * 0.99;
    if (nr && cands[0].t < best_t) {
      best_t = cands[0].t;
      best = cands[0].ks;
      any = true;
    }
    /* the seeds all grow in round 1 (else the beam only ever sees the heuristic's path); later rounds grow
     * the width fastest, and the search stops after a round that did not improve, from round 2 on */
    if ((!improved && round >= 2) || late || now_s() - t0 > limit_s) break;
    nb = round == 0 ? (nr < width + 6 ? nr : width + 6) : nr < width ? nr : width;
    for (int i = 0; i < nb; i++) beam[i] = cands[i];
    nc = 0;
    for (int i = 0; i < nb && nc < BEAM_MAX_CAND; i++) nc += expand_actions(&base, &beam[i].ks, cands + nc, BEAM_MAX_CAND - nc);
  }
  free(beam);
  free(cands);
  if (!any || best_t >= 1e30) return false;
  kernel_state orig = *ks;
  *ks = best;
  cache_store(d, &orig, ks, width);
  if (tg_debug_level() >= 2) {
    char b[160];
    fprintf(stderr, "beam: %.3f ms after %.1f s: %s\n", best_t * 1e3, now_s() - t0, opts_str(ks, b, sizeof b));
  }
  return true;
}
