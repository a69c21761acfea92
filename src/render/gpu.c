/* gpu.c — OpenCL C and CUDA C: the two GPU dialects of the C-style renderer (cstyle.h).
 *
 * A GPU kernel takes one pointer per buffer and runs one work item per point of its global index space. The
 * kernel's outermost output loops (those with constant bounds, opened before any other loop) are not loops
 * on a GPU: their product is the global size, and each work item finds its own indices from its global id
 * by division and remainder, innermost loop fastest (neighbouring work items touch neighbouring elements).
 * Every other loop (reductions, output loops inside them, loops with symbolic bounds) stays a loop of the work
 * item. float16 is 16-bit storage on both (PoCL has no half arithmetic; CUDA's needs cuda_fp16.h): its
 * arithmetic is float32 (decompose_dtypes) and its loads and stores convert, as bfloat16's do everywhere.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/cstyle.h"

#define GPU_LOCAL 128  /* work items per group when the kernel does not choose (no LOCAL opts yet) */

/* the output loops that are the global index space, with their sizes and strides in the global id */
typedef struct gpu_state {
  uop_map stride;   /* RANGE -> (void *)(stride + 1) for a global one */
  int64_t total;    /* work items */
  int64_t group;    /* work items per group sharing local memory (the GROUP range's size), 0: none */
  bool cl;
} gpu_state;

static bool output_axis(const uop *u) {
  return u->aux[0] == AX_GLOBAL || u->aux[0] == AX_THREAD || u->aux[0] == AX_LOCAL || u->aux[0] == AX_GROUP;
}

/* finds the global loops: the RANGEs of output axes with a constant bound opened outside every other loop and
 * before any (the linearizer opens them first, after values it hoisted before them, which every work item
 * computes; a GROUP range is global wherever it opens). A GROUP
 * range is the innermost (stride 1), so the items of one work group are the k values of it for the same
 * outputs. */
static bool find_globals(rctx *c, gpu_state *g) {
  const linear_program *p = c->p;
  uop *gl[64];
  int n = 0, depth = 0;
  bool looped = false;  /* a loop of the work item came before: later output ranges (a row kernel's columns,
                         * after its reduces) stay loops, or each item would compute the reduces again */
  for (int i = 0; i < p->n && n < 64; i++) {
    uop *u = p->ops[i], *r = u->op == OP_ENDRANGE ? u->src[0] : u;
    if (u->op != OP_RANGE && u->op != OP_ENDRANGE) continue;
    bool known = false;  /* a global's block may close and open again around hoisted values */
    for (int k = 0; k < n && !known; k++) known = gl[k] == r;
    if (known) continue;
    if (u->op == OP_ENDRANGE) depth--;
    else if (depth == 0 && output_axis(u) && uop_is_const(u->src[0]) && (!looped || u->aux[0] == AX_GROUP)) gl[n++] = u;
    else depth++, looped = true;
  }
  for (int i = 0; i < n; i++)
    if (gl[i]->aux[0] == AX_GROUP) {
      uop *t = gl[i];
      memmove(gl + i, gl + i + 1, (size_t)(n - 1 - i) * sizeof *gl);
      gl[n - 1] = t;
      g->group = t->src[0]->arg.i;
      break;
    }
  for (int i = 0; i < p->n; i++)  /* a group range that is not a global index is a codegen error */
    if (p->ops[i]->op == OP_RANGE && p->ops[i]->aux[0] == AX_GROUP && !g->group) {
      render_fail(c, "a GROUP range that is not part of the global index space", p->ops[i]);
      return false;
    }
  g->total = 1;
  for (int i = n - 1; i >= 0; i--) {
    int64_t size = gl[i]->src[0]->arg.i;
    if (!umap_put(&g->stride, gl[i], (void *)(intptr_t)(g->total + 1))) {
      c->oom = true;  /* render_finish reports it */
      return false;
    }
    if (size > 0 && g->total > INT64_MAX / size) {
      render_fail(c, "more than 2^63 work items", NULL);
      return false;
    }
    g->total *= size;
  }
  return true;
}

