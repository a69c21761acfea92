/* params.c — named parameter lists: what a model hands to optimizers and state files. */
#include <stdlib.h>
#include <string.h>

#include "tg.h"
#include "uop/uop.h"

struct tg_params {
  int n, cap;
  char **names;
  tg_tensor **ts;
};

tg_params *tg_params_new(void) {
  tg_params *p = calloc(1, sizeof *p);
  if (!p) tg_set_error(TG_ERR_NOMEM, "tg_params_new: out of memory");
  return p;
}

void tg_params_free(tg_params *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) {
    free(p->names[i]);
    tg_free(p->ts[i]);
  }
  free(p->names);
  free(p->ts);
  free(p);
}

tg_status tg_params_add(tg_params *p, const char *name, tg_tensor *t) {
  if (!p || !name || !t) {
    if (!t && tg_error_status()) return tg_error_status();
    tg_set_error(TG_ERR_ARG, "tg_params_add: %s is NULL", !p ? "the list" : !name ? "the name" : "the tensor");
    return TG_ERR_ARG;
  }
  if (tg_params_find(p, name)) {
    tg_set_error(TG_ERR_ARG, "tg_params_add: the name \"%s\" is already in the list", name);
    return TG_ERR_ARG;
  }
  if (p->n == p->cap) {
    int nc = p->cap ? p->cap * 2 : 16;
    char **nn = realloc(p->names, (size_t)nc * sizeof *nn);
    if (!nn) goto nomem;
    p->names = nn;
    tg_tensor **nt = realloc(p->ts, (size_t)nc * sizeof *nt);
    if (!nt) goto nomem;
    p->ts = nt;
    p->cap = nc;
  }
  char *copy = strdup(name);
  if (!copy) goto nomem;
  p->names[p->n] = copy;
  p->ts[p->n++] = tg_retain(t);
  return TG_OK;
nomem:
  tg_set_error(TG_ERR_NOMEM, "tg_params_add: out of memory");
  return TG_ERR_NOMEM;
}

int tg_params_count(const tg_params *p) { return p ? p->n : 0; }
const char *tg_params_name(const tg_params *p, int i) { return p && i >= 0 && i < p->n ? p->names[i] : NULL; }
tg_tensor *tg_params_tensor(const tg_params *p, int i) { return p && i >= 0 && i < p->n ? p->ts[i] : NULL; }

tg_tensor *tg_params_find(const tg_params *p, const char *name) {
  if (!p || !name) return NULL;
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->names[i], name)) return p->ts[i];
  return NULL;
}
