/* onnx.c — runs an ONNX model: prints its inputs and outputs, runs it on .npy files or random inputs, writes
 * each output as a .npy file, and with --bench N times N runs under tg_jit.
 *
 *   ./build/examples/onnx model.onnx                       random inputs of the declared shapes
 *   ./build/examples/onnx model.onnx x.npy --out results   x.npy as the first input; results/<output>.npy
 *   ./build/examples/onnx model.onnx --dim N=8 --bench 50  a named dimension bound, 50 timed runs
 * --help lists every flag. The command line is checked whole before any work: a bad flag or value, an input
 * file that is not there or an --out folder that cannot be written is a message and exit status 2. A --dim
 * naming no dimension of the model is also exit 2, once the model is read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "tg.h"

#define MAX_DIMS_FLAGS 32

typedef struct dim_flag { const char *name; long long size; bool used; } dim_flag;

typedef struct run_ctx {
  tg_onnx *m;
  int nin;
  const char **names;
} run_ctx;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void) {
  printf("usage: onnx MODEL.onnx [INPUT.npy ...] [--out DIR] [--bench N] [--seed S] [--dim NAME=SIZE ...]\n"
         "Prints the model's inputs and outputs, runs it on the .npy files given (in the order of the model's\n"
         "inputs; inputs without a file get random values of their declared shape), and writes each output as\n"
         "DIR/<output name>.npy (characters other than letters, digits, '.', '-' and '_' become '_').\n"
         "  --out DIR        the folder the outputs go to; it must exist (default: the current folder)\n"
         "  --no-save        write no output files\n"
         "  --bench N        after a first run and a capture, time N runs under tg_jit and print the median and\n"
         "                   the best in ms, 1..100000 (the outputs written are the last run's)\n"
         "  --seed S         seed of the random inputs, 0..9223372036854775807 (default 0)\n"
         "  --dim NAME=SIZE  the size of a dimension the model names (a batch size \"N\"), 1..1000000000, for\n"
         "                   random inputs; may be repeated; a named dimension not given is 1\n"
         "  -h, --help       this help\n"
         "Random inputs: floats standard normal, integers uniform in 0..9, bools true with probability 1/2.\n"
         "JIT=0 runs --bench eagerly; DEBUG, BEAM, DEV and TG_THREADS are described in the README.\n"
         "Exit status: 0 done, 1 a failure while running (the message says what), 2 a bad command line.\n");
}

/* NAME=SIZE into f */
static bool parse_dim(int argc, char **argv, int *i, dim_flag *f) {
  const char *flag = argv[*i];
  const char *v = args_value(argc, argv, i, "NAME=SIZE");
  if (!v) return false;
  const char *eq = strrchr(v, '=');
  if (!eq || eq == v) return args_usage_error("%s: '%s' is not NAME=SIZE", flag, v);
  char *end;
  errno = 0;
  long long s = strtoll(eq + 1, &end, 10);
  if (!eq[1] || isspace((unsigned char)eq[1]) || *end) return args_usage_error("%s: '%s' is not NAME=SIZE", flag, v);
  if (errno == ERANGE || s < 1 || s > 1000000000LL)
    return args_error("%s: the size in '%s' is out of range; allowed 1..1000000000", flag, v);
  f->name = v;
  f->size = s;
  return true;
}

/* the size bound to the dimension named name (length n) by a --dim flag, or 0 */
static long long dim_size(dim_flag *dims, int ndims, const char *name) {
  for (int k = 0; k < ndims; k++) {
    const char *eq = strrchr(dims[k].name, '=');
    if ((size_t)(eq - dims[k].name) == strlen(name) && !strncmp(dims[k].name, name, strlen(name))) {
      dims[k].used = true;
      return dims[k].size;
    }
  }
  return 0;
}

/* "(N=1, 3, 224, 224)" into buf; sizes bound give N=1, unknown dims "?" */
static void shape_str(char *buf, size_t cap, const tg_onnx_io *io) {
  if (io->ndim < 0) {
    snprintf(buf, cap, "(shape not given)");
    return;
  }
  size_t w = (size_t)snprintf(buf, cap, "(");
  for (int d = 0; d < io->ndim && w < cap; d++) {
    const char *sep = d ? ", " : "";
    if (io->shape[d] >= 0) w += (size_t)snprintf(buf + w, cap - w, "%s%lld", sep, (long long)io->shape[d]);
    else if (io->dim_names[d]) w += (size_t)snprintf(buf + w, cap - w, "%s%s", sep, io->dim_names[d]);
    else w += (size_t)snprintf(buf + w, cap - w, "%s?", sep);
  }
  if (w < cap) snprintf(buf + w, cap - w, "%s)", io->ndim == 1 ? "," : "");
}

