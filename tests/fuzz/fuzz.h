/* fuzz.h — what the libFuzzer targets in this folder share (scripts/fuzz.sh builds and runs them).
 *
 * Each target feeds its input to one reader's in-memory parser (src/nn/data.h, src/nn/safetensors.h) and
 * checks the contract a reader promises: it returns a result, or NULL / an error status with a non-empty
 * message; a result's tensors hold exactly the bytes their shapes say (read back to the host, so AddressSanitizer
 * sees every byte); everything is freed (LeakSanitizer runs after the inputs that allocate more than they free).
 * A broken contract aborts, which libFuzzer reports as a crash with the input that caused it. */
#ifndef TG_FUZZ_H
#define TG_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg.h"

#define FUZZ_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: contract broken: ", __FILE__, __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, " (last error: %d \"%s\")\n", (int)tg_error_status(), tg_error()); \
      abort();                                                             \
    }                                                                      \
  } while (0)

/* a failed call left a status and a message */
#define FUZZ_CHECK_ERROR(what)                                                             \
  FUZZ_CHECK(tg_error_status() != TG_OK && tg_error()[0], "%s failed without an error status and message", what)

/* the end of one input: frees the library's caches and unreferenced IR, so an input that leaks nothing frees
 * everything it allocated. libFuzzer runs LeakSanitizer after an input with more allocations than frees; with
 * the caches growing every input would be one (and fuzzing 30x slower) */
static inline int fuzz_done(void) {
  tg_collect();
  return 0;
}

/* reads every byte of t back to the host (a realized, wrapped tensor: a copy, no kernel) */
static inline void fuzz_read_back(tg_tensor *t, const char *what) {
  int64_t n = 1;
  for (int d = 0; d < tg_ndim(t); d++) {
    FUZZ_CHECK(tg_shape(t, d) >= 0, "%s: a negative extent %lld at axis %d", what, (long long)tg_shape(t, d), d);
    n *= tg_shape(t, d);
  }
  size_t nbytes = (size_t)n * tg_dtype_size(tg_dtype_of(t));
  unsigned char *buf = malloc(nbytes ? nbytes : 1);
  FUZZ_CHECK(buf, "%s: out of memory for %zu bytes", what, nbytes);
  FUZZ_CHECK(tg_to_host(t, buf, nbytes) == TG_OK, "%s: reading %zu bytes back", what, nbytes);
  free(buf);
}

#endif
