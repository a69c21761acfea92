/* gguf.c — GGUF files (ggml's and llama.cpp's format, versions 2 and 3): the reader and its metadata API.
 *
 * A file is "GGUF", a uint32 version, a uint64 tensor count and a uint64 key/value count; the key/values (a
 * string key, a uint32 value type, the value: an array is a uint32 element type, a uint64 length and the
 * elements); the tensor infos (a string name, a uint32 dimension count, that many uint64 dimensions with
 * ggml's ne[0], the fastest, first, a uint32 ggml type, a uint64 offset into the data section); zero padding
 * to general.alignment (32 when absent); the data section. A string is a uint64 length and its bytes, with no
 * NUL. Everything is little-endian.
 *
 * Opening maps the file once and checks all of it: every count, length and offset is compared with what is
 * left of the file, with overflow-safe arithmetic, before anything is allocated from it, so no allocation is
 * more than a small multiple of the file's size. Strings (keys, names, values) are copied NUL-terminated into
 * one arena; numbers are read from the mapping when asked for. Tensors (gguf_api.c) are buffers wrapped on
 * the mapping, each holding a reference to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/gguf.h"
#include "uop/uop.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define GGUF_BIG_ENDIAN 1
#else
#define GGUF_BIG_ENDIAN 0
#endif

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT ((uint64_t)1 << 30)

/* ---- ggml's types --------------------------------------------------------------------------------------- */

/* every type ggml defines (sizes from ggml's block structs), so a file holding one tgc does not read still
 * opens, and is refused only when that tensor is asked for */
static const struct { uint32_t id; gguf_type_info info; } ggml_types[] = {
    {0, {"F32", 1, 4, TG_FLOAT32, true}},      {1, {"F16", 1, 2, TG_FLOAT16, true}},
    {2, {"Q4_0", 32, 18, TG_DTYPE_COUNT, true}}, {3, {"Q4_1", 32, 20, TG_DTYPE_COUNT, true}},
    {6, {"Q5_0", 32, 22, TG_DTYPE_COUNT, true}}, {7, {"Q5_1", 32, 24, TG_DTYPE_COUNT, true}},
    {8, {"Q8_0", 32, 34, TG_DTYPE_COUNT, true}}, {9, {"Q8_1", 32, 36, TG_DTYPE_COUNT, false}},
    {10, {"Q2_K", 256, 84, TG_DTYPE_COUNT, false}}, {11, {"Q3_K", 256, 110, TG_DTYPE_COUNT, false}},
    {12, {"Q4_K", 256, 144, TG_DTYPE_COUNT, true}}, {13, {"Q5_K", 256, 176, TG_DTYPE_COUNT, true}},
    {14, {"Q6_K", 256, 210, TG_DTYPE_COUNT, true}}, {15, {"Q8_K", 256, 292, TG_DTYPE_COUNT, false}},
    {16, {"IQ2_XXS", 256, 66, TG_DTYPE_COUNT, false}}, {17, {"IQ2_XS", 256, 74, TG_DTYPE_COUNT, false}},
    {18, {"IQ3_XXS", 256, 98, TG_DTYPE_COUNT, false}}, {19, {"IQ1_S", 256, 50, TG_DTYPE_COUNT, false}},
    {20, {"IQ4_NL", 32, 18, TG_DTYPE_COUNT, false}}, {21, {"IQ3_S", 256, 110, TG_DTYPE_COUNT, false}},
    {22, {"IQ2_S", 256, 82, TG_DTYPE_COUNT, false}}, {23, {"IQ4_XS", 256, 136, TG_DTYPE_COUNT, false}},
    {24, {"I8", 1, 1, TG_INT8, true}},         {25, {"I16", 1, 2, TG_INT16, true}},
    {26, {"I32", 1, 4, TG_INT32, true}},       {27, {"I64", 1, 8, TG_INT64, true}},
    {28, {"F64", 1, 8, TG_FLOAT64, true}},     {29, {"IQ1_M", 256, 56, TG_DTYPE_COUNT, false}},
    {30, {"BF16", 1, 2, TG_BFLOAT16, true}},   {34, {"TQ1_0", 256, 54, TG_DTYPE_COUNT, false}},
    {35, {"TQ2_0", 256, 66, TG_DTYPE_COUNT, false}}, {39, {"MXFP4", 32, 17, TG_DTYPE_COUNT, false}},
    {40, {"NVFP4", 64, 36, TG_DTYPE_COUNT, false}}, {41, {"Q1_0", 128, 18, TG_DTYPE_COUNT, false}},
};

