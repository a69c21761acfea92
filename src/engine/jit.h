/* jit.h — the engine's capture hook: while a JIT step is captured, realize.c records every launch. */
#ifndef TG_JIT_H
#define TG_JIT_H

#include "runtime/device.h"

/* A recorded action: a kernel launch on dev, or (prog NULL) a copy of nbytes from bufs[1] on src_dev to
 * bufs[0] on dev, as place.c copies between devices. A copy is two slots like a kernel's (slot 0 written,
 * slot 1 read), so inputs are patched into it and the memory planner sees its buffers as a kernel's. A kernel
 * writes its first nout slots (several outputs: schedule.h) and reads the others. */
typedef struct jit_launch {
  tg_program *prog;
  const device *dev;
  int nbufs, nout, nthreads;
  tg_buffer **bufs;   /* retained; NULL once the memory planner moved the buffer into the arena */
  double flops, bytes;  /* for DEBUG=2's line per replayed kernel */
  const device *src_dev;  /* a copy: the source's device */
  size_t nbytes;          /* a copy: bytes copied */
} jit_launch;

/* a random draw made during the capture: its counter buffer gets a fresh counter on every replay */
typedef struct jit_rng {
  tg_buffer *buf;     /* retained */
  uint64_t base, n;
} jit_rng;

typedef struct jit_capture {
  jit_launch *launches;
  int n, cap;
  jit_rng *rng;
  int nrng, caprng;
  bool failed;
} jit_capture;

/* the capture in progress, or NULL */
jit_capture *jit_capturing(void);
/* records one launch writing bufs[0..nout) (realize.c calls it while capturing); buffers and program are retained */
void jit_record(jit_capture *c, const device *dev, tg_program *prog, tg_buffer *const *bufs, int nbufs, int nout,
                int nthreads, double flops, double bytes);
/* records a copy of nbytes from src to dst (place.c calls it while capturing); both retained */
void jit_record_copy(jit_capture *c, tg_buffer *dst, tg_buffer *src, size_t nbytes);

/* DEBUG=2's line for one launched kernel: time, GFLOP/s, GB/s (realize.c; replays print theirs too) */
void engine_print_kernel(const char *dev, int k, const char *name, int nbufs, double flops, double bytes, double ms,
                         double total_ms);
double engine_now_ms(void);

/* tests: fill every planned arena with NaN bytes before each replay, so a kernel reading a buffer the
 * planner reused before writing it gives NaN instead of a stale value that happens to be right */
void jit_set_poison(bool on);
/* tests: true when the plan of a captured JIT keeps every two buffers alive at the same time apart */
bool jit_plan_ok(const struct tg_jit *j, char *why, size_t whylen);

#endif
