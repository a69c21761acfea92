/* test_onnx_nn.c — the ONNX neural-network operators (src/onnx/ops_nn*.c) through the public API
 * (tg_onnx_load / tg_onnx_run), against outputs computed by others:
 *  - ONNX's own backend node tests (Debian's libonnx-testdata, onnx 1.12): a selection covering every
 *    operator and attribute form of ops_nn (build/onnx_backend runs them all); skipped when the data is absent;
 *  - tests/fixtures/onnx_nn: single-node models for what that data lacks (opsets 18 to 21, com.microsoft),
 *    with golden outputs from onnx's reference evaluator or onnxruntime (make_onnx_nn_fixtures.py);
 *  - malformed attributes, refused with an error naming the node;
 *  - the detection operators (host-side NonMaxSuppression, RoiAlign's host sample tables) under failing
 *    allocations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "uop/uop.h"

#define ONNX_DATA "/usr/share/libonnx-testdata/data"

static bool is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* got against want: same dtype, same shape (a 1-element tensor may be 0-d or (1): ONNX 1.12's stored losses
 * are (1)), floats within the backend tests' rtol 1e-3 / atol 1e-7, integers exactly; true if they match */
static bool matches(const char *what, tg_tensor *got, tg_tensor *want) {
  if (tg_dtype_of(got) != tg_dtype_of(want)) {
    test_fail(__FILE__, __LINE__, "%s: dtype %s, expected %s", what, tg_dtype_name(tg_dtype_of(got)),
              tg_dtype_name(tg_dtype_of(want)));
    return false;
  }
  bool same = tg_ndim(got) == tg_ndim(want) || (tg_numel(got) == 1 && tg_numel(want) == 1);
  for (int d = 0; same && tg_ndim(got) == tg_ndim(want) && d < tg_ndim(got); d++) same = tg_shape(got, d) == tg_shape(want, d);
  if (!same) {
    test_fail(__FILE__, __LINE__, "%s: rank %d, expected rank %d (or sizes differ)", what, tg_ndim(got), tg_ndim(want));
    return false;
  }
  int64_t n = tg_numel(got);
  double *g = malloc((size_t)(n ? n : 1) * sizeof *g), *w = malloc((size_t)(n ? n : 1) * sizeof *w);
  tg_tensor *gc = tg_cast(got, TG_FLOAT64), *wc = tg_cast(want, TG_FLOAT64);
  bool ok = g && w && tg_to_host(gc, g, (size_t)n * sizeof *g) == TG_OK && tg_to_host(wc, w, (size_t)n * sizeof *w) == TG_OK;
  if (!ok) test_fail(__FILE__, __LINE__, "%s: reading: %s", what, tg_error());
  tg_dtype dt = tg_dtype_of(want);
  bool fl = dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64;
  for (int64_t i = 0; ok && i < n; i++) {
    bool close = fl ? (isnan(g[i]) && isnan(w[i])) || fabs(g[i] - w[i]) <= 1e-7 + 1e-3 * fabs(w[i]) : g[i] == w[i];
    if (!close) {
      test_fail(__FILE__, __LINE__, "%s: element %lld is %.9g, expected %.9g", what, (long long)i, g[i], w[i]);
      ok = false;
    }
  }
  free(g);
  free(w);
  tg_free(gc);
  tg_free(wc);
  return ok;
}

