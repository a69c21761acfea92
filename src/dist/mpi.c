/* mpi.c — data parallelism across processes and machines over MPI: rank, size, all-reduce, broadcast and
 * barrier of realized tensors (tg.h, "distributed").
 *
 * Every collective is point-to-point nonblocking requests polled (MPI_Testsome) against a deadline, so a peer
 * that died or hangs is an error naming it after TG_DIST_TIMEOUT seconds, never an eternal wait. Before each
 * one the ranks swap a small header (operation, dtype, shape, root, sequence number) and refuse to go on when
 * they differ. The all-reduce is a reduce-scatter then an all-gather: the elements are cut into one chunk per
 * rank, chunk k is summed by rank k in rank order 0..n-1 and sent back to all, so every rank holds the same
 * bits (MPI_Allreduce leaves its order unspecified). Chunks travel in segments: a segment is summed as soon as
 * it arrived from every peer and sent on at once, so summing overlaps the transfers (TG_DIST_SEGMENT_KB, default
 * 256). Measured against the alternative for 2 ranks, every rank receiving the whole of the other's buffer and
 * summing all of it in rank order (one phase, same bits): 0.8x of MPI_Allreduce at 1 MB where this is 0.9x.
 *
 * The library links libmpi (Makefile) rather than loading it at run time: MPI's ABI (the handle types, the
 * constants such as MPI_COMM_WORLD) differs between implementations and versions, so a dlopen'ed libmpi would
 * need a shim per implementation; the build takes the compiler's view of mpi.h instead.
 */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "runtime/device.h"
#include "tensor/tensor.h"
#include "uop/env.h"
#include "uop/uop.h"

enum { ST_NONE, ST_LOCAL, ST_MPI, ST_BROKEN, ST_FINALIZED };
enum { OP_ALLREDUCE = 1, OP_BCAST, OP_BARRIER };
/* message tags: headers, broadcast pieces, reduce-scatter and all-gather segments (segment index added) */
enum { TAG_HDR = 1, TAG_BCAST = 2, TAG_RS = 16, TAG_AG = 16 + 8192, MAX_SEGS = 8192 };
#define PIECE_BYTES ((size_t)1 << 30)  /* MPI counts are int: broadcasts go in pieces of 1 GiB */
#define HUGE_PAGE ((size_t)2 << 20)    /* host_alloc's huge pages: the all-reduce scratch comes in whole ones */
#define HDR_LEN (6 + TG_MAX_DIMS)

static pthread_mutex_t dist_mu = PTHREAD_MUTEX_INITIALIZER;
static int state = ST_NONE, rank = 0, size = 1;
static bool we_initialized;          /* MPI_Init was ours, so finalize is ours too */
static MPI_Comm comm = MPI_COMM_NULL;  /* a duplicate of MPI_COMM_WORLD whose errors return */
static double timeout_s = -1;         /* < 0: not read from TG_DIST_TIMEOUT yet */
static size_t seg_bytes;               /* all-reduce segment: TG_DIST_SEGMENT_KB, default below */
static int64_t seq;                   /* collectives run so far: ranks out of step see different numbers */
static unsigned char *scratch;        /* peers' chunks during an all-reduce, kept for the next (host_alloc'd) */
static size_t scratch_cap;
static unsigned char *rx, *tx;        /* headers (and small tensors) from the peers, a slot each; ours */

