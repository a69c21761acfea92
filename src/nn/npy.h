/* npy.h — the .npy reader's in-memory entry point (npy.c), for the fuzz target (tests/fuzz/fuzz_npy.c). */
#ifndef TG_NN_NPY_H
#define TG_NN_NPY_H

#include "tg.h"

/* tg_npy_load over n bytes of a file in memory (name for messages): a new realized tensor (a copy), or NULL */
tg_tensor *npy_load_bytes(const char *name, const void *bytes, size_t n);

#endif