static void gpu_open_range(rctx *c, uop *u, const char *nm, const char *start, const char *bound) {
  gpu_state *g = c->dctx;
  const char *t = ctype(c, (tg_dtype)u->dtype);
  intptr_t s = (intptr_t)umap_get(&g->stride, u);
  indent(c);
  if (!s) {
    put(c->o, "for (%s %s = %s; %s < %s; %s++) {\n", t, nm, start, nm, bound, nm);
  } else {
    int64_t stride = (int64_t)s - 1, size = u->src[0]->arg.i;
    bool outer = stride * size == g->total;  /* the outermost needs no remainder: gid < total */
    put(c->o, "{ %s %s = (%s)(gid", t, nm, t);
    if (stride != 1) put(c->o, "/%" PRId64, stride);
    if (!outer) put(c->o, "%%%" PRId64, size);
    put(c->o, ");\n");
  }
  c->depth++;
}

/* local memory is declared at the top of the kernel (OpenCL allows it nowhere else): here it only gets its name */
static void gpu_define_local(rctx *c, uop *u) { set_name(c, u, fmt("local%" PRId64, u->arg.i)); }

static const char *cl_type(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: return "bool";
    case TG_INT8: return "char";
    case TG_INT16: return "short";
    case TG_INT32: return "int";
    case TG_INT64: return "long";
    case TG_UINT8: return "uchar";
    case TG_UINT16: case TG_FLOAT16: case TG_BFLOAT16: return "ushort";
    case TG_UINT32: return "uint";
    case TG_UINT64: return "ulong";
    case TG_FLOAT32: return "float";
    case TG_FLOAT64: return "double";
    default: return "void";
  }
}

/* OpenCL kernel arguments cannot be bool pointers */
static const char *cl_param_type(tg_dtype dt) { return dt == TG_BOOL ? "uchar" : cl_type(dt); }

static char *cl_bitcast(tg_dtype from, tg_dtype to, const char *a) { return fmt("as_%s(%s)", cl_type(to), a); }

static const char *cuda_type(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: return "bool";
    case TG_INT8: return "signed char";
    case TG_INT16: return "short";
    case TG_INT32: return "int";
    case TG_INT64: return "long long";
    case TG_UINT8: return "unsigned char";
    case TG_UINT16: case TG_FLOAT16: case TG_BFLOAT16: return "unsigned short";
    case TG_UINT32: return "unsigned int";
    case TG_UINT64: return "unsigned long long";
    case TG_FLOAT32: return "float";
    case TG_FLOAT64: return "double";
    default: return "void";
  }
}

static char *cuda_bitcast(tg_dtype from, tg_dtype to, const char *a) {
  return fmt("tg_bitcast<%s>((%s)%s)", cuda_type(to), cuda_type(from), a);
}

static const dialect cl_dialect = {
    .lang = "OpenCL C",
    .type = cl_type,
    .param_type = cl_param_type,
    .i64_suffix = "L",
    .u64_suffix = "UL",
    .nan32 = "NAN",
    .inf32 = "INFINITY",
    .nan64 = "((double)NAN)",
    .inf64 = "((double)INFINITY)",
    .math32 = "%s(%s)",  /* OpenCL's math functions are overloaded by argument type */
    .math64 = "%s(%s)",
    .half_native = false,
    .bitcast = cl_bitcast,
    .open_range = gpu_open_range,
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE);",
    .define_local = gpu_define_local,
};

static const dialect cuda_dialect = {
    .lang = "CUDA C",
    .type = cuda_type,
    .param_type = cuda_type,
    .i64_suffix = "LL",
    .u64_suffix = "ULL",
    .nan32 = "__int_as_float(0x7fc00000)",
    .inf32 = "__int_as_float(0x7f800000)",
    .nan64 = "__longlong_as_double(0x7ff8000000000000LL)",
    .inf64 = "__longlong_as_double(0x7ff0000000000000LL)",
    .math32 = "%sf(%s)",
    .math64 = "%s(%s)",
    .half_native = false,
    .bitcast = cuda_bitcast,
    .open_range = gpu_open_range,
    .barrier = "__syncthreads();",
    .define_local = gpu_define_local,
};

