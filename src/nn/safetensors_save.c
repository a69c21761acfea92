/* safetensors_save.c — writes named parameters as a safetensors file: an 8-byte little-endian header
 * length, the JSON header padded with spaces to 8 bytes, then the data, largest element size first so every
 * tensor is aligned. Written to a temporary file and renamed, so a reader never sees half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/safetensors.h"
#include "runtime/file_out.h"
#include "tensor/tensor.h"

/* ---- save ----------------------------------------------------------------------------------------------- */

typedef struct strbuf { char *s; size_t n, cap; bool oom; } strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + n + 1) nc *= 2;
    char *ns = mem_realloc(b->s, nc);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (w > 0) sb_put(b, tmp, (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1);
}

static void sb_json_string(strbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      sb_put(b, e, 2);
    } else if (c < 0x20) {
      sb_printf(b, "\\u%04x", c);
    } else {
      sb_put(b, (const char *)&c, 1);
    }
  }
  sb_put(b, "\"", 1);
}

static int cmp_size_desc(const void *a, const void *b) {
  const int64_t *x = a, *y = b;  /* (element size, index) pairs */
  return x[0] != y[0] ? (x[0] > y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Tensors go into the data section by element size, largest first (stable): with a header padded to 8
 * bytes, every tensor's offset is then a multiple of its element size and loads without a copy. */
tg_status tg_safetensors_save(const char *path, const tg_params *p) {
  if (!path || !p) {
    tg_set_error(TG_ERR_ARG, "tg_safetensors_save: %s is NULL", path ? "the parameter list" : "path");
    return TG_ERR_ARG;
  }
  int n = tg_params_count(p);
  tg_status st = TG_OK;
  for (int i = 0; i < n; i++) {
    const char *name = tg_params_name(p, i);
    if (!strcmp(name, "__metadata__"))
      return st_error(TG_ERR_ARG, path, "a parameter may not be named '__metadata__' (the format reserves it)");
    if (!st_dtype_name(tg_dtype_of(tg_params_tensor(p, i))))
      return st_error(TG_ERR_ARG, path, "'%s' has a dtype safetensors cannot hold", name);
  }
  size_t cnt = n > 0 ? (size_t)n : 1;
  int64_t *order = mem_alloc(cnt * 2 * sizeof *order);
  uint64_t *offs = mem_alloc(cnt * sizeof *offs);
  tg_tensor **ts = mem_alloc(cnt * sizeof *ts);
  strbuf h = {0};
  file_out f = {.fd = -1};
  void *host = NULL;
  if (!order || !offs || !ts) {
    st = st_error(TG_ERR_NOMEM, path, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    ts[i] = tg_params_tensor(p, i);
    order[2 * i] = (int64_t)tg_dtype_size(tg_dtype_of(ts[i]));
    order[2 * i + 1] = i;
  }
  qsort(order, (size_t)n, 2 * sizeof *order, cmp_size_desc);
  uint64_t off = 0, maxbytes = 0;
  for (int k = 0; k < n; k++) {
    int i = (int)order[2 * k + 1];
    uint64_t nb = (uint64_t)tg_numel(ts[i]) * tg_dtype_size(tg_dtype_of(ts[i]));
    offs[i] = off;
    off += nb;
    if (nb > maxbytes) maxbytes = nb;
  }
  /* one schedule for every parameter that is still lazy */
  if (n && (st = tg_realize_many(n, ts)) != TG_OK) goto out;
  sb_put(&h, "{", 1);
  for (int i = 0; i < n; i++) {
    tg_tensor *t = ts[i];
    if (i) sb_put(&h, ",", 1);
    sb_json_string(&h, tg_params_name(p, i));
    sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(tg_dtype_of(t)));
    for (int d = 0; d < tg_ndim(t); d++) sb_printf(&h, "%s%lld", d ? "," : "", (long long)tg_shape_ptr(t)[d]);
    uint64_t nb = (uint64_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t));
    sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offs[i], (unsigned long long)(offs[i] + nb));
  }
  sb_put(&h, "}", 1);
  while (!h.oom && h.n % 8) sb_put(&h, " ", 1);
  if (h.oom) {
    st = st_error(TG_ERR_NOMEM, path, "out of memory writing the header");
    goto out;
  }
  host = mem_alloc(maxbytes ? (size_t)maxbytes : 1);
  if (!host) {
    st = st_error(TG_ERR_NOMEM, path, "out of memory");
    goto out;
  }
  /* written whole or not at all (file_out.h) */
  if (!file_out_open(&f, path)) {
    st = st_error(f.err == ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO, path, "cannot create %s: %s", file_out_tmp(&f),
                  file_out_why(&f));
    goto out;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
  if (!file_out_write(&f, len8, 8) || !file_out_write(&f, h.s, h.n)) goto io;
  for (int k = 0; k < n; k++) {
    tg_tensor *t = ts[order[2 * k + 1]];
    size_t nb = (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t));
    if ((st = tg_to_host(t, host, nb)) != TG_OK) goto out;
    if (ST_BIG_ENDIAN && tg_dtype_size(tg_dtype_of(t)) > 1) {
      size_t es = tg_dtype_size(tg_dtype_of(t));
      for (uint8_t *q = host; q < (uint8_t *)host + nb; q += es)
        for (size_t a = 0, z = es - 1; a < z; a++, z--) { uint8_t c = q[a]; q[a] = q[z]; q[z] = c; }
    }
    if (!file_out_write(&f, host, nb)) goto io;
  }
  if (file_out_commit(&f, true)) goto out;
io:
  st = st_error(TG_ERR_IO, path, "writing %s failed: %s", file_out_tmp(&f), file_out_why(&f));
out:
  file_out_discard(&f);
  free(host);
  free(h.s);
  free(ts);
  free(offs);
  free(order);
  return st;
}
