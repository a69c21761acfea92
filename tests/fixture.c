/* fixture.c — reads the golden-value files of tests/fixtures/ (fixture.h). */
#include <stdarg.h>
#include <stdlib.h>

#include "fixture.h"

void fx_free(fx *f) {
  for (int i = 0; i < f->n; i++) free(f->recs[i].data);
  free(f->recs);
  f->recs = NULL;
  f->n = 0;
}

static bool fx_read(FILE *fp, void *p, size_t n) { return fread(p, 1, n, fp) == n; }

bool fx_load(fx *f, const char *name) {
  char path[512];
  const char *dir = getenv("TG_FIXTURES");
  if (dir) snprintf(path, sizeof path, "%s/%s", dir, name);
  else {
    const char *file = __FILE__, *slash = strrchr(file, '/');
    int len = slash ? (int)(slash - file + 1) : 0;
    snprintf(path, sizeof path, "%.*sfixtures/%s", len, file, name);
  }
  memset(f, 0, sizeof *f);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    CHECK(0, "cannot open %s (run from the repository root or set TG_FIXTURES)", path);
    return false;
  }
  char magic[4];
  uint32_t hdr[2];
  bool ok = fx_read(fp, magic, 4) && !memcmp(magic, "TGFX", 4) && fx_read(fp, hdr, sizeof hdr) && hdr[0] == 1;
  if (ok) ok = (f->recs = calloc(hdr[1], sizeof *f->recs)) != NULL;
  for (uint32_t i = 0; ok && i < hdr[1]; i++) {
    fx_rec *r = &f->recs[i];
    uint16_t nl;
    uint8_t dt, nd;
    ok = fx_read(fp, &nl, 2) && nl < sizeof r->name && fx_read(fp, r->name, nl) && fx_read(fp, &dt, 1) &&
         fx_read(fp, &nd, 1) && nd <= 8 && fx_read(fp, r->shape, 8 * (size_t)nd);
    if (!ok) break;
    r->dtype = dt;
    r->ndim = nd;
    r->numel = 1;
    for (int d = 0; d < nd; d++) r->numel *= r->shape[d];
    size_t bytes = (size_t)r->numel * (dt ? 8 : 4);
    ok = (r->data = malloc(bytes ? bytes : 1)) != NULL && fx_read(fp, r->data, bytes);
    f->n++;
  }
  fclose(fp);
  if (!ok) {
    CHECK(0, "%s is malformed", path);
    fx_free(f);
  }
  return ok;
}

const fx_rec *fx_get(const fx *f, const char *fmt, ...) {
  char name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->recs[i].name, name)) return &f->recs[i];
  return NULL;
}

tg_tensor *fx_tensor(const fx_rec *r) {
  if (!r) return NULL;
  return tg_from_data(r->dtype ? TG_INT64 : TG_FLOAT32, r->ndim, r->shape, r->data, (size_t)r->numel * (r->dtype ? 8 : 4));
}

double fx_param(const fx_rec *p, int i) {
  if (!p || i >= p->numel) return 0;
  return p->dtype ? (double)((int64_t *)p->data)[i] : ((float *)p->data)[i];
}

bool check_fx(const char *what, tg_tensor *got, const fx_rec *want, double atol, double rtol, const char *file, int line) {
  if (!want) {
    test_fail(file, line, "%s: no golden record", what);
    return false;
  }
  if (!got) {
    test_fail(file, line, "%s: NULL: %s", what, tg_error());
    return false;
  }
  bool same = tg_ndim(got) == want->ndim;
  for (int d = 0; same && d < want->ndim; d++) same = tg_shape(got, d) == want->shape[d];
  if (!same) {
    test_fail(file, line, "%s: got %d dims (last %lld), want %d dims (last %lld)", what, tg_ndim(got),
              (long long)(tg_ndim(got) ? tg_shape(got, tg_ndim(got) - 1) : 0), want->ndim,
              (long long)(want->ndim ? want->shape[want->ndim - 1] : 0));
    return false;
  }
  bool ok;
  if (want->dtype) {
    int64_t *g = malloc((size_t)want->numel * 8 + 8);
    ok = g && tg_to_host(tg_cast(got, TG_INT64), g, (size_t)want->numel * 8) == TG_OK;
    if (!ok) test_fail(file, line, "%s: tg_to_host: %s", what, tg_error());
    else ok = check_equal_i64(what, g, want->data, want->numel, file, line);
    free(g);
  } else {
    float *g = malloc((size_t)want->numel * 4 + 4);
    ok = g && tg_to_host(tg_cast(got, TG_FLOAT32), g, (size_t)want->numel * 4) == TG_OK;
    if (!ok) test_fail(file, line, "%s: tg_to_host: %s", what, tg_error());
    else ok = check_close_f32(what, g, want->data, want->numel, atol, rtol, file, line);
    free(g);
  }
  return ok;
}
