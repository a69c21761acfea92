/* jit.h — the engine's capture hook: while a JIT step is captured, realize.c records every launch. */
#ifndef TG_JIT_H
#define TG_JIT_H

#include "runtime/device.h"

typedef struct jit_launch {
  tg_program *prog;
  int nbufs, nthreads;
  tg_buffer **bufs;   /* retained */
} jit_launch;

typedef struct jit_capture {
  jit_launch *launches;
  int n, cap;
  bool failed;
} jit_capture;

/* the capture in progress, or NULL */
jit_capture *jit_capturing(void);
/* records one launch (realize.c calls it while capturing); buffers and program are retained */
void jit_record(jit_capture *c, tg_program *prog, tg_buffer *const *bufs, int nbufs, int nthreads);

#endif
