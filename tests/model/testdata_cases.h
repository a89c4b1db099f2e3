// Debian's libonnx-testdata node tests of the supported operators, shared by the import and
// kernel tests.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "crosstune/model/onnx_import.h"

namespace crosstune::model::testing {

// The node tests of the supported operators (the test data's names; variants of unsupported
// types, training mode or extra outputs are left out).
inline const char* const kCases[] = {
    "test_basic_conv_with_padding",
    "test_basic_conv_without_padding",
    "test_conv_with_autopad_same",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_conv_with_strides_no_padding",
    "test_conv_with_strides_padding",
    "test_batchnorm_epsilon",
    "test_batchnorm_example",
    "test_relu",
    "test_clip",
    "test_clip_default_inbounds",
    "test_clip_default_max",
    "test_clip_default_min",
    "test_clip_example",
    "test_clip_inbounds",
    "test_clip_outbounds",
    "test_clip_splitbounds",
    "test_leakyrelu",
    "test_leakyrelu_default",
    "test_leakyrelu_example",
    "test_sigmoid",
    "test_sigmoid_example",
    "test_abs",
    "test_neg",
    "test_neg_example",
    "test_exp",
    "test_exp_example",
    "test_log",
    "test_log_example",
    "test_sqrt",
    "test_sqrt_example",
    "test_reciprocal",
    "test_reciprocal_example",
    "test_tanh",
    "test_tanh_example",
    "test_erf",
    "test_floor",
    "test_floor_example",
    "test_ceil",
    "test_ceil_example",
    "test_softplus",
    "test_softplus_example",
    "test_softsign",
    "test_softsign_example",
    "test_elu",
    "test_elu_default",
    "test_elu_example",
    "test_selu",
    "test_selu_default",
    "test_selu_example",
    "test_hardsigmoid",
    "test_hardsigmoid_default",
    "test_hardsigmoid_example",
    "test_hardswish",
    "test_hardswish_expanded",
    "test_prelu_broadcast",
    "test_prelu_example",
    "test_add",
    "test_add_bcast",
    "test_sub",
    "test_sub_bcast",
    "test_sub_example",
    "test_mul",
    "test_mul_bcast",
    "test_mul_example",
    "test_div",
    "test_div_bcast",
    "test_div_example",
    "test_sum_example",
    "test_sum_one_input",
    "test_sum_two_inputs",
    "test_pow",
    "test_pow_bcast_array",
    "test_pow_bcast_scalar",
    "test_pow_example",
    "test_min_example",
    "test_min_float32",
    "test_min_one_input",
    "test_min_two_inputs",
    "test_max_example",
    "test_max_float32",
    "test_max_one_input",
    "test_max_two_inputs",
    "test_mean_example",
    "test_mean_one_input",
    "test_mean_two_inputs",
    "test_averagepool_2d_ceil",
    "test_averagepool_2d_default",
    "test_averagepool_2d_pads",
    "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_precomputed_pads",
    "test_averagepool_2d_precomputed_pads_count_include_pad",
    "test_averagepool_2d_precomputed_same_upper",
    "test_averagepool_2d_precomputed_strides",
    "test_averagepool_2d_same_lower",
    "test_averagepool_2d_same_upper",
    "test_averagepool_2d_strides",
    "test_maxpool_2d_ceil",
    "test_maxpool_2d_default",
    "test_maxpool_2d_dilations",
    "test_maxpool_2d_pads",
    "test_maxpool_2d_precomputed_pads",
    "test_maxpool_2d_precomputed_same_upper",
    "test_maxpool_2d_precomputed_strides",
    "test_maxpool_2d_same_lower",
    "test_maxpool_2d_same_upper",
    "test_maxpool_2d_strides",
    "test_globalaveragepool",
    "test_globalaveragepool_precomputed",
    "test_concat_1d_axis_0",
    "test_concat_1d_axis_negative_1",
    "test_concat_2d_axis_0",
    "test_concat_2d_axis_1",
    "test_concat_2d_axis_negative_1",
    "test_concat_2d_axis_negative_2",
    "test_concat_3d_axis_0",
    "test_concat_3d_axis_1",
    "test_concat_3d_axis_2",
    "test_concat_3d_axis_negative_1",
    "test_concat_3d_axis_negative_2",
    "test_concat_3d_axis_negative_3",
    "test_flatten_axis0",
    "test_flatten_axis1",
    "test_flatten_axis2",
    "test_flatten_axis3",
    "test_flatten_default_axis",
    "test_flatten_negative_axis1",
    "test_flatten_negative_axis2",
    "test_flatten_negative_axis3",
    "test_flatten_negative_axis4",
    "test_reshape_allowzero_reordered",
    "test_reshape_extended_dims",
    "test_reshape_negative_dim",
    "test_reshape_negative_extended_dims",
    "test_reshape_one_dim",
    "test_reshape_reduced_dims",
    "test_reshape_reordered_all_dims",
    "test_reshape_reordered_last_dims",
    "test_reshape_zero_and_negative_dim",
    "test_reshape_zero_dim",
    "test_transpose_all_permutations_0",
    "test_transpose_all_permutations_1",
    "test_transpose_all_permutations_2",
    "test_transpose_all_permutations_3",
    "test_transpose_all_permutations_4",
    "test_transpose_all_permutations_5",
    "test_transpose_default",
    "test_squeeze",
    "test_squeeze_negative_axes",
    "test_unsqueeze_axis_0",
    "test_unsqueeze_axis_1",
    "test_unsqueeze_axis_2",
    "test_unsqueeze_axis_3",
    "test_unsqueeze_negative_axes",
    "test_unsqueeze_three_axes",
    "test_unsqueeze_two_axes",
    "test_unsqueeze_unsorted_axes",
    "test_gemm_all_attributes",
    "test_gemm_alpha",
    "test_gemm_beta",
    "test_gemm_default_matrix_bias",
    "test_gemm_default_no_bias",
    "test_gemm_default_scalar_bias",
    "test_gemm_default_single_elem_vector_bias",
    "test_gemm_default_vector_bias",
    "test_gemm_default_zero_bias",
    "test_gemm_transposeA",
    "test_gemm_transposeB",
    "test_matmul_2d",
    "test_matmul_3d",
    "test_matmul_4d",
    "test_softmax_axis_0",
    "test_softmax_axis_1",
    "test_softmax_axis_2",
    "test_softmax_default_axis",
    "test_softmax_example",
    "test_softmax_large_number",
    "test_softmax_negative_axis",
    "test_lrn",
    "test_lrn_default",
    "test_dropout_default",
    "test_dropout_default_ratio",
    "test_dropout_default_old",
    "test_dropout_random_old",
    "test_identity",
    "test_constant",
    "test_constantofshape_float_ones",
    "test_constantofshape_int_zeros",
    "test_shape",
    "test_shape_example",
    "test_shape_clip_end",
    "test_shape_clip_start",
    "test_shape_end_1",
    "test_shape_end_negative_1",
    "test_shape_start_1",
    "test_shape_start_1_end_2",
    "test_shape_start_1_end_negative_1",
    "test_shape_start_negative_1",
};

inline std::filesystem::path NodeTestDir(const std::string& name) {
  return std::filesystem::path(CT_ONNX_TESTDATA) / "node" / name;
}

// input_0.pb, input_1.pb, ... (or output_*) of a test data set.
inline std::vector<Value> ReadSet(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<Value> out;
  for (int i = 0;; ++i) {
    const std::filesystem::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!std::filesystem::exists(p)) break;
    auto v = ReadTensorFile(p.string());
    EXPECT_TRUE(v.ok()) << v.status().message();
    if (v.ok()) out.push_back(*v);
  }
  return out;
}

// Imports a node test's model. Inputs the operator needs as constants (a Reshape's shape, Clip's
// bounds, Unsqueeze's axes, ConstantOfShape's shape) are bound to the test's values when the
// plain import asks for them; `feed` gets the inputs left to feed.
inline Expected<Graph> ImportNodeTest(const std::filesystem::path& dir,
                                      const std::vector<Value>& inputs, std::vector<Value>* feed) {
  const std::string model = (dir / "model.onnx").string();
  auto g = ImportOnnx(model);
  *feed = inputs;
  if (g.ok() || g.status().message().find("constant") == std::string::npos) return g;
  CT_ASSIGN_OR_RETURN(auto names, OnnxInputNames(model));
  ImportOptions o;
  feed->clear();
  for (size_t i = 0; i < names.size() && i < inputs.size(); ++i) {
    if (i > 0 || inputs[i].dtype != DType::kFloat32) {
      o.constants[names[i]] = inputs[i];
    } else {
      feed->push_back(inputs[i]);
    }
  }
  return ImportOnnx(model, o);
}

}  // namespace crosstune::model::testing