static const char *op_name(int op) {
  return op == OP_ALLREDUCE ? "tg_dist_all_reduce" : op == OP_BCAST ? "tg_dist_broadcast" : "tg_dist_barrier";
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double get_timeout(void) {
  if (timeout_s < 0) {
    const char *e = getenv("TG_DIST_TIMEOUT");
    char *end = NULL;
    double v = e ? strtod(e, &end) : 0;
    timeout_s = e && end != e && !*end && v > 0 && isfinite(v) ? v : 60;
  }
  return timeout_s;
}

tg_status tg_dist_set_timeout(double seconds) {
  if (!(seconds > 0) || !isfinite(seconds)) {
    tg_set_error(TG_ERR_ARG, "tg_dist_set_timeout: %g seconds; a finite number > 0 is needed", seconds);
    return TG_ERR_ARG;
  }
  pthread_mutex_lock(&dist_mu);
  timeout_s = seconds;
  pthread_mutex_unlock(&dist_mu);
  return TG_OK;
}

double tg_dist_timeout(void) {
  pthread_mutex_lock(&dist_mu);
  double v = get_timeout();
  pthread_mutex_unlock(&dist_mu);
  return v;
}

bool tg_dist_available(void) { return true; }

/* true when a launcher (mpirun, srun, hydra) started this process: otherwise it runs alone, without MPI */
static bool launched(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    if (getenv(vars[i])) return true;
  return false;
}

static tg_status mpi_fail(const char *fn, const char *what, int err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(err, msg, &len);
  tg_set_error(TG_ERR_IO, "%s: %s failed on rank %d: %s", fn, what, rank, msg);
  return TG_ERR_IO;
}

tg_status tg_dist_init(void) {
  pthread_mutex_lock(&dist_mu);
  tg_status st = TG_OK;
  get_timeout();
  if (state == ST_LOCAL || state == ST_MPI) goto out;
  if (state == ST_BROKEN || state == ST_FINALIZED) {
    tg_set_error(TG_ERR_ARG, "tg_dist_init: MPI was %s in this process and cannot start again",
                 state == ST_BROKEN ? "left after a failed operation" : "finalized");
    st = TG_ERR_ARG;
    goto out;
  }
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (fin) {
    tg_set_error(TG_ERR_ARG, "tg_dist_init: MPI was finalized in this process and cannot start again");
    st = TG_ERR_ARG;
    goto out;
  }
  if (!inited && !launched()) {  /* not under mpirun: one rank, and no MPI start-up (a singleton spawns a daemon) */
    state = ST_LOCAL;
    rank = 0;
    size = 1;
    goto out;
  }
  if (!inited) {
    int provided = 0, err = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (err != MPI_SUCCESS) {
      st = mpi_fail("tg_dist_init", "MPI_Init_thread", err);
      goto out;
    }
    we_initialized = true;
  }
  int err = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (err == MPI_SUCCESS) err = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (err == MPI_SUCCESS) err = MPI_Comm_rank(comm, &rank);
  if (err == MPI_SUCCESS) err = MPI_Comm_size(comm, &size);
  if (err != MPI_SUCCESS) {
    state = ST_BROKEN;
    st = mpi_fail("tg_dist_init", "setting up the communicator", err);
    goto out;
  }
  state = ST_MPI;
out:
  pthread_mutex_unlock(&dist_mu);
  return st;
}

int tg_dist_rank(void) { return rank; }
int tg_dist_size(void) { return size; }

tg_status tg_dist_finalize(void) {
  pthread_mutex_lock(&dist_mu);
  if (state == ST_MPI) {
    MPI_Comm_free(&comm);
    if (we_initialized) MPI_Finalize();
  }
  /* after a failure requests may still be in flight: MPI_Finalize could wait for a dead peer forever, so a
   * broken layer leaves MPI as it is (the process exits with an error anyway) */
  if (state == ST_MPI || state == ST_BROKEN) state = ST_FINALIZED;
  else if (state == ST_LOCAL) state = ST_NONE;
  host_free(scratch, scratch_cap);
  free(rx);
  free(tx);
  scratch = rx = tx = NULL;
  scratch_cap = 0;
  rank = 0;
  size = 1;
  pthread_mutex_unlock(&dist_mu);
  return TG_OK;
}

/* ---- polling requests against the deadline -------------------------------------------------------- */
typedef struct req_info { int kind, peer, seg; bool recv; } req_info;
typedef struct reqs {
  MPI_Request *r;
  req_info *info;
  int n, cap, outstanding;
} reqs;

static bool reqs_init(reqs *q, int cap) {
  q->n = q->outstanding = 0;
  q->cap = cap > 0 ? cap : 1;
  q->r = mem_alloc((size_t)q->cap * sizeof *q->r);
  q->info = mem_alloc((size_t)q->cap * sizeof *q->info);
  if (q->r && q->info) return true;
  free(q->r);
  free(q->info);
  tg_set_error(TG_ERR_NOMEM, "tg_dist: no memory for %d requests", cap);
  return false;
}

static void reqs_free(reqs *q) {
  free(q->r);
  free(q->info);
}

/* the slot for one more request (the caller starts it into *slot); cap was sized for every request */
static MPI_Request *reqs_add(reqs *q, int kind, int peer, int seg, bool recv) {
  q->info[q->n] = (req_info){kind, peer, seg, recv};
  q->outstanding++;
  return &q->r[q->n++];
}

/* a request failed to start or finish, or the deadline passed: the layer is left broken (requests may still
 * be in flight, so nothing of theirs is freed) and the error names the peer */
static tg_status broken(int op, const char *what, int peer, double elapsed) {
  state = ST_BROKEN;
  scratch = rx = tx = NULL;  /* a late message may still land in them: leak them rather than free them */
  scratch_cap = 0;
  if (peer >= 0)
    tg_set_error(TG_ERR_IO, "%s: rank %d: %s rank %d after %.1f s (TG_DIST_TIMEOUT %g s): it exited, hangs or is in "
                 "another operation", op_name(op), rank, what, peer, elapsed, get_timeout());
  else
    tg_set_error(TG_ERR_IO, "%s: rank %d: %s after %.1f s", op_name(op), rank, what, elapsed);
  return TG_ERR_IO;
}

/* polls q until every request is done, calling on_done for each as it completes (it may add requests) */
static tg_status reqs_wait(int op, reqs *q, double t0, tg_status (*on_done)(void *ctx, req_info ri), void *ctx) {
  double deadline = t0 + get_timeout();
  int *idx = mem_alloc((size_t)q->cap * sizeof *idx);
  if (!idx) {
    tg_set_error(TG_ERR_NOMEM, "%s: no memory for %d requests", op_name(op), q->cap);
    return broken(op, "out of memory waiting for", -1, now_s() - t0);
  }
  tg_status st = TG_OK;
  long idle = 0;
  while (q->outstanding > 0) {
    int nd = 0, err = MPI_Testsome(q->n, q->r, &nd, idx, MPI_STATUSES_IGNORE);
    if (err != MPI_SUCCESS) {
      char m[MPI_MAX_ERROR_STRING] = "";
      int len = 0;
      MPI_Error_string(err, m, &len);
      st = broken(op, m, -1, now_s() - t0);
      break;
    }
    if (nd == MPI_UNDEFINED) nd = 0;
    for (int i = 0; i < nd && st == TG_OK; i++) {
      q->outstanding--;
      if (on_done) st = on_done(ctx, q->info[idx[i]]);
    }
    if (st != TG_OK) {
      state = ST_BROKEN;
      break;
    }
    if (nd > 0) {
      idle = 0;
      continue;
    }
    /* spin first (a shared-memory message lands in microseconds), then yield, then sleep 50 us at a time */
    if (++idle < 2000) continue;
    double t = now_s();
    if (t > deadline) {
      int peer = -1;  /* the first peer we still wait to hear from, else the first we still send to */
      for (int i = 0; i < q->n && peer < 0; i++)
        if (q->r[i] != MPI_REQUEST_NULL && q->info[i].recv) peer = q->info[i].peer;
      for (int i = 0; i < q->n && peer < 0; i++)
        if (q->r[i] != MPI_REQUEST_NULL) peer = q->info[i].peer;
      st = broken(op, "no answer from", peer, t - t0);
      break;
    }
    if (idle < 20000) sched_yield();
    else nanosleep(&(struct timespec){0, 50000}, NULL);
  }
  /* given up: pending receives are cancelled, so that no late message writes into memory the caller frees */
  for (int i = 0; st != TG_OK && i < q->n; i++) {
    if (q->r[i] == MPI_REQUEST_NULL) continue;
    if (q->info[i].recv) MPI_Cancel(&q->r[i]);
    MPI_Request_free(&q->r[i]);
  }
  free(idx);
  return st;
}

/* ---- the header every collective starts with ------------------------------------------------------ */
static void shape_text(char *b, size_t cap, const int64_t *h) {
  size_t n = (size_t)snprintf(b, cap, "%s (", h[3] >= 0 && h[3] < TG_DTYPE_COUNT ? tg_dtype_name((tg_dtype)h[3]) : "?");
  for (int64_t i = 0; i < h[4] && i < TG_MAX_DIMS && n < cap; i++)
    n += (size_t)snprintf(b + n, cap - n, "%s%lld", i ? ", " : "", (long long)h[6 + i]);
  if (n < cap) snprintf(b + n, cap - n, ")");
}

/* Every collective starts with a message to every peer: our header, followed by the tensor's bytes when there
 * are at most INLINE_BYTES of them, so a small all-reduce or broadcast is that one exchange (an all-reduce of
 * 4 KB took 3 exchanges and 2x MPI_Allreduce's time). Every receive has room for the bytes (a smaller message
 * fits a larger receive), so ranks whose shapes differ still read each other's header and say so. */
#define INLINE_BYTES ((size_t)64 << 10)
#define SLOT_BYTES (HDR_LEN * sizeof(int64_t) + INLINE_BYTES)

static const unsigned char *peer_bytes(int p) { return rx + (size_t)p * SLOT_BYTES + HDR_LEN * sizeof(int64_t); }

/* swaps headers (and nbytes of data, nbytes <= INLINE_BYTES; NULL: none) with every peer; TG_ERR_ARG naming
 * both sides when one differs from ours */
static tg_status exchange_header(int op, const int64_t *mine, const void *data, size_t nbytes, double t0) {
  if (!rx) rx = mem_alloc((size_t)size * SLOT_BYTES);
  if (!tx) tx = mem_alloc(SLOT_BYTES);
  reqs q;
  if (!rx || !tx || !reqs_init(&q, 2 * size)) {
    tg_set_error(TG_ERR_NOMEM, "%s: no memory for %d headers", op_name(op), size);
    return TG_ERR_NOMEM;
  }
  size_t len = HDR_LEN * sizeof(int64_t);
  memcpy(tx, mine, len);
  if (data && nbytes) {
    memcpy(tx + len, data, nbytes);
    len += nbytes;
  }
  tg_status st = TG_OK;
  for (int p = 0; p < size && st == TG_OK; p++) {
    if (p == rank) continue;
    int e1 = MPI_Irecv(rx + (size_t)p * SLOT_BYTES, (int)SLOT_BYTES, MPI_BYTE, p, TAG_HDR, comm, reqs_add(&q, 0, p, 0, true));
    int e2 = MPI_Isend(tx, (int)len, MPI_BYTE, p, TAG_HDR, comm, reqs_add(&q, 1, p, 0, false));
    if (e1 != MPI_SUCCESS || e2 != MPI_SUCCESS) st = broken(op, "could not start a message to", p, now_s() - t0);
  }
  if (st == TG_OK) st = reqs_wait(op, &q, t0, NULL, NULL);
  for (int p = 0; p < size && st == TG_OK; p++) {
    int64_t h[HDR_LEN];
    memcpy(h, rx + (size_t)p * SLOT_BYTES, sizeof h);
    if (p == rank || !memcmp(h, mine, sizeof h)) continue;
    if (h[1] != mine[1] || h[2] != mine[2]) {
      tg_set_error(TG_ERR_ARG, "%s: rank %d is in its collective number %lld (%s), rank %d in number %lld (%s): the "
                   "ranks must call the same collectives in the same order", op_name(op), rank, (long long)mine[1],
                   op_name((int)mine[2]), p, (long long)h[1], op_name((int)h[2]));
    } else if (h[5] != mine[5]) {
      tg_set_error(TG_ERR_ARG, "%s: rank %d passed %s %lld, rank %d passed %lld", op_name(op), rank,
                   op == OP_BCAST ? "root" : "reduce op", (long long)mine[5], p, (long long)h[5]);
    } else {
      char a[400], b[400];
      shape_text(a, sizeof a, mine);
      shape_text(b, sizeof b, h);
      tg_set_error(TG_ERR_ARG, "%s: rank %d has a tensor of %s, rank %d one of %s: every rank must pass the same "
                   "dtype and shape", op_name(op), rank, a, p, b);
    }
    st = TG_ERR_ARG;
  }
  reqs_free(&q);
  return st;
}

/* ---- the tensor's bytes ----------------------------------------------------------------------------- */
typedef struct host_view {
  tg_tensor *t;
  tg_buffer *buf;
  unsigned char *p;   /* the buffer itself on the CPU, a staging copy on other devices */
  bool staged;
  size_t nbytes;
} host_view;

static tg_status view_open(const char *fn, tg_tensor *t, host_view *v, bool read) {
  *v = (host_view){.t = t, .nbytes = (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t))};
  if (engine_capturing()) {
    tg_set_error(TG_ERR_ARG, "%s: a JIT step is being captured: a collective runs on the host and would not be "
                             "replayed (call it between tg_jit_call's)", fn);
    return TG_ERR_ARG;
  }
  tg_status st = tg_realize(t);
  if (st != TG_OK || !v->nbytes) return st;
  v->buf = tensor_storage(t);
  if (!v->buf) {  /* a realized view that is not the whole buffer: give t a buffer of its own */
    st = tg_assign(t, tg_contiguous(tg_detach(t)));
    if (st == TG_OK) st = tg_realize(t);
    if (st == TG_OK) v->buf = tensor_storage(t);
    if (st == TG_OK && !v->buf) {
      tg_set_error(TG_ERR_INTERNAL, "%s: a realized tensor has no buffer of its own", fn);
      st = TG_ERR_INTERNAL;
    }
    if (st != TG_OK) return st;
  }
  if (v->buf->dev == device_cpu() && v->buf->ptr) {
    v->p = v->buf->ptr;
    return TG_OK;
  }
  v->staged = true;
  v->p = host_alloc(v->nbytes);  /* huge pages from 2 MB, as a CPU tensor's (see the all-reduce's scratch) */
  if (!v->p) {
    tg_set_error(TG_ERR_NOMEM, "%s: no memory to stage %zu bytes on the host", fn, v->nbytes);
    return TG_ERR_NOMEM;
  }
  return read ? v->buf->dev->copyout(v->p, v->buf, v->nbytes) : TG_OK;
}