static const char cl_prelude[] =
    "#define TG_INLINE static inline\n"
    "#define TG_F2U(f) as_uint(f)\n"
    "#define TG_U2F(b) as_float(b)\n";

static const char cuda_prelude[] =
    "#define TG_INLINE static __device__ __forceinline__\n"
    "#define TG_F2U(f) __float_as_uint(f)\n"
    "#define TG_U2F(b) __uint_as_float(b)\n"
    "template <class T, class F> static __device__ __forceinline__ T tg_bitcast(F f) "
    "{ union { F f; T t; } u; u.f = f; return u.t; }\n";

char *render_gpu(render_lang lang, const char *name, const linear_program *p, const kernel_info *info,
                 launch_shape *shape) {
  bool cl = lang == LANG_OPENCL;
  out o = {0};
  gpu_state g = {.cl = cl};
  rctx c = {.d = cl ? &cl_dialect : &cuda_dialect, .o = &o, .p = p, .dctx = &g};
  if (p->lane) {
    render_fail(&c, "machine vectors are the CPU's (a GPU target has vec_bytes 0)", NULL);
    return render_finish(&c, &o);
  }
  uop **params = render_params(&c);
  if (!params || !find_globals(&c, &g)) {
    free(params);
    umap_free(&g.stride);
    c.oom = true;
    return render_finish(&c, &o);
  }
  int64_t local = g.group ? g.group : g.total < GPU_LOCAL ? g.total : GPU_LOCAL;
  bool has[TG_DTYPE_COUNT];  /* the dtypes in the program: the prelude has only what it uses */
  program_dtypes(p, has);
  bool f64 = has[TG_FLOAT64];
  put(&o, "/* %s%s%s */\n", name, info && info->opts[0] ? ": " : "", info ? info->opts : "");
  if (cl && f64) put(&o, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
  /* each part once when several kernels are built as one program (OpenCL's prebuild) */
  put(&o, "#ifndef TG_PRELUDE\n#define TG_PRELUDE\n%s#endif\n", cl ? cl_prelude : cuda_prelude);
  if (has[TG_BFLOAT16]) put(&o, "#ifndef TG_BF16\n#define TG_BF16\n%s#endif\n", cstyle_bf16_helpers);
  if (has[TG_FLOAT16]) put(&o, "#ifndef TG_HALF\n#define TG_HALF\n%s#endif\n", cstyle_half_helpers);
  if (cl) put(&o, "__kernel void %s(", name);
  else put(&o, "extern \"C\" __global__ void __launch_bounds__(%" PRId64 ") %s(", local, name);
  for (int i = 0; i < p->nparams; i++) {
    tg_dtype dt = params[i] ? (tg_dtype)params[i]->dtype : TG_UINT8;
    put(&o, "%s%s%s%s* data%d", i ? ", " : "", cl ? "__global " : "", i && i >= p->nouts ? "const " : "", c.d->param_type(dt), i);
  }
  put(&o, ") {\n");
  put(&o, cl ? "  long gid = (long)get_global_id(0);\n" : "  long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
  for (int i = 0; i < p->n; i++)
    if (p->ops[i]->op == OP_DEFINE_LOCAL)
      put(&o, "  %s %s local%" PRId64 "[%" PRId64 "];\n", cl ? "__local" : "__shared__", c.d->type((tg_dtype)p->ops[i]->dtype),
          p->ops[i]->arg.i, p->ops[i]->aux[0]);
  /* the global size is rounded up to whole groups; a group's items all reach its barriers (no early return) */
  if (!g.group) put(&o, "  if (gid >= %" PRId64 ") return;\n", g.total);
  for (int i = 0; i < p->n && !c.oom; i++) render_op(&c, p->ops[i], i);
  put(&o, "}\n");
  free(params);
  *shape = (launch_shape){.global = {(size_t)((g.total + local - 1) / local * local), 1, 1}, .local = {(size_t)local, 1, 1}};
  umap_free(&g.stride);
  return render_finish(&c, &o);
}