/* runs dir/model.onnx on dir/test_data_set_0 and compares every output; false (with a failure) if not */
static bool run_case(const char *dir) {
  char p[2048];
  const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  tg_onnx *m = tg_onnx_load(p);
  if (!m) {
    test_fail(__FILE__, __LINE__, "%s: load: %s", name, tg_error());
    return false;
  }
  enum { CAP = 16 };
  tg_tensor *in[CAP] = {0}, *want[CAP] = {0}, *got[CAP] = {0};
  const char *names[CAP];
  int nin = 0, nwant = 0, no = tg_onnx_num_outputs(m);
  bool ok = true;
  tg_scope_begin();
  for (; nin < CAP && nin < tg_onnx_num_inputs(m); nin++) {
    snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", dir, nin);
    if (!is_file(p)) break;
    tg_onnx_io io;
    tg_onnx_input(m, nin, &io);
    names[nin] = io.name;
    in[nin] = tg_onnx_read_tensor(p);
  }
  for (; nwant < CAP; nwant++) {
    snprintf(p, sizeof p, "%s/test_data_set_0/output_%d.pb", dir, nwant);
    if (!is_file(p)) break;
    want[nwant] = tg_onnx_read_tensor(p);
  }
  if (no != nwant || no > CAP) {
    test_fail(__FILE__, __LINE__, "%s: %d outputs, %d stored", name, no, nwant);
    ok = false;
  } else if (tg_onnx_run(m, nin, names, in, got) != TG_OK) {
    test_fail(__FILE__, __LINE__, "%s: run: %s", name, tg_error());
    ok = false;
  }
  for (int k = 0; ok && k < no; k++) {
    char what[300];
    snprintf(what, sizeof what, "%s output %d", name, k);
    ok = matches(what, got[k], want[k]);
  }
  tg_scope_end();
  tg_onnx_free(m);
  return ok;
}

/* the backend node tests chosen to cover every operator of ops_nn and its attribute forms */
static const char *const node_tests[] = {
    "node/test_gemm_all_attributes", "node/test_gemm_default_scalar_bias", "node/test_gemm_transposeA",
    "node/test_matmul_4d", "node/test_matmulinteger", "node/test_convinteger_with_padding",
    "node/test_conv_with_autopad_same", "node/test_conv_with_strides_and_asymmetric_padding",
    "pytorch-converted/test_Conv1d_groups", "pytorch-converted/test_Conv2d_depthwise_with_multiplier",
    "pytorch-converted/test_Conv3d_dilated_strided", "node/test_convtranspose_1d", "node/test_convtranspose_3d",
    "node/test_convtranspose_autopad_same", "node/test_convtranspose_dilations", "node/test_convtranspose_kernel_shape",
    "node/test_convtranspose_output_shape", "node/test_convtranspose_pads", "node/test_averagepool_2d_ceil",
    "node/test_averagepool_2d_pads_count_include_pad", "node/test_averagepool_2d_same_lower",
    "node/test_averagepool_3d_default", "node/test_maxpool_2d_dilations", "node/test_maxpool_2d_uint8",
    "node/test_maxpool_2d_ceil", "node/test_maxpool_with_argmax_2d_precomputed_pads", "node/test_maxpool_1d_default",
    "node/test_globalaveragepool", "node/test_globalmaxpool_precomputed", "node/test_maxunpool_export_with_output_shape",
    "node/test_maxunpool_export_without_output_shape", "node/test_batchnorm_epsilon",
    "node/test_batchnorm_example_training_mode", "pytorch-converted/test_BatchNorm3d_momentum_eval",
    "node/test_instancenorm_epsilon", "node/test_layer_normalization_3d_axis1_epsilon",
    "node/test_layer_normalization_4d_axis_negative_2", "node/test_lrn", "node/test_mvn", "node/test_dropout_default_mask",
    "node/test_dropout_default_old", "node/test_training_dropout_zero_ratio_mask", "node/test_training_dropout_mask",
    "node/test_resize_downsample_scales_cubic_A_n0p5_exclude_outside", "node/test_resize_downsample_sizes_linear_pytorch_half_pixel",
    "node/test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn", "node/test_resize_tf_crop_and_resize",
    "node/test_resize_upsample_scales_cubic_align_corners", "node/test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "node/test_resize_upsample_sizes_nearest_floor_align_corners", "node/test_upsample_nearest",
    "node/test_quantizelinear_axis", "node/test_dequantizelinear_axis", "node/test_dynamicquantizelinear_min_adjusted",
    "node/test_qlinearconv", "node/test_qlinearmatmul_3D", "node/test_nllloss_NCd1d2d3_sum_weight_high_ii",
    "node/test_nllloss_NCd1_mean_weight_negative_ii", "node/test_sce_mean_weight_ii_4d_log_prob",
    "node/test_sce_NCd1d2d3d4d5_none_no_weight", "node/test_gridsample_bicubic", "node/test_gridsample_reflection_padding",
    "node/test_gridsample_nearest", "node/test_lstm_with_peepholes", "node/test_gru_with_initial_bias",
    "node/test_simple_rnn_batchwise", "node/test_rnn_seq_length",
};

