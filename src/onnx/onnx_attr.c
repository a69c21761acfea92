/* onnx_attr.c — reading a node's attributes with defaults, and errors that name the node */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "onnx_op.h"
#include "../uop/uop.h"

const onnx_attr *onnx_attr_find(const onnx_node *n, const char *name) {
  for (int i = 0; i < n->nattrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

bool onnx_attr_has(const onnx_node *n, const char *name) { return onnx_attr_find(n, name) != NULL; }

int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t dflt) {
  const onnx_attr *a = onnx_attr_find(n, name);
  return a && a->type == ONNX_ATTR_INT ? a->i : dflt;
}

double onnx_attr_float(const onnx_node *n, const char *name, double dflt) {
  const onnx_attr *a = onnx_attr_find(n, name);
  if (!a) return dflt;
  if (a->type == ONNX_ATTR_FLOAT) return a->f;
  if (a->type == ONNX_ATTR_INT) return (double)a->i;   /* some exporters write an integral float as an int */
  return dflt;
}

const char *onnx_attr_string(const onnx_node *n, const char *name, const char *dflt) {
  const onnx_attr *a = onnx_attr_find(n, name);
  return a && a->type == ONNX_ATTR_STRING && a->s ? a->s : dflt;
}

int64_t onnx_attr_ints(const onnx_node *n, const char *name, const int64_t **vals) {
  const onnx_attr *a = onnx_attr_find(n, name);
  if (!a || a->type != ONNX_ATTR_INTS) return -1;
  *vals = a->ints;
  return a->nints;
}

int64_t onnx_attr_floats(const onnx_node *n, const char *name, const float **vals) {
  const onnx_attr *a = onnx_attr_find(n, name);
  if (!a || a->type != ONNX_ATTR_FLOATS) return -1;
  *vals = a->floats;
  return a->nfloats;
}

tg_status onnx_fail(const onnx_node *n, tg_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(st, "onnx: %s node '%s': %s", n->op_type, n->name ? n->name : "", msg);
  return st;
}