/* writes the staged bytes back and tells the graph caches that the buffer changed */
static tg_status view_close(host_view *v, bool written) {
  tg_status st = TG_OK;
  if (written && v->buf) {
    if (v->staged) st = v->buf->dev->copyin(v->buf, v->p, v->nbytes);
    lib_lock();
    uop_cache_invalidate();
    lib_unlock();
  }
  if (v->staged) host_free(v->p, v->nbytes);
  return st;
}

/* ---- all-reduce ------------------------------------------------------------------------------------- */
typedef struct ar_ctx {
  unsigned char *p;          /* the tensor's bytes */
  tg_dtype dt;
  size_t es;
  int64_t n, seg;            /* elements, elements per segment */
  int mean;
  int *count;                /* per segment of our chunk: peers whose piece arrived */
  reqs *q;
  double t0;
} ar_ctx;

static int64_t chunk_lo(const ar_ctx *c, int k) { return c->n * k / size; }
static int64_t chunk_hi(const ar_ctx *c, int k) { return c->n * (k + 1) / size; }
static int64_t segs_of(const ar_ctx *c, int k) { return (chunk_hi(c, k) - chunk_lo(c, k) + c->seg - 1) / c->seg; }
/* elements [*lo, *hi) of segment s of chunk k */
static void seg_range(const ar_ctx *c, int k, int64_t s, int64_t *lo, int64_t *hi) {
  *lo = chunk_lo(c, k) + s * c->seg;
  *hi = *lo + c->seg < chunk_hi(c, k) ? *lo + c->seg : chunk_hi(c, k);
}
/* where peer p's piece of our chunk lands: scratch holds one chunk per peer */
static unsigned char *scratch_at(const ar_ctx *c, int p, int64_t off) {
  int slot = p < rank ? p : p - 1;
  return scratch + ((size_t)slot * (size_t)(chunk_hi(c, rank) - chunk_lo(c, rank)) + (size_t)off) * c->es;
}

