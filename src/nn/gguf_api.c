/* gguf_api.c — what a user asks of an opened GGUF file (gguf.c checked all of it): metadata by key, typed
 * and converted; tensor infos; tensors as lazy tensors on the mapping. Plain types are wrapped where they lie;
 * block formats are wrapped as their bytes and dequantized lazily (gguf_quant.c), so they stay quantized in
 * memory and the dequantize fuses into the kernels that read them. */
#include <stdlib.h>
#include <string.h>

#include "nn/gguf.h"
#include "tensor/tensor.h"

/* ---- metadata --------------------------------------------------------------------------------------------- */

uint32_t tg_gguf_version(const tg_gguf *g) { return g ? g->version : 0; }
int64_t tg_gguf_num_kv(const tg_gguf *g) { return g ? g->nkv : -1; }
int64_t tg_gguf_num_tensors(const tg_gguf *g) { return g ? g->nt : -1; }

const char *tg_gguf_type_name(tg_gguf_type type) {
  static const char *names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32",  "float32",
                                "bool",  "string", "array",  "uint64", "int64", "float64"};
  return type >= 0 && (size_t)type < sizeof names / sizeof names[0] ? names[type] : "?";
}

const char *tg_gguf_key(const tg_gguf *g, int64_t i) {
  return g && i >= 0 && i < g->nkv ? g->strs + g->kv[i].key : NULL;
}

tg_gguf_type tg_gguf_kv_type(const tg_gguf *g, const char *key) {
  int64_t i = g && key ? gguf_find(g, false, key) : -1;
  return i < 0 ? TG_GGUF_NONE : g->kv[i].type;
}

/* key's entry, or NULL with an error naming op and the key */
static const gguf_kv *lookup(const tg_gguf *g, const char *key, const char *op) {
  if (!g || !key) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, g ? "key" : "the reader");
    return NULL;
  }
  int64_t i = gguf_find(g, false, key);
  if (i < 0) {
    gguf_error(g, TG_ERR_ARG, "%s: no key '%.128s'", op, key);
    return NULL;
  }
  return &g->kv[i];
}

/* a number of a scalar type read from p */
typedef struct gnum {
  bool is_int, is_float, is_bool, too_big;  /* too_big: a uint64 past INT64_MAX (f holds it) */
  int64_t i;
  double f;
} gnum;

static gnum read_num(tg_gguf_type type, const uint8_t *p) {
  gnum r = {0};
  uint64_t u = 0;
  static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  for (int k = sz[type] - 1; k >= 0; k--) u = u << 8 | p[k];
  switch (type) {
    case TG_GGUF_UINT8: case TG_GGUF_UINT16: case TG_GGUF_UINT32: r.is_int = true; r.i = (int64_t)u; break;
    case TG_GGUF_INT8: r.is_int = true; r.i = (int8_t)u; break;
    case TG_GGUF_INT16: r.is_int = true; r.i = (int16_t)u; break;
    case TG_GGUF_INT32: r.is_int = true; r.i = (int32_t)u; break;
    case TG_GGUF_INT64: r.is_int = true; r.i = (int64_t)u; break;
    case TG_GGUF_UINT64:
      r.is_int = true;
      r.too_big = u > (uint64_t)INT64_MAX;
      r.i = r.too_big ? 0 : (int64_t)u;
      r.f = (double)u;
      return r;
    case TG_GGUF_FLOAT32: {
      float f;
      uint32_t w = (uint32_t)u;
      memcpy(&f, &w, 4);
      r.is_float = true;
      r.f = f;
      return r;
    }
    case TG_GGUF_FLOAT64: r.is_float = true; memcpy(&r.f, &u, 8); return r;
    case TG_GGUF_BOOL: r.is_bool = true; r.i = (int64_t)u; return r;
    default: return r;
  }
  r.f = (double)r.i;
  return r;
}

/* element i of kv (a scalar when kv is not an array: i 0) as a number, or an error naming op */
static bool num_at(const tg_gguf *g, const gguf_kv *kv, int64_t i, const char *op, const char *key, gnum *out) {
  tg_gguf_type type = kv->type == TG_GGUF_ARRAY ? kv->elem : kv->type;
  if (type == TG_GGUF_STRING) {
    gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds string, not a number", op, key);
    return false;
  }
  static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  *out = read_num(type, g->base + kv->pos + (uint64_t)i * sz[type]);
  return true;
}

/* kv is an array (want_array) or not, as the getter op needs; i is in range */
static bool check_shape(const tg_gguf *g, const gguf_kv *kv, bool want_array, int64_t i, const char *op, const char *key) {
  if (want_array != (kv->type == TG_GGUF_ARRAY)) {
    gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' is %s %s%s", op, key, kv->type == TG_GGUF_ARRAY ? "an" : "a",
               tg_gguf_type_name(kv->type), want_array ? ", not an array" : " (use tg_gguf_array_*)");
    return false;
  }
  if (want_array && (i < 0 || (uint64_t)i >= kv->n)) {
    gguf_error(g, TG_ERR_ARG, "%s: index %lld is outside key '%.128s''s array of %llu", op, (long long)i, key,
               (unsigned long long)kv->n);
    return false;
  }
  return true;
}