TEST(test_onnx_nn_backend_node_tests) {
  if (!is_dir(ONNX_DATA "/node")) {
    test_skip("ONNX backend test data not found at " ONNX_DATA " (Debian package libonnx-testdata)");
    return;
  }
  int failed = 0, n = (int)(sizeof node_tests / sizeof node_tests[0]);
  for (int i = 0; i < n; i++) {
    char dir[512];
    snprintf(dir, sizeof dir, ONNX_DATA "/%s", node_tests[i]);
    if (!is_dir(dir)) {
      test_fail(__FILE__, __LINE__, "%s missing from the test data", node_tests[i]);
      failed++;
      continue;
    }
    failed += !run_case(dir);
  }
  CHECK(failed == 0, "%d of %d backend tests failed", failed, n);
}

/* the directory of this file's fixtures/onnx_nn */
static void fixture_dir(char *out, size_t cap) {
  const char *file = __FILE__, *slash = strrchr(file, '/');
  snprintf(out, cap, "%.*sfixtures/onnx_nn", slash ? (int)(slash - file + 1) : 0, file);
}

static const char *const fixtures[] = {
    "test_ms_fastgelu", "test_ms_biasgelu", "test_ms_skiplayernorm", "test_ms_embedlayernorm",
    "test_ms_attention_mask1d", "test_ms_attention_mask2d_causal", "test_resize_antialias_linear",
    "test_resize_antialias_cubic", "test_resize_axes_cubic_sizes", "test_resize_not_larger_nearest",
    "test_resize_half_pixel_symmetric", "test_groupnorm_21", "test_lppool_p3_pads", "test_globallppool",
    "test_affinegrid_2d", "test_affinegrid_3d_align", "test_quantizelinear_axis_int8", "test_dequantizelinear_blocked",
    "test_convtranspose_group_output_shape", "test_conv_same_lower_strided", "test_conv_dilated_asymmetric_pads",
    "test_conv1d_same_upper", "test_maxpool_indices_storage_order", "test_averagepool_ceil_pads",
    "test_resize_opset10_nearest_down", "test_upsample_opset9_linear", "test_roialign_max_ratio2_scale",
    "test_roialign_avg_adaptive_half_pixel", "test_roialign_f64_output_half_pixel_16", "test_roialign_opset10_max_adaptive",
    "test_nms_score_threshold_batches", "test_nms_center_point_ties", "test_nms_no_max_output",
};

TEST(test_onnx_nn_fixtures_reference_and_onnxruntime) {
  char base[1024];
  fixture_dir(base, sizeof base);
  int failed = 0, n = (int)(sizeof fixtures / sizeof fixtures[0]);
  for (int i = 0; i < n; i++) {
    char dir[1400];
    snprintf(dir, sizeof dir, "%s/%s", base, fixtures[i]);
    if (!is_dir(dir)) {
      test_fail(__FILE__, __LINE__, "fixture %s missing (run tests/fixtures/make_onnx_nn_fixtures.py)", dir);
      failed++;
      continue;
    }
    failed += !run_case(dir);
  }
  CHECK(failed == 0, "%d of %d fixtures failed", failed, n);
}

/* models with attributes the operators refuse: tg_onnx_run fails with TG_ERR_ARG and a message naming the
 * operator, and nothing is left behind */