/* out[i] = src[0][i] + src[1][i] + ... in rank order (then / size for a mean), in the dtype's own arithmetic:
 * integers wrap as unsigned (a mean of 8 to 32 bits divides the exact sum, of 64 bits the wrapped one), halves
 * are summed in float and rounded once */
#define SUM_LOOP(T, ACC, LOAD, STORE)                                                                         \
  for (int64_t i = 0; i < m; i++) {                                                                           \
    ACC a = LOAD(((const T *)src[0])[i]);                                                                     \
    for (int r = 1; r < size; r++) a = (ACC)(a + LOAD(((const T *)src[r])[i]));                               \
    if (mean) a = (ACC)(a / (ACC)size);                                                                       \
    ((T *)out)[i] = STORE(a);                                                                                 \
  }
#define ID(x) (x)

/* float32 and float64 pass by pass, each pass a loop the compiler vectorizes (the element-wise loop above ran at
 * about 1 GB/s and was the all-reduce's bottleneck; gcc at -O2 does not vectorize loops of unknown length):
 * t = s0 + s1, t += s2, ..., then out = t / size, the same operations per element in the same order. t is out
 * when our own values are s0 or s1 (read in the first pass), else peer 0's piece (free once received). */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZE __attribute__((optimize("O3")))
#else
#define VECTORIZE
#endif
#define PASSES(NAME, T)                                                                                       \
  VECTORIZE static void NAME##_add(T *o, const T *a, const T *b, int64_t m) {                                \
    for (int64_t i = 0; i < m; i++) o[i] = a[i] + b[i];                                                       \
  }                                                                                                           \
  VECTORIZE static void NAME##_div(T *o, const T *a, T d, int64_t m) {                                       \
    for (int64_t i = 0; i < m; i++) o[i] = a[i] / d;                                                          \
  }                                                                                                           \
  static void NAME##_sum(T *out, const void *const *src, int64_t m, int mean) {                              \
    T *t = rank <= 1 ? out : (T *)src[0];                                                                     \
    NAME##_add(t, src[0], src[1], m);                                                                         \
    for (int r = 2; r < size; r++) NAME##_add(t, t, src[r], m);                                               \
    if (mean) NAME##_div(out, t, (T)size, m);                                                                 \
    else if (t != out) memcpy(out, t, (size_t)m * sizeof(T));                                                 \
  }