const gguf_type_info *gguf_type_of(uint32_t t) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
    if (ggml_types[i].id == t) return &ggml_types[i].info;
  return NULL;
}

/* ---- errors and the mapping ------------------------------------------------------------------------------ */

tg_status gguf_error(const tg_gguf *g, tg_status st, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(st, "gguf: %s: %s", g && g->path ? g->path : "?", msg);
  return st;
}

void gguf_map_ref(gguf_map *m) { __atomic_add_fetch(&m->refcnt, 1, __ATOMIC_RELAXED); }

void gguf_map_unref(void *ctx) {
  gguf_map *m = ctx;
  if (!m || __atomic_sub_fetch(&m->refcnt, 1, __ATOMIC_ACQ_REL) > 0) return;
  if (m->heap) free(m->base);
  else munmap(m->base, m->len);
  free(m);
}

void tg_gguf_close(tg_gguf *g) {
  if (!g) return;
  free(g->path);
  free(g->kv);
  free(g->t);
  free(g->strs);
  free(g->sv);
  free(g->kslots);
  free(g->tslots);
  if (g->map) gguf_map_unref(g->map);
  free(g);
}

/* ---- the parser: a cursor that never passes the end ------------------------------------------------------ */

typedef struct cursor {
  tg_gguf *g;
  const uint8_t *p;
  uint64_t n, i;
  char where[192];  /* what is being read, for messages */
} cursor;

static void where(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void where(cursor *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->where, sizeof c->where, fmt, ap);
  va_end(ap);
}

/* true if k more bytes are there; else the error names what was being read */
static bool need(cursor *c, uint64_t k) {
  if (c->n - c->i >= k) return true;
  gguf_error(c->g, TG_ERR_IO, "truncated: %s needs %llu bytes at byte %llu, but the file ends at %llu", c->where,
             (unsigned long long)k, (unsigned long long)c->i, (unsigned long long)c->n);
  return false;
}

static uint64_t le(const uint8_t *p, int nbytes) {
  uint64_t v = 0;
  for (int k = nbytes - 1; k >= 0; k--) v = v << 8 | p[k];
  return v;
}

static bool rd_u32(cursor *c, uint32_t *v) {
  if (!need(c, 4)) return false;
  *v = (uint32_t)le(c->p + c->i, 4);
  c->i += 4;
  return true;
}

static bool rd_u64(cursor *c, uint64_t *v) {
  if (!need(c, 8)) return false;
  *v = le(c->p + c->i, 8);
  c->i += 8;
  return true;
}

/* appends len bytes and a NUL to the string arena; *off gets their place */
static bool arena_add(tg_gguf *g, const uint8_t *s, uint64_t len, uint64_t *off) {
  /* len is at most the file's size (checked by the caller), so the sums below cannot wrap */
  uint64_t want = g->nstrs + len + 1;
  if (want > g->capstrs) {
    uint64_t cap = g->capstrs ? g->capstrs * 2 : 256;
    if (cap < want) cap = want;
    if (cap > SIZE_MAX) return gguf_error(g, TG_ERR_NOMEM, "out of memory for the strings"), false;
    char *p = mem_realloc(g->strs, (size_t)cap);
    if (!p) return gguf_error(g, TG_ERR_NOMEM, "out of memory for %llu bytes of strings", (unsigned long long)cap), false;
    g->strs = p;
    g->capstrs = cap;
  }
  if (len) memcpy(g->strs + g->nstrs, s, (size_t)len);
  g->strs[g->nstrs + len] = 0;
  *off = g->nstrs;
  g->nstrs = want;
  return true;
}

/* a string into the arena; name: a key or a tensor name, which may not hold a NUL */
static bool rd_str(cursor *c, gguf_str *out, bool name) {
  uint64_t len;
  if (!rd_u64(c, &len)) return false;
  if (len > c->n - c->i) {
    gguf_error(c->g, TG_ERR_IO, "%s: a string of %llu bytes at byte %llu runs past the end of the file (%llu bytes)",
               c->where, (unsigned long long)len, (unsigned long long)(c->i - 8), (unsigned long long)c->n);
    return false;
  }
  const uint8_t *s = c->p + c->i;
  if (name && len && memchr(s, 0, (size_t)len)) {
    gguf_error(c->g, TG_ERR_IO, "%s: the name holds a NUL byte", c->where);
    return false;
  }
  if (!arena_add(c->g, s, len, &out->off)) return false;
  out->len = len;
  c->i += len;
  return true;
}

