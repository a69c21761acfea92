/* env.h — the environment variables tgc reads, parsed strictly in one place.
 *
 * Every variable is read once, at the first call that needs one, and parsed against its accepted values
 * (integers in a range, booleans 0/1, a device name, a compiler command). An empty variable counts as unset.
 * A bad value is never replaced by a default in silence: the value falls back to its default only so that
 * code that merely prints (DEBUG) keeps working, and env_check() makes every call that depends on the
 * variable return TG_ERR_ARG with a message naming the variable, the value and what is accepted, for as
 * long as the process runs. Which calls check which variables:
 *   DEV                  device_default(): tensor creation from data, realize
 *   JIT                  tg_jit_call
 *   all the others       realize (tg_realize, tg_realize_many, tg_to_host, tg_item, ...)
 */
#ifndef TG_ENV_H
#define TG_ENV_H

#include <stdbool.h>

#include "tg.h"

typedef enum {
  ENV_DEBUG,        /* DEBUG=0..7 */
  ENV_BEAM,         /* BEAM=0..ENV_BEAM_MAX */
  ENV_NOOPT,        /* NOOPT=0|1 */
  ENV_JIT,          /* JIT=0|1 */
  ENV_DEV,          /* DEV=CPU|CPU:0|CL|CL:n|CUDA|CUDA:n */
  ENV_THREADS,      /* TG_THREADS=1..ENV_THREADS_MAX */
  ENV_BEAM_LIMIT,   /* TG_BEAM_LIMIT=seconds > 0 */
  ENV_NO_NATIVE,    /* TG_NO_NATIVE=0|1 */
  ENV_VEC_BYTES,    /* TG_VEC_BYTES=0|16|32|64 (tests) */
  ENV_CC,           /* TG_CC=a command: program and arguments */
  ENV_MEMORY_LIMIT, /* TG_MEMORY_LIMIT=bytes, with K, M, G or T (binary units) */
  ENV_CHUNKS,       /* TG_CHUNKS=1..ENV_CHUNKS_MAX chunks per thread of a threaded CPU kernel (tests, benchmarks) */
  ENV_COUNT
} env_var;

#define ENV_BIT(v) (1u << (v))
#define ENV_ALL ((1u << ENV_COUNT) - 1)
/* the variables realize depends on: all but JIT */
#define ENV_REALIZE (ENV_ALL & ~ENV_BIT(ENV_JIT))

#define ENV_THREADS_MAX 256  /* the thread pool's limit */
#define ENV_BEAM_MAX 256
#define ENV_CHUNKS_MAX 64
#define ENV_CC_MAX_WORDS 16

typedef struct env_values {
  int debug;          /* 0 */
  int beam;           /* 0: no search */
  bool noopt;         /* false */
  bool jit;           /* true */
  int threads;        /* 0: not set (all cores) */
  double beam_limit;  /* 60 seconds */
  bool no_native;     /* false */
  int vec_bytes;      /* -1: not set (the host's) */
  /* the compiler command, split like a shell does (spaces separate words, quotes group them):
   * cc_argv[0] the program, NULL-terminated; "cc" when TG_CC is not set */
  const char *cc_argv[ENV_CC_MAX_WORDS + 1];
  const char *cc_text;  /* TG_CC as given, or NULL when not set */
  char dev[16];         /* DEV upper-cased ("CUDA:1"), "" when not set */
  size_t memory_limit;  /* bytes each device may hold; 0: no limit */
  int chunks;           /* chunks per thread a threaded kernel's loop is cut into; 0: not set (cpu.c picks) */
} env_values;

/* the parsed values (read from the environment on the first call) */
const env_values *env_get(void);
/* TG_OK, or TG_ERR_ARG with tg_error set naming the first bad variable among mask (ENV_BIT()s) */
tg_status env_check(unsigned mask);
/* counts re-reads of the environment: caches of values derived from it compare it to know they are stale */
unsigned env_generation(void);
/* for tests and benchmarks only: reads the environment again (after setenv); values derived from it are
 * recomputed lazily. Not safe while other threads use the library. */
void env_reload(void);

#endif