static const struct { const char *dir, *needle; } bad[] = {
    {"bad_conv_kernel_shape", "Conv"},
    {"bad_resize_scales_and_sizes", "Resize"},
    {"bad_convtranspose_output_shape", "ConvTranspose"},
    {"bad_lrn_size", "LRN"},
    {"bad_roialign_batch_index", "RoiAlign"},
    {"bad_roialign_mode", "RoiAlign"},
    {"bad_nms_scores_shape", "NonMaxSuppression"},
};

TEST(test_onnx_nn_refuses_bad_attributes) {
  char base[1024];
  fixture_dir(base, sizeof base);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char p[1500];
    snprintf(p, sizeof p, "%s/%s/model.onnx", base, bad[i].dir);
    tg_onnx *m = tg_onnx_load(p);
    if (!m) {
      test_fail(__FILE__, __LINE__, "%s: load: %s", bad[i].dir, tg_error());
      continue;
    }
    snprintf(p, sizeof p, "%s/%s/input_0.pb", base, bad[i].dir);
    tg_tensor *x = tg_onnx_read_tensor(p), *y[4] = {0};
    tg_onnx_io io;
    tg_onnx_input(m, 0, &io);
    const char *name = io.name;
    tg_status st = x ? tg_onnx_run(m, 1, &name, &x, y) : TG_ERR_IO;
    CHECK(st == TG_ERR_ARG, "%s: status %d (%s), expected TG_ERR_ARG", bad[i].dir, (int)st, tg_error());
    CHECK(st == TG_OK || strstr(tg_error(), bad[i].needle), "%s: message '%s' does not name %s", bad[i].dir, tg_error(),
          bad[i].needle);
    for (int k = 0; k < 4; k++) tg_free(y[k]);
    tg_free(x);
    tg_onnx_free(m);
  }
}

/* every allocation of a run of the detection fixtures failing in turn (each model loaded once): the run fails
 * with a message and no outputs, or succeeds with all of them; nothing leaks (the ASan run checks) */
TEST(test_onnx_nn_detect_fault_every_allocation) {
  static const char *const cases[] = {"test_nms_score_threshold_batches", "test_roialign_max_ratio2_scale"};
  char base[1024];
  fixture_dir(base, sizeof base);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char p[1500];
    snprintf(p, sizeof p, "%s/%s/model.onnx", base, cases[c]);
    tg_onnx *m = tg_onnx_load(p);
    if (!m) {
      test_fail(__FILE__, __LINE__, "%s: load: %s", cases[c], tg_error());
      continue;
    }
    int nin = tg_onnx_num_inputs(m);
    tg_tensor *ins[8] = {0};
    const char *names[8];
    for (int i = 0; i < nin && i < 8; i++) {
      tg_onnx_io io;
      tg_onnx_input(m, i, &io);
      names[i] = io.name;
      snprintf(p, sizeof p, "%s/%s/test_data_set_0/input_%d.pb", base, cases[c], i);
      ins[i] = tg_onnx_read_tensor(p);
      CHECK(ins[i], "%s: input %d: %s", cases[c], i, tg_error());
    }
    int64_t k = 1;
    for (; k < 20000; k++) {
      tg_tensor *y = NULL;
      tg_error_clear();
      mem_fail_at(k);
      tg_status st = tg_onnx_run(m, nin, names, ins, &y);
      bool failed = mem_failed();
      mem_fail_at(0);
      if (st != TG_OK) CHECK(failed && tg_error()[0] && !y, "%s: allocation %lld: run failed: %s", cases[c], (long long)k,
                             tg_error());
      else CHECK(y, "%s: allocation %lld: output missing", cases[c], (long long)k);
      tg_free(y);
      if (!failed) break;
    }
    CHECK(k > 5 && k < 20000, "%s: %lld allocations", cases[c], (long long)k);
    for (int i = 0; i < 8; i++) tg_free(ins[i]);
    tg_onnx_free(m);
  }
}