/* bytes of one value of a scalar type; 0 for a string or an array */
static uint64_t scalar_size(uint32_t type) {
  static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return type < sizeof sz ? sz[type] : 0;
}

static bool check_bools(cursor *c, uint64_t n) {
  for (uint64_t k = 0; k < n; k++)
    if (c->p[c->i + k] > 1) {
      gguf_error(c->g, TG_ERR_IO, "%s: a bool of value %u at byte %llu (only 0 and 1 are valid)", c->where,
                 c->p[c->i + k], (unsigned long long)(c->i + k));
      return false;
    }
  return true;
}

static bool rd_kv(cursor *c, int64_t idx, gguf_kv *kv) {
  tg_gguf *g = c->g;
  where(c, "the key of metadata entry %lld", (long long)idx);
  gguf_str key;
  if (!rd_str(c, &key, true)) return false;
  kv->key = key.off;
  const char *k = g->strs + key.off;
  uint32_t type;
  where(c, "the value type of key '%.64s'", k);
  if (!rd_u32(c, &type)) return false;
  k = g->strs + key.off;  /* rd_* may move the arena */
  if (type > TG_GGUF_FLOAT64) return gguf_error(g, TG_ERR_IO, "key '%.64s' has an unknown value type %u", k, type), false;
  kv->type = (tg_gguf_type)type;
  where(c, "the value of key '%.64s'", k);
  if (type == TG_GGUF_STRING) {
    gguf_str s;
    if (!rd_str(c, &s, false)) return false;
    kv->pos = s.off;
    kv->n = s.len;
    return true;
  }
  if (type != TG_GGUF_ARRAY) {
    uint64_t sz = scalar_size(type);
    if (!need(c, sz) || (type == TG_GGUF_BOOL && !check_bools(c, 1))) return false;
    kv->pos = c->i;
    c->i += sz;
    return true;
  }
  uint32_t elem;
  uint64_t n;
  where(c, "the array header of key '%.64s'", k);
  if (!rd_u32(c, &elem) || !rd_u64(c, &n)) return false;
  if (elem > TG_GGUF_FLOAT64)
    return gguf_error(g, TG_ERR_IO, "key '%.64s': an array of unknown element type %u", k, elem), false;
  if (elem == TG_GGUF_ARRAY)
    return gguf_error(g, TG_ERR_IO, "key '%.64s': an array of arrays (tgc, as llama.cpp, reads none)", k), false;
  kv->elem = (tg_gguf_type)elem;
  kv->n = n;
  uint64_t left = c->n - c->i, sz = scalar_size(elem);
  /* every element takes at least sz bytes (a string at least its 8-byte length) */
  if (n > left / (sz ? sz : 8))
    return gguf_error(g, TG_ERR_IO, "key '%.64s': an array of %llu %s elements at byte %llu runs past the end of the file "
                      "(%llu bytes)", k, (unsigned long long)n, tg_gguf_type_name(kv->elem), (unsigned long long)c->i,
                      (unsigned long long)c->n), false;
  if (sz) {
    where(c, "the array of key '%.64s'", k);
    if (elem == TG_GGUF_BOOL && !check_bools(c, n)) return false;
    kv->pos = c->i;
    c->i += n * sz;
    return true;
  }
  /* strings: their places in g->sv, which grows by n (n <= the bytes left / 8, so at most twice the file) */
  if (n > (SIZE_MAX / sizeof(gguf_str)) - g->nsv)
    return gguf_error(g, TG_ERR_NOMEM, "key '%.64s': too many strings", k), false;
  gguf_str *sv = mem_realloc(g->sv, (size_t)(g->nsv + n ? g->nsv + n : 1) * sizeof *sv);
  if (!sv) return gguf_error(g, TG_ERR_NOMEM, "out of memory for the %llu strings of key '%.64s'", (unsigned long long)n, k), false;
  g->sv = sv;
  kv->pos = g->nsv;
  for (uint64_t e = 0; e < n; e++) {
    where(c, "string %llu of the array of key '%.64s'", (unsigned long long)e, g->strs + kv->key);
    if (!rd_str(c, &g->sv[g->nsv], false)) return false;
    g->nsv++;
  }
  return true;
}