PASSES(f32, float)
PASSES(f64, double)

static void sum_into(void *out, const void *const *src, int64_t m, tg_dtype dt, int mean) {
  switch (dt) {
  case TG_BOOL:
    for (int64_t i = 0; i < m; i++) {
      uint8_t a = 0;
      for (int r = 0; r < size; r++) a |= ((const uint8_t *)src[r])[i] != 0;
      ((uint8_t *)out)[i] = a;
    }
    break;
  case TG_INT8: if (mean) { SUM_LOOP(int8_t, int64_t, ID, (int8_t)) } else { SUM_LOOP(int8_t, uint8_t, (uint8_t), (int8_t)) } break;
  case TG_INT16: if (mean) { SUM_LOOP(int16_t, int64_t, ID, (int16_t)) } else { SUM_LOOP(int16_t, uint16_t, (uint16_t), (int16_t)) } break;
  case TG_INT32: if (mean) { SUM_LOOP(int32_t, int64_t, ID, (int32_t)) } else { SUM_LOOP(int32_t, uint32_t, (uint32_t), (int32_t)) } break;
  case TG_INT64:
    if (mean) {
      for (int64_t i = 0; i < m; i++) {  /* the wrapped sum, then divided as a signed number */
        uint64_t a = 0;
        for (int r = 0; r < size; r++) a += (uint64_t)((const int64_t *)src[r])[i];
        ((int64_t *)out)[i] = (int64_t)a / size;
      }
    } else {
      SUM_LOOP(int64_t, uint64_t, (uint64_t), (int64_t))
    }
    break;
  case TG_UINT8: if (mean) { SUM_LOOP(uint8_t, uint64_t, ID, (uint8_t)) } else { SUM_LOOP(uint8_t, uint8_t, ID, ID) } break;
  case TG_UINT16: if (mean) { SUM_LOOP(uint16_t, uint64_t, ID, (uint16_t)) } else { SUM_LOOP(uint16_t, uint16_t, ID, ID) } break;
  case TG_UINT32: if (mean) { SUM_LOOP(uint32_t, uint64_t, ID, (uint32_t)) } else { SUM_LOOP(uint32_t, uint32_t, ID, ID) } break;
  case TG_UINT64: SUM_LOOP(uint64_t, uint64_t, ID, ID) break;
  case TG_FLOAT16: SUM_LOOP(uint16_t, float, half_to_float, float_to_half) break;
  case TG_BFLOAT16: SUM_LOOP(uint16_t, float, bf16_to_float, float_to_bf16) break;
  case TG_FLOAT32: f32_sum(out, src, m, mean); break;
  case TG_FLOAT64: f64_sum(out, src, m, mean); break;
  default: break;
  }
}

