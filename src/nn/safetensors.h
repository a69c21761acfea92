/* safetensors.h — what the safetensors reader (safetensors.c) and writer (safetensors_save.c) share. */
#ifndef TG_NN_SAFETENSORS_H
#define TG_NN_SAFETENSORS_H

#include "tg.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ST_BIG_ENDIAN 1
#else
#define ST_BIG_ENDIAN 0
/* tg_safetensors_read and tg_safetensors_load over a copy of n bytes of a file (name for messages): the
 * in-memory entry points the fuzz targets use (tests/fuzz/) */
tg_params *st_read_bytes(const char *name, const void *bytes, size_t n);
tg_status st_load_bytes(const char *name, const void *bytes, size_t n, tg_params *p, bool allow_partial);

#endif

/* the format's name of a dtype ("F32", "BF16", ...), NULL for none */
const char *st_dtype_name(tg_dtype dt);

/* records "<path>: <message>" as the error and returns st */
tg_status st_error(tg_status st, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* tg_safetensors_read and tg_safetensors_load over a copy of n bytes of a file (name for messages): the
 * in-memory entry points the fuzz targets use (tests/fuzz/) */
tg_params *st_read_bytes(const char *name, const void *bytes, size_t n);
tg_status st_load_bytes(const char *name, const void *bytes, size_t n, tg_params *p, bool allow_partial);

#endif