static bool rd_tensor(cursor *c, int64_t idx, gguf_tensor *t) {
  tg_gguf *g = c->g;
  where(c, "the name of tensor %lld", (long long)idx);
  gguf_str name;
  if (!rd_str(c, &name, true)) return false;
  t->name = name.off;
  where(c, "the dimension count of tensor '%.64s'", g->strs + t->name);
  uint32_t nd;
  if (!rd_u32(c, &nd)) return false;
  const char *nm = g->strs + t->name;
  if (nd > TG_MAX_DIMS)
    return gguf_error(g, TG_ERR_IO, "tensor '%.64s' has %u dimensions (tgc reads at most %d)", nm, nd, TG_MAX_DIMS), false;
  t->ndim = (int)nd;
  where(c, "the dimensions of tensor '%.64s'", nm);
  int64_t numel = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t v;
    if (!rd_u64(c, &v)) return false;
    t->ne[d] = v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
    if (t->ne[d] < 0 || !size_mul(numel, t->ne[d], &numel)) overflow = true;
  }
  if (overflow) {
    char dims[TG_MAX_DIMS * 22 + 4] = "";
    size_t used = 0;
    for (uint32_t d = 0; d < nd && used < sizeof dims; d++)
      used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
    return gguf_error(g, TG_ERR_IO, "tensor '%.64s': its dimensions (%s) are too large (their product overflows)", nm,
                      dims), false;
  }
  where(c, "the type of tensor '%.64s'", nm);
  if (!rd_u32(c, &t->type)) return false;
  const gguf_type_info *ti = gguf_type_of(t->type);
  if (!ti) return gguf_error(g, TG_ERR_IO, "tensor '%.64s' has an unknown type %u", nm, t->type), false;
  if (nd && t->ne[0] % ti->block)
    return gguf_error(g, TG_ERR_IO, "tensor '%.64s': its row of %lld elements is not a whole number of %s blocks of %lld",
                      nm, (long long)t->ne[0], ti->name, (long long)ti->block), false;
  if (!nd && ti->block != 1)
    return gguf_error(g, TG_ERR_IO, "tensor '%.64s': a scalar of block type %s", nm, ti->name), false;
  /* numel <= 2^60 and size / block <= 8, so this fits in uint64 */
  t->nbytes = (uint64_t)(numel / ti->block) * (uint64_t)ti->size;
  where(c, "the offset of tensor '%.64s'", nm);
  return rd_u64(c, &t->offset);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* the slot of name in a table of n entries (name i at strs + name_at(i)): holds the index + 1, or 0 */
static int64_t *slot_of(const tg_gguf *g, int64_t *slots, uint64_t nslots, bool tensors, const char *name) {
  uint64_t mask = nslots - 1, j = hash_str(name) & mask;
  for (;;) {
    int64_t k = slots[j];
    if (!k) return &slots[j];
    uint64_t off = tensors ? g->t[k - 1].name : g->kv[k - 1].key;
    if (!strcmp(g->strs + off, name)) return &slots[j];
    j = (j + 1) & mask;
  }
}

/* builds the name table of n keys or tensors; refuses a name given twice */
static bool build_table(tg_gguf *g, bool tensors, int64_t n, int64_t **slots_out, uint64_t *nslots_out) {
  uint64_t ns = 1;
  while (ns < (uint64_t)n * 2) ns *= 2;
  int64_t *slots = mem_calloc((size_t)ns, sizeof *slots);
  if (!slots) return gguf_error(g, TG_ERR_NOMEM, "out of memory for a table of %lld names", (long long)n), false;
  *slots_out = slots;
  *nslots_out = ns;
  for (int64_t i = 0; i < n; i++) {
    const char *name = g->strs + (tensors ? g->t[i].name : g->kv[i].key);
    int64_t *s = slot_of(g, slots, ns, tensors, name);
    if (*s)
      return gguf_error(g, TG_ERR_IO, "%s '%.64s' appears twice (entries %lld and %lld)", tensors ? "tensor" : "key", name,
                        (long long)(*s - 1), (long long)i), false;
    *s = i + 1;
  }
  return true;
}