enum { K_RS_SEND, K_RS_RECV, K_AG_SEND, K_AG_RECV };

static tg_status ar_done(void *ctx, req_info ri) {
  ar_ctx *c = ctx;
  int64_t lo, hi;
  if (ri.kind == K_RS_SEND) {  /* our piece of chunk `peer` left: its sum may come back into the same bytes */
    seg_range(c, ri.peer, ri.seg, &lo, &hi);
    int err = MPI_Irecv(c->p + (size_t)lo * c->es, (int)((hi - lo) * (int64_t)c->es), MPI_BYTE, ri.peer,
                        TAG_AG + ri.seg, comm, reqs_add(c->q, K_AG_RECV, ri.peer, ri.seg, true));
    return err == MPI_SUCCESS ? TG_OK : broken(OP_ALLREDUCE, "could not start a message from", ri.peer, now_s() - c->t0);
  }
  if (ri.kind != K_RS_RECV || ++c->count[ri.seg] < size - 1) return TG_OK;
  /* every peer's piece of segment seg of our chunk is here: sum in rank order and send the result to all */
  seg_range(c, rank, ri.seg, &lo, &hi);
  const void *src[size];
  for (int r = 0; r < size; r++)
    src[r] = r == rank ? c->p + (size_t)lo * c->es : scratch_at(c, r, lo - chunk_lo(c, rank));
  sum_into(c->p + (size_t)lo * c->es, src, hi - lo, c->dt, c->mean);
  for (int p = 0; p < size; p++) {
    if (p == rank) continue;
    int err = MPI_Isend(c->p + (size_t)lo * c->es, (int)((hi - lo) * (int64_t)c->es), MPI_BYTE, p, TAG_AG + ri.seg,
                        comm, reqs_add(c->q, K_AG_SEND, p, ri.seg, false));
    if (err != MPI_SUCCESS) return broken(OP_ALLREDUCE, "could not start a message to", p, now_s() - c->t0);
  }
  return TG_OK;
}

