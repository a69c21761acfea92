/* fuzz_onnx.c — the ONNX parser and runner (src/onnx/) on arbitrary bytes: the bytes as a model
 * (tg_onnx_load_memory: every input's and output's info read; when it loads and is small, a run on zeros of
 * the declared shapes, named and unknown dims 1, its outputs read back) and as a TensorProto
 * (tg_onnx_tensor_from_memory, read back). Seeds: tests/fuzz/corpus/onnx (tests/fuzz/make_corpus.c). */
#include "fuzz.h"
#include "onnx/onnx_run.h"

/* whether running m stays cheap: few nodes, no Loop (each iteration reads its condition on the host) */
static int cheap(const onnx_graph *g, int depth) {
  if (g->nnodes > 32 || depth > 4) return 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (!strcmp(g->nodes[i].op_type, "Loop")) return 0;
    for (int a = 0; a < g->nodes[i].nattrs; a++)
      if (g->nodes[i].attrs[a].g && !cheap(g->nodes[i].attrs[a].g, depth + 1)) return 0;
  }
  return 1;
}

static void run_model(tg_onnx *m) {
  int ni = tg_onnx_num_inputs(m), no = tg_onnx_num_outputs(m);
  FUZZ_CHECK(ni >= 0 && no >= 0, "io counts %d %d", ni, no);
  if (ni > 16 || no > 16 || !cheap(m->pm->graph, 0)) return;
  const char *names[16];
  tg_tensor *in[16] = {0}, *out[16] = {0};
  int ok = 1;
  for (int i = 0; i < ni; i++) {
    tg_onnx_io io;
    FUZZ_CHECK(tg_onnx_input(m, i, &io) == TG_OK && io.name, "input %d", i);
    names[i] = io.name;
    int64_t shape[TG_MAX_DIMS], numel = 1;
    int nd = io.ndim < 0 ? 0 : io.ndim;
    for (int d = 0; d < nd; d++) {
      shape[d] = io.shape[d] < 0 ? 1 : io.shape[d];
      numel *= shape[d] > 0 ? shape[d] : 1;
      if (numel > 4096) ok = 0;
    }
    if (!ok) break;
    in[i] = tg_zeros(io.dtype == TG_DTYPE_COUNT ? TG_FLOAT32 : io.dtype, nd, shape);
    FUZZ_CHECK(in[i], "zeros for input %d", i);
  }
  for (int i = 0; i < no; i++) {
    tg_onnx_io io;
    FUZZ_CHECK(tg_onnx_output(m, i, &io) == TG_OK && io.name, "output %d", i);
  }
  if (ok) {
    tg_error_clear();
    tg_status st = tg_onnx_run(m, ni, names, in, out);
    if (st != TG_OK) {
      FUZZ_CHECK_ERROR("tg_onnx_run");
      for (int i = 0; i < no; i++) FUZZ_CHECK(!out[i], "output %d left behind by a failed run", i);
    }
    for (int i = 0; i < no; i++) {
      if (st == TG_OK && tg_numel(out[i]) <= (1 << 16)) fuzz_read_back(out[i], "output");
      tg_free(out[i]);
    }
  }
  for (int i = 0; i < ni; i++) tg_free(in[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_error_clear();
  tg_onnx *m = tg_onnx_load_memory(data, size, NULL);
  if (!m) FUZZ_CHECK_ERROR("tg_onnx_load_memory");
  else run_model(m);
  tg_onnx_free(m);
  tg_error_clear();
  tg_tensor *t = tg_onnx_tensor_from_memory(data, size);
  if (!t) {
    FUZZ_CHECK_ERROR("tg_onnx_tensor_from_memory");
  } else {
    fuzz_read_back(t, "tensor");
    tg_free(t);
  }
  return fuzz_done();
}