int64_t gguf_find(const tg_gguf *g, bool tensors, const char *name) {
  int64_t *slots = tensors ? g->tslots : g->kslots;
  uint64_t ns = tensors ? g->ntslots : g->nkslots;
  if (!ns) return -1;
  int64_t k = *slot_of(g, slots, ns, tensors, name);
  return k - 1;
}

/* general.alignment: a power of two given as an integer (the spec says uint32; any integer type is taken) */
static bool read_alignment(tg_gguf *g) {
  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  int64_t i = gguf_find(g, false, "general.alignment");
  if (i < 0) return true;
  const gguf_kv *kv = &g->kv[i];
  uint64_t sz = scalar_size(kv->type);
  if (!sz || kv->type == TG_GGUF_BOOL || kv->type == TG_GGUF_FLOAT32 || kv->type == TG_GGUF_FLOAT64)
    return gguf_error(g, TG_ERR_IO, "general.alignment is a %s, not an integer", tg_gguf_type_name(kv->type)), false;
  uint64_t a = le(g->base + kv->pos, (int)sz);
  bool neg = (kv->type == TG_GGUF_INT8 || kv->type == TG_GGUF_INT16 || kv->type == TG_GGUF_INT32 ||
              kv->type == TG_GGUF_INT64) && (a >> (sz * 8 - 1)) & 1;
  if (neg || a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
    return gguf_error(g, TG_ERR_IO, "general.alignment %s%llu is not a power of two up to 2^30", neg ? "(negative) " : "",
                      (unsigned long long)a), false;
  g->alignment = a;
  return true;
}

static tg_status parse(tg_gguf *g) {
  cursor c = {.g = g, .p = g->base, .n = g->len};
  if (GGUF_BIG_ENDIAN) return gguf_error(g, TG_ERR_IO, "reading GGUF on a big-endian machine is not supported");
  where(&c, "the magic");
  if (!need(&c, 4)) return TG_ERR_IO;
  if (memcmp(g->base, "GGUF", 4))
    return gguf_error(g, TG_ERR_IO, "not a GGUF file: it starts with bytes %02x %02x %02x %02x, not \"GGUF\"", g->base[0],
                      g->base[1], g->base[2], g->base[3]);
  c.i = 4;
  where(&c, "the version");
  if (!rd_u32(&c, &g->version)) return TG_ERR_IO;
  if (g->version == 1) return gguf_error(g, TG_ERR_IO, "GGUF version 1 is not supported (tgc reads versions 2 and 3)");
  if (g->version != 2 && g->version != 3) {
    if ((g->version & 0xFFFF) == 0 && (g->version >> 24 == 2 || g->version >> 24 == 3))
      return gguf_error(g, TG_ERR_IO, "a big-endian GGUF file (version 0x%08x): tgc reads little-endian files", g->version);
    return gguf_error(g, TG_ERR_IO, "unknown GGUF version %u (tgc reads versions 2 and 3)", g->version);
  }
  uint64_t nt, nkv;
  where(&c, "the tensor count");
  if (!rd_u64(&c, &nt)) return TG_ERR_IO;
  where(&c, "the key/value count");
  if (!rd_u64(&c, &nkv)) return TG_ERR_IO;
  /* a key/value takes at least 13 bytes (an empty key, a type, a one-byte value), a tensor info at least 24 */
  uint64_t left = c.n - c.i;
  if (nkv > left / 13 || nt > (left - nkv * 13) / 24)
    return gguf_error(g, TG_ERR_IO, "%llu tensors and %llu key/values cannot fit in the %llu bytes after the header",
                      (unsigned long long)nt, (unsigned long long)nkv, (unsigned long long)left);
  g->kv = mem_calloc((size_t)(nkv ? nkv : 1), sizeof *g->kv);
  g->t = mem_calloc((size_t)(nt ? nt : 1), sizeof *g->t);
  if (!g->kv || !g->t) return gguf_error(g, TG_ERR_NOMEM, "out of memory for %llu key/values and %llu tensors",
                                         (unsigned long long)nkv, (unsigned long long)nt);
  for (uint64_t i = 0; i < nkv; i++, g->nkv++)
    if (!rd_kv(&c, (int64_t)i, &g->kv[i])) return tg_error_status();
  if (!build_table(g, false, g->nkv, &g->kslots, &g->nkslots)) return tg_error_status();
  for (uint64_t i = 0; i < nt; i++, g->nt++)
    if (!rd_tensor(&c, (int64_t)i, &g->t[i])) return tg_error_status();
  if (!build_table(g, true, g->nt, &g->tslots, &g->ntslots)) return tg_error_status();
  if (!read_alignment(g)) return TG_ERR_IO;
  /* the data section starts at the next multiple of the alignment (c.i <= 2^64 - 2^30 for any mapped file) */
  uint64_t start = (c.i + g->alignment - 1) / g->alignment * g->alignment;
  if (start > g->len) {
    if (g->nt) return gguf_error(g, TG_ERR_IO, "truncated: the data section would start at byte %llu, past the end of the "
                                 "file (%llu bytes)", (unsigned long long)start, (unsigned long long)g->len);
    start = g->len;
  }
  g->data_off = start;
  uint64_t data_len = g->len - start;
  for (int64_t i = 0; i < g->nt; i++) {
    const gguf_tensor *t = &g->t[i];
    const char *nm = g->strs + t->name;
    if (t->offset % g->alignment)
      return gguf_error(g, TG_ERR_IO, "tensor '%.64s': its offset %llu is not a multiple of the alignment %llu", nm,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment);
    if (t->offset > data_len || t->nbytes > data_len - t->offset)
      return gguf_error(g, TG_ERR_IO, "tensor '%.64s' (%s, %llu bytes at offset %llu) runs past the end of the data "
                        "section (%llu bytes from byte %llu)", nm, gguf_type_of(t->type)->name,
                        (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned long long)data_len,
                        (unsigned long long)start);
  }
  return TG_OK;
}

/* ---- opening ----------------------------------------------------------------------------------------- */

static tg_gguf *reader_new(const char *path) {
  tg_gguf *g = mem_calloc(1, sizeof *g);
  if (!g) return NULL;
  g->path = mem_strdup(path);
  if (!g->path) {
    free(g);
    return NULL;
  }
  return g;
}

/* parses g (its map set); on failure frees it and returns NULL */
static tg_gguf *finish(tg_gguf *g) {
  if (parse(g) == TG_OK) return g;
  tg_gguf_close(g);
  return NULL;
}

tg_gguf *tg_gguf_open(const char *path) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_gguf_open: path is NULL");
    return NULL;
  }
  tg_gguf *g = reader_new(path);
  if (!g) return NULL;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below as not a regular file) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat sb;
  const char *fail = NULL;
  int err = 0;
  tg_status st = TG_ERR_IO;
  gguf_map *m = NULL;
  void *base = MAP_FAILED;
  if (fd < 0) fail = "cannot open", err = errno;
  else if (fstat(fd, &sb) != 0) fail = "cannot stat", err = errno;
  else if (!S_ISREG(sb.st_mode)) fail = "not a regular file";
  else if (sb.st_size == 0) fail = "the file is empty, not a GGUF file";
  else if ((uint64_t)sb.st_size > SIZE_MAX) fail = "too large to map";
  else if (!(m = mem_alloc(sizeof *m))) fail = "out of memory", st = TG_ERR_NOMEM;
  else if ((base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) fail = "cannot map", err = errno;
  if (fd >= 0) close(fd);
  if (fail) {
    free(m);
    gguf_error(g, st, "%s%s%s", fail, err ? ": " : "", err ? strerror(err) : "");
    tg_gguf_close(g);
    return NULL;
  }
  *m = (gguf_map){.base = base, .len = (size_t)sb.st_size, .refcnt = 1};
  g->map = m;
  g->base = base;
  g->len = (uint64_t)sb.st_size;
  return finish(g);
}

tg_gguf *gguf_open_bytes(const char *name, const void *bytes, size_t n) {
  tg_gguf *g = reader_new(name ? name : "(memory)");
  if (!g) return NULL;
  gguf_map *m = mem_alloc(sizeof *m);
  void *copy = mem_alloc(n ? n : 1);
  if (!m || !copy) {
    free(m);
    free(copy);
    gguf_error(g, TG_ERR_NOMEM, "out of memory for a copy of %zu bytes", n);
    tg_gguf_close(g);
    return NULL;
  }
  if (n) memcpy(copy, bytes, n);
  *m = (gguf_map){.base = copy, .len = n, .refcnt = 1, .heap = true};
  g->map = m;
  g->base = copy;
  g->len = n;
  return finish(g);
}