static tg_status all_reduce(unsigned char *p, tg_dtype dt, int64_t n, int mean, double t0) {
  ar_ctx c = {.p = p, .dt = dt, .es = tg_dtype_size(dt), .n = n, .mean = mean, .t0 = t0};
  int64_t biggest = n / size + 1;
  if (!seg_bytes) {
    const char *e = getenv("TG_DIST_SEGMENT_KB");
    long kb = e ? strtol(e, NULL, 10) : 0;
    seg_bytes = kb > 0 && kb <= (1L << 20) ? (size_t)kb << 10 : (size_t)256 << 10;
  }
  c.seg = (int64_t)(seg_bytes / c.es) > 0 ? (int64_t)(seg_bytes / c.es) : 1;
  if (biggest / c.seg >= MAX_SEGS) c.seg = biggest / (MAX_SEGS - 1) + 1;
  size_t need = (size_t)(size - 1) * (size_t)(chunk_hi(&c, rank) - chunk_lo(&c, rank)) * c.es;
  if (need > scratch_cap) {
    /* in whole huge pages, as host_alloc gives tensors of 2 MB and more: over Open MPI's shared memory (CMA, the
     * receiver copying out of the sender's pages with process_vm_readv) a copy from huge pages into small ones ran
     * at 2.5 GB/s where huge into huge ran at 11 (small into small 5.5): the 2-4 MB all-reduces, a tensor in huge
     * pages and a scratch of 1-2 MB in small ones, were 0.6-0.7x of MPI_Allreduce */
    need = (need + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    unsigned char *s = host_alloc(need);
    if (!s) {
      tg_set_error(TG_ERR_NOMEM, "tg_dist_all_reduce: no memory for %zu bytes of peers' chunks", need);
      return TG_ERR_NOMEM;
    }
    host_free(scratch, scratch_cap);
    scratch = s;
    scratch_cap = need;
  }
  int64_t nreq = 0;
  for (int k = 0; k < size; k++) nreq += 2 * (size - 1) * segs_of(&c, k);
  reqs q;
  c.count = mem_calloc((size_t)segs_of(&c, rank) + 1, sizeof *c.count);
  if (!c.count || !reqs_init(&q, (int)nreq)) {
    free(c.count);
    tg_set_error(TG_ERR_NOMEM, "tg_dist_all_reduce: no memory for %lld requests", (long long)nreq);
    return TG_ERR_NOMEM;
  }
  c.q = &q;
  tg_status st = TG_OK;
  for (int64_t s = 0; s < segs_of(&c, rank) && st == TG_OK; s++) {  /* peers' pieces of our chunk */
    int64_t lo, hi;
    seg_range(&c, rank, s, &lo, &hi);
    for (int p = 0; p < size && st == TG_OK; p++) {
      if (p == rank) continue;
      if (MPI_Irecv(scratch_at(&c, p, lo - chunk_lo(&c, rank)), (int)((hi - lo) * (int64_t)c.es), MPI_BYTE, p,
                    TAG_RS + (int)s, comm, reqs_add(&q, K_RS_RECV, p, (int)s, true)) != MPI_SUCCESS)
        st = broken(OP_ALLREDUCE, "could not start a message from", p, now_s() - t0);
    }
  }
  for (int k = 0; k < size && st == TG_OK; k++) {  /* our pieces of the others' chunks */
    if (k == rank) continue;
    for (int64_t s = 0; s < segs_of(&c, k) && st == TG_OK; s++) {
      int64_t lo, hi;
      seg_range(&c, k, s, &lo, &hi);
      if (MPI_Isend(p + (size_t)lo * c.es, (int)((hi - lo) * (int64_t)c.es), MPI_BYTE, k, TAG_RS + (int)s, comm,
                    reqs_add(&q, K_RS_SEND, k, (int)s, false)) != MPI_SUCCESS)
        st = broken(OP_ALLREDUCE, "could not start a message to", k, now_s() - t0);
    }
  }
  if (st == TG_OK) st = reqs_wait(OP_ALLREDUCE, &q, t0, ar_done, &c);
  reqs_free(&q);
  free(c.count);
  return st;
}

/* DEBUG=2: a line per collective, as a line per kernel */
static void debug_line(int op, tg_tensor *t, size_t nbytes, double t0, tg_status st) {
  if (env_get()->debug < 2) return;
  double ms = (now_s() - t0) * 1e3;
  char shape[400] = "";
  if (t) {
    int64_t h[HDR_LEN] = {0};
    h[3] = tg_dtype_of(t);
    h[4] = tg_ndim(t);
    for (int i = 0; i < tg_ndim(t) && i < TG_MAX_DIMS; i++) h[6 + i] = tg_shape(t, i);
    shape_text(shape, sizeof shape, h);
  }
  fprintf(stderr, "dist: rank %d/%d %-18s %-28s %10zu bytes %9.3f ms %7.2f GB/s%s\n", rank, size, op_name(op), shape,
          nbytes, ms, ms > 0 ? (double)nbytes / ms / 1e6 : 0.0, st == TG_OK ? "" : " (failed)");
}

static void fill_header(int64_t *h, int op, tg_tensor *t, int64_t arg) {
  memset(h, 0, HDR_LEN * sizeof *h);
  h[0] = 0x7467646973740001LL;
  h[1] = seq++;
  h[2] = op;
  h[3] = t ? (int64_t)tg_dtype_of(t) : -1;
  h[4] = t ? tg_ndim(t) : 0;
  h[5] = arg;
  for (int i = 0; t && i < tg_ndim(t) && i < TG_MAX_DIMS; i++) h[6 + i] = tg_shape(t, i);
}

/* the checks every collective starts with; *local: no peers (not launched by mpirun, or one rank) */
static tg_status begin(int op, tg_tensor *t, bool need_t, bool *local) {
  if (need_t && !t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: tensor is NULL", op_name(op));
    return tg_error_status();
  }
  if (state == ST_NONE || state == ST_FINALIZED) {
    tg_set_error(TG_ERR_ARG, "%s: call tg_dist_init first", op_name(op));
    return TG_ERR_ARG;
  }
  if (state == ST_BROKEN) {
    tg_set_error(TG_ERR_IO, "%s: an earlier collective failed on rank %d, so the ranks are out of step; finalize "
                 "and exit", op_name(op), rank);
    return TG_ERR_IO;
  }
  *local = state == ST_LOCAL || size == 1;
  return TG_OK;
}

tg_status tg_dist_all_reduce(tg_tensor *t, tg_dist_op op) {
  if (op != TG_DIST_SUM && op != TG_DIST_MEAN) {
    tg_set_error(TG_ERR_ARG, "tg_dist_all_reduce: op %d is neither TG_DIST_SUM nor TG_DIST_MEAN", (int)op);
    return TG_ERR_ARG;
  }
  if (t && op == TG_DIST_MEAN && tg_dtype_of(t) == TG_BOOL) {
    tg_set_error(TG_ERR_ARG, "tg_dist_all_reduce: a bool tensor has no mean (TG_DIST_SUM is a logical or)");
    return TG_ERR_ARG;
  }
  pthread_mutex_lock(&dist_mu);
  bool local = false;
  tg_status st = begin(OP_ALLREDUCE, t, true, &local);
  host_view v = {0};
  bool opened = false;
  if (st == TG_OK) {
    st = view_open("tg_dist_all_reduce", t, &v, true);
    opened = st == TG_OK;
  }
  double t0 = now_s();  /* the timeout counts from here: computing t (compiling its kernels) may take long */
  bool small = v.nbytes <= INLINE_BYTES;
  if (st == TG_OK && !local) {
    int64_t h[HDR_LEN];
    fill_header(h, OP_ALLREDUCE, t, op);
    st = exchange_header(OP_ALLREDUCE, h, small ? v.p : NULL, v.nbytes, t0);
  }
  if (st == TG_OK && v.nbytes && !local && small) {  /* every rank has every rank's values: sum in rank order */
    const void *src[size];
    for (int r = 0; r < size; r++) src[r] = r == rank ? v.p : peer_bytes(r);
    sum_into(v.p, src, tg_numel(t), tg_dtype_of(t), op == TG_DIST_MEAN);
  } else if (st == TG_OK && v.nbytes && !local) {
    st = all_reduce(v.p, tg_dtype_of(t), tg_numel(t), op == TG_DIST_MEAN, t0);
  }
  if (opened) {
    tg_status st2 = view_close(&v, st == TG_OK && !local);
    if (st == TG_OK) st = st2;
  }
  debug_line(OP_ALLREDUCE, t, v.nbytes, t0, st);
  pthread_mutex_unlock(&dist_mu);
  return st;
}

tg_status tg_dist_broadcast(tg_tensor *t, int root) {
  pthread_mutex_lock(&dist_mu);
  bool local = false;
  tg_status st = begin(OP_BCAST, t, true, &local);
  if (st == TG_OK && (root < 0 || root >= size)) {
    tg_set_error(TG_ERR_ARG, "tg_dist_broadcast: root %d is not a rank of %d", root, size);
    st = TG_ERR_ARG;
  }
  host_view v = {0};
  bool opened = false;
  if (st == TG_OK) {
    st = view_open("tg_dist_broadcast", t, &v, rank == root);
    opened = st == TG_OK;
  }
  double t0 = now_s();
  bool small = v.nbytes <= INLINE_BYTES;
  if (st == TG_OK && !local) {
    int64_t h[HDR_LEN];
    fill_header(h, OP_BCAST, t, root);
    st = exchange_header(OP_BCAST, h, small && rank == root ? v.p : NULL, v.nbytes, t0);
  }
  if (st == TG_OK && !local && v.nbytes && small) {  /* root's bytes came with its header */
    if (rank != root) memcpy(v.p, peer_bytes(root), v.nbytes);
  } else if (st == TG_OK && !local && v.nbytes) {
    int npieces = (int)((v.nbytes + PIECE_BYTES - 1) / PIECE_BYTES);
    reqs q;
    if (!reqs_init(&q, npieces * (rank == root ? size : 1))) {
      st = TG_ERR_NOMEM;
    } else {
      for (int i = 0; i < npieces && st == TG_OK; i++) {
        size_t off = (size_t)i * PIECE_BYTES, len = v.nbytes - off < PIECE_BYTES ? v.nbytes - off : PIECE_BYTES;
        for (int p = 0; p < size && st == TG_OK; p++) {
          if (rank == root ? p == root : p != root) continue;
          int err = rank == root
                        ? MPI_Isend(v.p + off, (int)len, MPI_BYTE, p, TAG_BCAST, comm, reqs_add(&q, 0, p, i, false))
                        : MPI_Irecv(v.p + off, (int)len, MPI_BYTE, p, TAG_BCAST, comm, reqs_add(&q, 0, p, i, true));
          if (err != MPI_SUCCESS) st = broken(OP_BCAST, "could not start a message with", p, now_s() - t0);
        }
      }
      if (st == TG_OK) st = reqs_wait(OP_BCAST, &q, t0, NULL, NULL);
      reqs_free(&q);
    }
  }
  if (opened) {
    tg_status st2 = view_close(&v, st == TG_OK && !local && rank != root);
    if (st == TG_OK) st = st2;
  }
  debug_line(OP_BCAST, t, v.nbytes, t0, st);
  pthread_mutex_unlock(&dist_mu);
  return st;
}

tg_status tg_dist_barrier(void) {
  pthread_mutex_lock(&dist_mu);
  bool local = false;
  double t0 = now_s();
  tg_status st = begin(OP_BARRIER, NULL, false, &local);
  if (st == TG_OK && !local) {
    int64_t h[HDR_LEN];
    fill_header(h, OP_BARRIER, NULL, 0);
    st = exchange_header(OP_BARRIER, h, NULL, 0, t0);
  }
  pthread_mutex_unlock(&dist_mu);
  return st;
}
