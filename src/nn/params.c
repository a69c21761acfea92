/* params.c — named parameters: the list of (name, tensor) pairs a model hands to optimizers and state files.
 *
 * The list copies each name and holds one reference to each tensor (tg_retain), released by tg_params_free.
 * Names are unique: a state file maps names to tensors, so a second tensor under one name is refused. */
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

struct tg_params {
  char **names;
  tg_tensor **tensors;
  int n, cap;
};

tg_params *tg_params_new(void) {
  tg_params *p = mem_calloc(1, sizeof *p);
  if (!p) tg_set_error(TG_ERR_NOMEM, "tg_params_new: out of memory");
  return p;
}

void tg_params_free(tg_params *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) {
    free(p->names[i]);
    tg_free(p->tensors[i]);
  }
  free(p->names);
  free(p->tensors);
  free(p);
}

static int find(const tg_params *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->names[i], name)) return i;
  return -1;
}

tg_status tg_params_add(tg_params *p, const char *name, tg_tensor *t) {
  if (!p || !name || !t) {
    if (!t && tg_error_status()) return tg_error_status();  /* t is the NULL result of a failed op */
    tg_set_error(TG_ERR_ARG, "tg_params_add: %s is NULL", !p ? "the list" : !name ? "the name" : "the tensor");
    return TG_ERR_ARG;
  }
  if (!*name) {
    tg_set_error(TG_ERR_ARG, "tg_params_add: empty name");
    return TG_ERR_ARG;
  }
  if (find(p, name) >= 0) {
    tg_set_error(TG_ERR_ARG, "tg_params_add: the name '%s' is already in the list", name);
    return TG_ERR_ARG;
  }
  if (p->n == p->cap) {
    if (p->cap > (1 << 28)) {
      tg_set_error(TG_ERR_NOMEM, "tg_params_add: too many parameters");
      return TG_ERR_NOMEM;
    }
    int nc = p->cap ? p->cap * 2 : 16;
    char **nn = mem_realloc(p->names, (size_t)nc * sizeof *nn);
    if (!nn) goto nomem;
    p->names = nn;
    tg_tensor **nt = mem_realloc(p->tensors, (size_t)nc * sizeof *nt);
    if (!nt) goto nomem;
    p->tensors = nt;
    p->cap = nc;
  }
  size_t len = strlen(name);
  char *copy = mem_alloc(len + 1);
  if (!copy) goto nomem;
  memcpy(copy, name, len + 1);
  p->names[p->n] = copy;
  p->tensors[p->n] = tg_retain(t);
  p->n++;
  return TG_OK;
nomem:
  tg_set_error(TG_ERR_NOMEM, "tg_params_add: out of memory adding '%s'", name);
  return TG_ERR_NOMEM;
}

int tg_params_count(const tg_params *p) { return p ? p->n : 0; }

const char *tg_params_name(const tg_params *p, int i) { return p && i >= 0 && i < p->n ? p->names[i] : NULL; }

tg_tensor *tg_params_tensor(const tg_params *p, int i) { return p && i >= 0 && i < p->n ? p->tensors[i] : NULL; }

tg_tensor *tg_params_find(const tg_params *p, const char *name) {
  if (!p || !name) return NULL;
  int i = find(p, name);
  return i < 0 ? NULL : p->tensors[i];
}