static bool is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }

/* a random tensor of input io's dtype and shape (named dims from --dim, else 1; unknown dims 1), realized */
static tg_tensor *random_input(const tg_onnx_io *io, dim_flag *dims, int ndims) {
  int64_t shape[TG_MAX_DIMS];
  for (int d = 0; d < io->ndim; d++) {
    long long s = io->shape[d] >= 0 ? io->shape[d] : io->dim_names[d] ? dim_size(dims, ndims, io->dim_names[d]) : 0;
    shape[d] = s > 0 || io->shape[d] == 0 ? s : 1;
  }
  tg_tensor *t;
  if (is_float(io->dtype)) t = tg_randn(io->dtype, io->ndim, shape);
  else if (io->dtype == TG_BOOL) t = tg_lt_scalar(tg_rand(TG_FLOAT32, io->ndim, shape), 0.5);
  else t = tg_randint(io->dtype, io->ndim, shape, 0, 10);
  if (t && tg_realize(t) != TG_OK) {
    tg_free(t);
    return NULL;
  }
  return t;
}

/* tg_jit's step: the model on the inputs */
static tg_status run_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  run_ctx *c = ctx;
  return tg_onnx_run(c->m, nin, c->names, in, out);
}

/* out name -> a file name: letters, digits, '.', '-', '_' kept, others '_'; no leading '.'; "" -> output<i> */
static void file_name(char *buf, size_t cap, const char *name, int i) {
  size_t k = 0;
  for (const char *s = name; *s && k + 1 < cap && k < 200; s++) {
    char c = *s;
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                (c == '.' && k > 0);
    buf[k++] = keep ? c : '_';
  }
  buf[k] = 0;
  if (!k) snprintf(buf, cap, "output%d", i);
}

/* a copy of realized t in a buffer of its own; t is freed (also on failure, which returns NULL) */
static tg_tensor *fresh_copy(tg_tensor *t) {
  size_t nb = (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t));
  void *h = malloc(nb ? nb : 1);
  tg_tensor *c = h && tg_to_host(t, h, nb) == TG_OK ? tg_from_data(tg_dtype_of(t), tg_ndim(t), tg_shape_ptr(t), h, nb) : NULL;
  free(h);
  tg_free(t);
  return c;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* the first few values and the range of t, on one line after "  " */