static tg_status get_int(const tg_gguf *g, const char *key, bool array, int64_t i, int64_t *out, const char *op) {
  const gguf_kv *kv = lookup(g, key, op);
  gnum v;
  if (!kv || !check_shape(g, kv, array, i, op, key) || !num_at(g, kv, i, op, key, &v)) return tg_error_status();
  tg_gguf_type type = array ? kv->elem : kv->type;
  if (!v.is_int) return gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds %s, not an integer", op, key, tg_gguf_type_name(type));
  if (v.too_big) return gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds %.0f, past INT64_MAX", op, key, v.f);
  if (out) *out = v.i;
  return TG_OK;
}

static tg_status get_float(const tg_gguf *g, const char *key, bool array, int64_t i, double *out, const char *op) {
  const gguf_kv *kv = lookup(g, key, op);
  gnum v;
  if (!kv || !check_shape(g, kv, array, i, op, key) || !num_at(g, kv, i, op, key, &v)) return tg_error_status();
  if (v.is_bool) return gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds bool, not a number", op, key);
  if (out) *out = v.f;
  return TG_OK;
}

static tg_status get_bool(const tg_gguf *g, const char *key, bool array, int64_t i, bool *out, const char *op) {
  const gguf_kv *kv = lookup(g, key, op);
  gnum v;
  if (!kv || !check_shape(g, kv, array, i, op, key) || !num_at(g, kv, i, op, key, &v)) return tg_error_status();
  if (!v.is_bool)
    return gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds %s, not bool", op, key, tg_gguf_type_name(array ? kv->elem : kv->type));
  if (out) *out = v.i != 0;
  return TG_OK;
}

static const char *get_string(const tg_gguf *g, const char *key, bool array, int64_t i, size_t *len, const char *op) {
  const gguf_kv *kv = lookup(g, key, op);
  if (!kv || !check_shape(g, kv, array, i, op, key)) return NULL;
  tg_gguf_type type = array ? kv->elem : kv->type;
  if (type != TG_GGUF_STRING) {
    gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' holds %s, not a string", op, key, tg_gguf_type_name(type));
    return NULL;
  }
  gguf_str s = array ? g->sv[kv->pos + (uint64_t)i] : (gguf_str){kv->pos, kv->n};
  if (len) *len = (size_t)s.len;
  return g->strs + s.off;
}

tg_status tg_gguf_get_int(const tg_gguf *g, const char *key, int64_t *out) {
  return get_int(g, key, false, 0, out, "tg_gguf_get_int");
}
tg_status tg_gguf_get_float(const tg_gguf *g, const char *key, double *out) {
  return get_float(g, key, false, 0, out, "tg_gguf_get_float");
}
tg_status tg_gguf_get_bool(const tg_gguf *g, const char *key, bool *out) {
  return get_bool(g, key, false, 0, out, "tg_gguf_get_bool");
}
const char *tg_gguf_get_string(const tg_gguf *g, const char *key, size_t *len) {
  return get_string(g, key, false, 0, len, "tg_gguf_get_string");
}
tg_status tg_gguf_array_int(const tg_gguf *g, const char *key, int64_t i, int64_t *out) {
  return get_int(g, key, true, i, out, "tg_gguf_array_int");
}
tg_status tg_gguf_array_float(const tg_gguf *g, const char *key, int64_t i, double *out) {
  return get_float(g, key, true, i, out, "tg_gguf_array_float");
}
tg_status tg_gguf_array_bool(const tg_gguf *g, const char *key, int64_t i, bool *out) {
  return get_bool(g, key, true, i, out, "tg_gguf_array_bool");
}
const char *tg_gguf_array_string(const tg_gguf *g, const char *key, int64_t i, size_t *len) {
  return get_string(g, key, true, i, len, "tg_gguf_array_string");
}

tg_status tg_gguf_get_array(const tg_gguf *g, const char *key, tg_gguf_type *elem_type, int64_t *len) {
  const char *op = "tg_gguf_get_array";
  const gguf_kv *kv = lookup(g, key, op);
  if (!kv) return tg_error_status();
  if (kv->type != TG_GGUF_ARRAY)
    return gguf_error(g, TG_ERR_ARG, "%s: key '%.128s' is a %s, not an array", op, key, tg_gguf_type_name(kv->type));
  if (elem_type) *elem_type = kv->elem;
  if (len) *len = (int64_t)kv->n;
  return TG_OK;
}

/* ---- tensors ------------------------------------------------------------------------------------------------ */

