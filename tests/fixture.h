/* fixture.h — golden values written by the PyTorch scripts in tests/fixtures/ (make_nn_fixtures.py's format).
 *
 * Format (little endian): b"TGFX", u32 version (1), u32 record count, then per record u16 name length, name,
 * u8 dtype (0 float32, 1 int64), u8 ndim, i64 shape[ndim], data. Records are named "<op>/<case>/<field>". */
#ifndef TG_TEST_FIXTURE_H
#define TG_TEST_FIXTURE_H

#include "test.h"

typedef struct fx_rec {
  char name[64];
  int dtype, ndim;  /* dtype 0: float32, 1: int64 */
  int64_t shape[8], numel;
  void *data;       /* float or int64_t */
} fx_rec;
typedef struct fx { fx_rec *recs; int n; } fx;

/* tests/fixtures/<file> (or $TG_FIXTURES/<file>) into f; false, with a failure recorded, when it is missing or
 * malformed */
bool fx_load(fx *f, const char *file);
void fx_free(fx *f);
/* the record named by the printf-style format; NULL when absent */
const fx_rec *fx_get(const fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tg_tensor *fx_tensor(const fx_rec *r);        /* float32, or integers as int64; NULL for NULL */
double fx_param(const fx_rec *p, int i);      /* value i of a parameter record (0 when absent) */
/* got against want: shape, then values (floats within atol/rtol, integers exactly); false after recording */
bool check_fx(const char *what, tg_tensor *got, const fx_rec *want, double atol, double rtol, const char *file, int line);

/* a test whose body runs with the fixtures of `file` loaded (as f) and in a scope that frees its tensors */
#define FIXTURE_TEST(name, file)              \
  static void name##_body(const fx *f);       \
  TEST(name) {                                \
    fx f;                                     \
    if (!fx_load(&f, file)) return;           \
    tg_scope_begin();                         \
    name##_body(&f);                          \
    tg_scope_end();                           \
    fx_free(&f);                              \
  }                                           \
  static void name##_body(const fx *f)

#endif