static void summary(tg_tensor *t) {
  int64_t n = tg_numel(t);
  tg_tensor *f = tg_cast(t, TG_FLOAT64);
  double *h = n > 0 ? malloc((size_t)n * sizeof *h) : NULL;
  if (n > 0 && h && f && tg_to_host(f, h, (size_t)n * sizeof *h) == TG_OK) {
    double lo = h[0], hi = h[0], sum = 0;
    for (int64_t i = 0; i < n; i++) {
      lo = h[i] < lo ? h[i] : lo;
      hi = h[i] > hi ? h[i] : hi;
      sum += h[i];
    }
    printf("    min %.6g  max %.6g  mean %.6g  first:", lo, hi, sum / (double)n);
    for (int64_t i = 0; i < n && i < 5; i++) printf(" %.6g", h[i]);
    printf("%s\n", n > 5 ? " ..." : "");
  }
  free(h);
  tg_free(f);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  args_prog = "onnx";
  const char *model_path = NULL, *out_dir = ".";
  const char **files = calloc((size_t)argc, sizeof *files);
  int nfiles = 0, ndims = 0;
  long long bench = 0, seed = 0;
  bool save = true, out_given = false;
  dim_flag dims[MAX_DIMS_FLAGS];
  if (!files) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      free(files);
      return 0;
    } else if (!strcmp(a, "--out")) {
      ok = (out_dir = args_value(argc, argv, &i, "a folder")) != NULL;
      out_given = true;
    } else if (!strcmp(a, "--no-save")) {
      save = false;
    } else if (!strcmp(a, "--bench")) {
      ok = args_int(argc, argv, &i, 1, 100000, &bench);
    } else if (!strcmp(a, "--seed")) {
      ok = args_int(argc, argv, &i, 0, LLONG_MAX, &seed);
    } else if (!strcmp(a, "--dim")) {
      if (ndims == MAX_DIMS_FLAGS) ok = args_usage_error("--dim: at most %d of them", MAX_DIMS_FLAGS);
      else if ((ok = parse_dim(argc, argv, &i, &dims[ndims]))) dims[ndims++].used = false;
    } else if (a[0] == '-' && a[1]) {
      ok = args_unknown(a);
    } else if (!model_path) {
      ok = args_input_ok("the model", a);
      model_path = a;
    } else {
      ok = args_input_ok("an input", a);
      files[nfiles++] = a;
    }
    if (!ok) {
      free(files);
      return ARGS_EXIT;
    }
  }
  if (!model_path) {
    args_usage_error("no model given");
    free(files);
    return ARGS_EXIT;
  }
  if (out_given && !save) {
    args_usage_error("--out and --no-save: choose one");
    free(files);
    return ARGS_EXIT;
  }
  if (save) {  /* the folder exists and takes new files: a probe file beside where the outputs go */
    struct stat sb;
    char probe[PATH_MAX];
    if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      args_error("--out %s: no such folder", out_dir);
      free(files);
      return ARGS_EXIT;
    }
    snprintf(probe, sizeof probe, "%s/onnx-output", out_dir);
    if (!args_output_ok("--out", probe)) {
      free(files);
      return ARGS_EXIT;
    }
  }

  int rc = 1;
  tg_onnx *m = tg_onnx_load(model_path);
  if (!m) {
    fprintf(stderr, "%s%s\n", strncmp(tg_error(), "onnx: ", 6) ? "onnx: " : "", tg_error());
    free(files);
    return 1;
  }
  int nin = tg_onnx_num_inputs(m), nout = tg_onnx_num_outputs(m);
  tg_onnx_io *ins = calloc((size_t)nin + 1, sizeof *ins), *outs = calloc((size_t)nout + 1, sizeof *outs);
  tg_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  const char **names = calloc((size_t)nin + 1, sizeof *names);
  double *times = calloc((size_t)bench + 1, sizeof *times);
  tg_jit *jit = NULL;
  if (!ins || !outs || !in || !out || !names || !times) {
    fprintf(stderr, "onnx: out of memory\n");
    goto done;
  }
  if (nfiles > nin) {
    args_error("%d input files for a model with %d input%s", nfiles, nin, nin == 1 ? "" : "s");
    rc = ARGS_EXIT;
    goto done;
  }
  for (int i = 0; i < nin; i++)
    if (tg_onnx_input(m, i, &ins[i]) != TG_OK) goto fail;
  for (int i = 0; i < nout; i++)
    if (tg_onnx_output(m, i, &outs[i]) != TG_OK) goto fail;
  /* every --dim names a dimension of an input */
  for (int i = 0; i < nin; i++)
    for (int d = 0; d < ins[i].ndim; d++)
      if (ins[i].shape[d] < 0 && ins[i].dim_names[d]) dim_size(dims, ndims, ins[i].dim_names[d]);
  for (int k = 0; k < ndims; k++)
    if (!dims[k].used) {
      args_error("--dim %s: the model's inputs have no dimension of that name", dims[k].name);
      rc = ARGS_EXIT;
      goto done;
    }

  printf("model %s: %d input%s, %d output%s\n", model_path, nin, nin == 1 ? "" : "s", nout, nout == 1 ? "" : "s");
  tg_manual_seed((uint64_t)seed);
  for (int i = 0; i < nin; i++) {
    char shp[512];
    shape_str(shp, sizeof shp, &ins[i]);
    names[i] = ins[i].name;
    if (i < nfiles) {
      in[i] = tg_npy_load(files[i]);
      if (!in[i]) goto fail;
      if (tg_dtype_of(in[i]) != ins[i].dtype) {
        fprintf(stderr, "onnx: input '%s' is %s, %s holds %s (numpy: np.save(path, a.astype('%s')))\n", ins[i].name,
                tg_dtype_name(ins[i].dtype), files[i], tg_dtype_name(tg_dtype_of(in[i])), tg_dtype_name(ins[i].dtype));
        goto done;
      }
    } else {
      if (ins[i].ndim < 0) {
        fprintf(stderr, "onnx: input '%s' has no declared shape: give it as a .npy file\n", ins[i].name);
        goto done;
      }
      if (!(in[i] = random_input(&ins[i], dims, ndims))) goto fail;
    }
    char given[512];
    int w = snprintf(given, sizeof given, "(");
    for (int d = 0; d < tg_ndim(in[i]) && w < (int)sizeof given - 24; d++)
      w += snprintf(given + w, sizeof given - (size_t)w, "%s%lld", d ? ", " : "", (long long)tg_shape(in[i], d));
    snprintf(given + w, sizeof given - (size_t)w, "%s)", tg_ndim(in[i]) == 1 ? "," : "");
    printf("  input  %-24s %-8s %-24s <- %s %s\n", ins[i].name, tg_dtype_name(ins[i].dtype), shp,
           i < nfiles ? files[i] : "random", given);
  }
  for (int i = 0; i < nout; i++) {
    char shp[512];
    shape_str(shp, sizeof shp, &outs[i]);
    printf("  output %-24s %-8s %s\n", outs[i].name, tg_dtype_name(outs[i].dtype), shp);
  }

  run_ctx ctx = {.m = m, .nin = nin, .names = names};
  double t0 = now_s();
  if (!bench) {
    if (tg_onnx_run(m, nin, names, in, out) != TG_OK || tg_realize_many(nout, out) != TG_OK) goto fail;
    printf("ran in %.1f ms (compiling included)\n", (now_s() - t0) * 1e3);
  } else {
    const char *j = getenv("JIT");
    bool eager = j && !strcmp(j, "0");
    if (!eager && !(jit = tg_jit_new(run_step, &ctx, nin, nout))) goto fail;
    /* the first call runs the model (compiling), the second captures it; then the timed runs */
    for (long long r = -2; r < bench; r++) {
      for (int i = 0; i < nout; i++) tg_free(out[i]), out[i] = NULL;
      /* eager runs on the same input buffers would build the same graph, whose realized value tgc reuses
       * (equal graphs are one node): each gets fresh copies of the inputs, made before the clock starts */
      if (!jit)
        for (int i = 0; i < nin; i++)
          if (!(in[i] = fresh_copy(in[i]))) goto fail;
      double s = now_s();
      tg_status st = jit ? tg_jit_call(jit, in, out) : run_step(&ctx, nin, in, nout, out);
      if (st == TG_OK && !jit) st = tg_realize_many(nout, out);
      if (st != TG_OK && jit && r == -1) {
        /* the capture failed: the runner read a value to the host inside the step (or memory ran out). The
         * model still runs: time it eagerly, and say so */
        fprintf(stderr, "onnx: tg_jit could not capture the model (%s); timing eager runs instead\n", tg_error());
        tg_error_clear();
        tg_jit_free(jit);
        jit = NULL;
        r = -2;
        continue;
      }
      if (st != TG_OK) goto fail;
      if (r >= 0) times[r] = (now_s() - s) * 1e3;
      else if (r == -2) printf("first run %.1f ms (compiling included)\n", (now_s() - s) * 1e3);
    }
    qsort(times, (size_t)bench, sizeof *times, cmp_double);
    char kernels[64] = "";
    if (jit) snprintf(kernels, sizeof kernels, " (%d kernels)", tg_jit_kernels(jit));
    printf("bench: %lld runs %s%s: median %.3f ms, best %.3f ms, %d threads\n", bench,
           jit ? "under tg_jit" : eager ? "eager (JIT=0)" : "eager (not capturable)", kernels, times[bench / 2],
           times[0], tg_num_threads());
  }
  for (int i = 0; i < nout; i++) {
    char fname[256], path[PATH_MAX + 256];
    int w = snprintf(path, sizeof path, "(");
    for (int d = 0; d < tg_ndim(out[i]) && w < (int)sizeof path - 24; d++)
      w += snprintf(path + w, sizeof path - (size_t)w, "%s%lld", d ? ", " : "", (long long)tg_shape(out[i], d));
    snprintf(path + w, sizeof path - (size_t)w, "%s)", tg_ndim(out[i]) == 1 ? "," : "");
    printf("  %s: %s %s\n", outs[i].name, tg_dtype_name(tg_dtype_of(out[i])), path);
    summary(out[i]);
    if (!save) continue;
    file_name(fname, sizeof fname, outs[i].name, i);
    /* two outputs whose names sanitize alike: the later one gets its index appended */
    for (int k = 0; k < i; k++) {
      char other[256];
      file_name(other, sizeof other, outs[k].name, k);
      if (!strcmp(other, fname)) snprintf(fname + strlen(fname), sizeof fname - strlen(fname), "_%d", i);
    }
    snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
    tg_tensor *o = out[i];
    if (tg_dtype_of(o) == TG_BFLOAT16) o = tg_cast(o, TG_FLOAT32);  /* numpy has no bfloat16 */
    tg_status st = tg_npy_save(path, o);
    if (o != out[i]) tg_free(o);
    if (st != TG_OK) goto fail;
    printf("    -> %s\n", path);
  }
  rc = 0;
  goto done;
fail:
  /* the runner's messages begin with "onnx: " already */
  fprintf(stderr, "%s%s\n", strncmp(tg_error(), "onnx: ", 6) ? "onnx: " : "", tg_error());
  rc = 1;
done:
  for (int i = 0; in && i < nin; i++) tg_free(in[i]);
  for (int i = 0; out && i < nout; i++) tg_free(out[i]);
  tg_jit_free(jit);
  free(times);
  free(names);
  free(in);
  free(out);
  free(ins);
  free(outs);
  free(files);
  tg_onnx_free(m);
  return rc;
}