tg_status tg_gguf_tensor_info(const tg_gguf *g, int64_t i, tg_gguf_info *info) {
  if (!g || !info) {
    tg_set_error(TG_ERR_ARG, "tg_gguf_tensor_info: %s is NULL", g ? "info" : "the reader");
    return TG_ERR_ARG;
  }
  if (i < 0 || i >= g->nt) return gguf_error(g, TG_ERR_ARG, "tg_gguf_tensor_info: index %lld is outside the %lld tensors",
                                              (long long)i, (long long)g->nt);
  const gguf_tensor *t = &g->t[i];
  const gguf_type_info *ti = gguf_type_of(t->type);
  *info = (tg_gguf_info){.name = g->strs + t->name, .type = t->type, .type_name = ti->name, .supported = ti->supported,
                         .ndim = t->ndim, .offset = g->data_off + t->offset, .nbytes = t->nbytes};
  for (int d = 0; d < t->ndim; d++) info->shape[d] = t->ne[t->ndim - 1 - d];
  return TG_OK;
}

int64_t tg_gguf_find_tensor(const tg_gguf *g, const char *name) { return g && name ? gguf_find(g, true, name) : -1; }

/* n bytes at p as a caller-owned (unscoped) tensor of dtype dt and the given shape: on the mapping when p is
 * aligned for dt, else an aligned private copy (a file with general.alignment below the element size) */
static tg_tensor *wrap(tg_gguf *g, tg_dtype dt, int ndim, const int64_t *shape, const uint8_t *p, size_t n) {
  size_t es = tg_dtype_size(dt);
  if ((uintptr_t)p % es == 0) {
    gguf_map_ref(g->map);
    return tensor_wrap_memory(dt, ndim, shape, (void *)p, n, gguf_map_unref, g->map);
  }
  size_t cap = (n + 63) / 64 * 64;
  void *copy = mem_aligned(64, cap ? cap : 64);
  if (!copy) return NULL;
  memcpy(copy, p, n);
  return tensor_wrap_memory(dt, ndim, shape, copy, n, free, copy);
}

/* tensor i as the file stores it, a tensor of the caller's scope: a plain type as its dtype in its shape; a block
 * format as uint8 (rows, bytes per row), its rows those of every dimension but the fastest */
static tg_tensor *stored(tg_gguf *g, int64_t i) {
  const gguf_tensor *t = &g->t[i];
  const gguf_type_info *ti = gguf_type_of(t->type);
  int64_t shape[TG_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->ne[t->ndim - 1 - d];
  const uint8_t *p = g->base + g->data_off + t->offset;
  tg_tensor *w;
  if (ti->dtype != TG_DTYPE_COUNT) {
    w = wrap(g, ti->dtype, t->ndim, shape, p, (size_t)t->nbytes);
  } else {
    /* a row is a whole number of blocks (gguf.c checked ne[0]); a tensor of no elements is (0, 0) */
    int64_t row = t->ne[0] / ti->block * ti->size, rows = row ? (int64_t)(t->nbytes / (uint64_t)row) : 0;
    w = wrap(g, TG_UINT8, 2, (int64_t[]){rows, row}, p, (size_t)t->nbytes);
  }
  tg_tensor *out = w ? tensor_new(w->u) : NULL;   /* a tensor of the caller's scope, as every new tensor */
  tg_free(w);
  return out;
}

/* the index of tensor name that tgc reads, or -1 with an error naming op */
static int64_t readable(tg_gguf *g, const char *name, const char *op) {
  if (!g || !name) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, g ? "name" : "the reader");
    return -1;
  }
  int64_t i = gguf_find(g, true, name);
  if (i < 0) {
    gguf_error(g, TG_ERR_ARG, "%s: no tensor '%.128s'", op, name);
    return -1;
  }
  const gguf_type_info *ti = gguf_type_of(g->t[i].type);
  if (!ti->supported) {
    gguf_error(g, TG_ERR_ARG, "%s: tensor '%.128s' has type %s, which tgc does not read (it reads F32, F16, BF16, "
               "F64, I8-I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)", op, name, ti->name);
    return -1;
  }
  return i;
}

/* on failure: the error names the tensor (out of memory stays as it is) */
static tg_tensor *named(tg_gguf *g, tg_tensor *out, const char *op, const char *name) {
  if (!out && tg_error_status() != TG_ERR_NOMEM)
    gguf_error(g, tg_error_status(), "%s: tensor '%.128s': %s", op, name, tg_error());
  return out;
}

tg_tensor *gguf_tensor_rows(tg_gguf *g, const char *name, uint32_t *type) {
  int64_t i = readable(g, name, "tg_gguf_tensor");
  if (i < 0) return NULL;
  if (type) *type = g->t[i].type;
  return named(g, stored(g, i), "tg_gguf_tensor", name);
}

tg_tensor *tg_gguf_tensor(tg_gguf *g, const char *name) {
  int64_t i = readable(g, name, "tg_gguf_tensor");
  if (i < 0) return NULL;
  const gguf_tensor *t = &g->t[i];
  if (gguf_type_of(t->type)->dtype != TG_DTYPE_COUNT) return named(g, stored(g, i), "tg_gguf_tensor", name);
  int64_t shape[TG_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->ne[t->ndim - 1 - d];
  tg_scope_begin();
  tg_tensor *r = tg_reshape(gguf_dequantize_rows(stored(g, i), t->type), t->ndim, shape);
  tg_tensor *out = tg_keep(r);
  tg_scope_end();
  return named(g, out, "tg_gguf_tensor", name);
}
