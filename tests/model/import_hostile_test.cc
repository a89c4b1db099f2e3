// The importer is a parser of untrusted files: models built here with the generated ONNX classes
// that once crashed, hung, read outside the model's folder or let a bad shape through must each
// end in a named error (the node or tensor, and what is wrong), never a crash, a hang or an
// exception's own text.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "crosstune/model/onnx_import.h"
#include "crosstune/model/passes.h"
#include "onnx.pb.h"

namespace crosstune::model {
namespace {

namespace fs = std::filesystem;
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// A model of opset 13 whose graph the test fills.
class HostileModel {
 public:
  HostileModel() {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(13);
    model_.mutable_graph()->set_name("hostile");
  }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  void Input(const std::string& name, std::vector<int64_t> dims,
             int type = onnx::TensorProto::FLOAT) {
    auto* in = graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  void Output(const std::string& name) { graph()->add_output()->set_name(name); }
  onnx::TensorProto* Initializer(const std::string& name, std::vector<int64_t> dims,
                                 int type = onnx::TensorProto::FLOAT) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
  onnx::NodeProto* Node(const std::string& op, const std::string& name,
                        std::vector<std::string> inputs, std::vector<std::string> outputs) {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static onnx::AttributeProto* Attr(onnx::NodeProto* n, const std::string& name,
                                    onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  onnx::ModelProto* model() { return &model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }
  Expected<Graph> Import(const std::string& dir = "", const ImportOptions& o = {}) const {
    return ImportOnnxBytes(Bytes(), dir, o);
  }

 private:
  onnx::ModelProto model_;
};

// A fresh folder for a model and its external data, removed after the test.
class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ct_hostile_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A model whose one uint8 initializer "w" of `elements` elements lies in external data.
  static HostileModel ExternalWeight(const std::string& location, int64_t elements,
                                     const std::string& offset = "",
                                     const std::string& length = "") {
    HostileModel m;
    auto* w = m.Initializer("w", {elements}, onnx::TensorProto::UINT8);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const std::string& k, const std::string& v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    if (!offset.empty()) add("offset", offset);
    if (!length.empty()) add("length", length);
    m.Node("Identity", "id", {"w"}, {"y"});
    m.Output("y");
    return m;
  }

  fs::path dir_;
};

// The newest opset and IR version the pinned onnx writes import; past them, the refusal names the
// version as the file gives it (a huge one is not truncated into a supported one).
TEST(ImportHostileTest, OpsetsAndIrVersionsOutsideTheRangeAreRefusedAsWritten) {
  HostileModel m;
  m.Input("x", {1, 4});
  m.Node("Relu", "r", {"x"}, {"y"});
  m.Output("y");
  m.model()->mutable_opset_import(0)->set_version(28);
  m.model()->set_ir_version(14);
  auto g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->opset, 28);
  m.model()->mutable_opset_import(0)->set_version(29);
  EXPECT_EQ(m.Import().status().message(),
            "opset 29 of the default domain is not supported (7 to 28)");
  m.model()->mutable_opset_import(0)->set_version((int64_t{1} << 32) + 13);
  EXPECT_EQ(m.Import().status().message(),
            "opset 4294967309 of the default domain is not supported (7 to 28)");
  m.model()->mutable_opset_import(0)->set_version(13);
  m.model()->set_ir_version(15);
  EXPECT_EQ(m.Import().status().message(), "IR version 15 is not supported (3 to 14)");
}

// Dropout's mask, as old model zoo files have it: nothing reads it, so it is dropped; read by
// anything (here a graph output), it is refused by name.
TEST(ImportOptionalOutputsTest, AnUnreadDropoutMaskIsDroppedAndAReadOneRefusedByName) {
  HostileModel m;
  m.Input("x", {1, 4});
  m.Node("Dropout", "drop", {"x"}, {"y", "mask"});
  m.Node("Relu", "act", {"y"}, {"z"});
  m.Output("z");
  auto g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->nodes[0].outputs.size(), 1u);
  m.Output("mask");
  auto refused = m.Import();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status().message(),
                       "Dropout node 'drop': output 1 ('mask') is not supported"));
}

// MaxPool's indices and BatchNormalization's running statistics, unread: dropped.
TEST(ImportOptionalOutputsTest, UnreadIndicesAndTrainingStatisticsAreDropped) {
  HostileModel m;
  m.Input("x", {1, 2, 4, 4});
  for (const char* name : {"scale", "bias", "mean", "var"}) {
    auto* t = m.Initializer(name, {2});
    for (int i = 0; i < 2; ++i) t->add_float_data(1.0f);
  }
  m.Node("BatchNormalization", "bn", {"x", "scale", "bias", "mean", "var"},
         {"y", "running_mean", "running_var"});
  auto* pool = m.Node("MaxPool", "pool", {"y"}, {"p", "indices"});
  auto* k = HostileModel::Attr(pool, "kernel_shape", onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  m.Output("p");
  auto g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const Node& n : g->nodes) EXPECT_EQ(n.outputs.size(), 1u) << n.name;
}

TEST(ImportHostileTest, ConstantWhoseValueIsNotATensorIsRefusedNamingTheAttribute) {
  HostileModel m;
  auto* c = m.Node("Constant", "c", {}, {"y"});
  HostileModel::Attr(c, "value", onnx::AttributeProto::FLOAT)->set_f(1.0F);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "Constant node 'c': attribute 'value' is a float, Constant takes a tensor");
}

TEST(ImportHostileTest, ConstantOfShapeWhoseValueIsNotATensorIsRefusedNamingTheAttribute) {
  HostileModel m;
  auto* shape = m.Initializer("shape", {1}, onnx::TensorProto::INT64);
  shape->add_int64_data(4);
  auto* c = m.Node("ConstantOfShape", "fill", {"shape"}, {"y"});
  HostileModel::Attr(c, "value", onnx::AttributeProto::INTS)->add_ints(3);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "ConstantOfShape node 'fill': attribute 'value' is ints, ConstantOfShape takes a "
            "tensor");
}

TEST(ImportHostileTest, InitializerWhoseDimsMultiplyPastInt64IsRefused) {
  // 2^32 x 2^32 bytes wraps to 0 elements: an empty raw_data "matches" it.
  HostileModel m;
  m.Initializer("w", {int64_t{1} << 32, int64_t{1} << 32}, onnx::TensorProto::UINT8)
      ->set_raw_data("");
  m.Node("Transpose", "t", {"w"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "tensor 'w' [4294967296,4294967296]"));
  EXPECT_TRUE(Contains(g.status().message(), "too large"));
}

TEST(ImportHostileTest, InitializerWhoseDimsWrapToAFewElementsIsRefused) {
  // (2^62 + 16) x 4 bytes wraps to 64: the 64 bytes given "fit", and folding the Transpose
  // would read past them at strides the dims choose.
  HostileModel m;
  m.Initializer("w", {(int64_t{1} << 62) + 16, 4}, onnx::TensorProto::UINT8)
      ->set_raw_data(std::string(64, 'x'));
  m.Node("Transpose", "t", {"w"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "tensor 'w'"));
}

TEST(ImportHostileTest, TransposeWithAPermLongerThanTheRankIsRefused) {
  HostileModel m;
  m.Input("x", {});
  auto* t = m.Node("Transpose", "t", {"x"}, {"y"});
  auto* perm = HostileModel::Attr(t, "perm", onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) perm->add_ints(p * 1000);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "Transpose node 't': perm has 12 values for a tensor of rank 0");
}

TEST(ImportHostileTest, TransposeWithARepeatedOrOutOfRangePermIsRefused) {
  for (std::vector<int64_t> bad :
       {std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{-1, 0}}) {
    HostileModel m;
    m.Input("x", {2, 3});
    auto* t = m.Node("Transpose", "t", {"x"}, {"y"});
    auto* perm = HostileModel::Attr(t, "perm", onnx::AttributeProto::INTS);
    for (int64_t p : bad) perm->add_ints(p);
    m.Output("y");
    auto g = m.Import();
    ASSERT_FALSE(g.ok()) << bad[0] << "," << bad[1];
    EXPECT_TRUE(Contains(g.status().message(), "Transpose node 't': perm"));
  }
}

TEST(ImportHostileTest, ReshapeToNegativeDimensionsIsRefused) {
  // [-2,-3] holds 6 elements by a plain product: the shape must still be refused.
  HostileModel m;
  m.Input("x", {2, 3});
  auto* r = m.Node("Reshape", "r", {"x"}, {"y"});
  auto* shape = HostileModel::Attr(r, "shape", onnx::AttributeProto::INTS);
  shape->add_ints(-2);
  shape->add_ints(-3);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "Reshape node 'r': "));
}

TEST(ImportHostileTest, ConstantOfShapeThatWrapsIsRefused) {
  HostileModel m;
  auto* shape = m.Initializer("shape", {2}, onnx::TensorProto::INT64);
  shape->add_int64_data(int64_t{1} << 32);
  shape->add_int64_data(int64_t{1} << 32);
  m.Node("ConstantOfShape", "fill", {"shape"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "ConstantOfShape node 'fill': output 'y'"));
}

TEST(ImportHostileTest, ConvWithPadsThatWrapIsRefused) {
  HostileModel m;
  m.Input("x", {1, 1, 4, 4});
  auto* w = m.Initializer("w", {1, 1, 1, 1});
  w->add_float_data(1.0F);
  auto* c = m.Node("Conv", "conv", {"x", "w"}, {"y"});
  auto* pads = HostileModel::Attr(c, "pads", onnx::AttributeProto::INTS);
  // A 2^41 x 2^41 output: its element count wraps.
  for (int i = 0; i < 4; ++i) pads->add_ints(int64_t{1} << 40);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "Conv node 'conv'"));
}

TEST(ImportHostileTest, ConstantOfShapeOverTheBudgetIsANamedError) {
  HostileModel m;
  auto* shape = m.Initializer("shape", {1}, onnx::TensorProto::INT64);
  shape->add_int64_data(int64_t{1} << 40);
  m.Node("ConstantOfShape", "fill", {"shape"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kLimitExceeded);
  EXPECT_EQ(g.status().message(),
            "ConstantOfShape node 'fill': output 'y' [1099511627776] float32 is 4398046511104 "
            "bytes, over the import budget of 4294967296 bytes (--max-model-mb)");
}

TEST(ImportHostileTest, TheBudgetCountsEveryTensorAndAnOptionRaisesIt) {
  HostileModel m;
  m.Initializer("a", {1 << 18})->set_raw_data(std::string(1 << 20, '\0'));
  m.Initializer("b", {1 << 18})->set_raw_data(std::string(1 << 20, '\0'));
  m.Node("Add", "add", {"a", "b"}, {"y"});
  m.Output("y");
  ImportOptions tight;
  tight.max_model_bytes = (3 << 20) - 1;  // the two weights fit, the folded sum does not
  auto g = m.Import("", tight);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kLimitExceeded);
  EXPECT_EQ(g.status().message(),
            "Add node 'add': output 'y' [262144] float32 brings the model's tensors to 3145728 "
            "bytes, over the import budget of 3145727 bytes (--max-model-mb)");
  ImportOptions roomy;
  roomy.max_model_bytes = 3 << 20;
  EXPECT_TRUE(m.Import("", roomy).ok());
}

TEST(ImportHostileTest, AttributeOfTheWrongKindIsRefusedNamingNodeAttributeAndKinds) {
  HostileModel m;
  m.Input("x", {2, 3});
  auto* t = m.Node("Transpose", "t", {"x"}, {"y"});
  HostileModel::Attr(t, "perm", onnx::AttributeProto::FLOAT)->set_f(1.0F);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "Transpose node 't': attribute 'perm' is a float, Transpose takes ints");
}

TEST(ImportHostileTest, AnInputListedTwiceIsRefused) {
  HostileModel m;
  m.Input("x", {2});
  m.Input("x", {3});
  m.Node("Relu", "r", {"x"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "input 'x' is listed twice");
}

TEST(ImportHostileTest, AnInitializerGivenTwiceIsRefused) {
  HostileModel m;
  m.Initializer("w", {1})->add_float_data(1.0F);
  m.Initializer("w", {2})->add_float_data(1.0F);
  m.Node("Relu", "r", {"w"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "initializer 'w' is given twice");
}

TEST(ImportHostileTest, ANodeWithoutOutputsIsRefused) {
  // Found by fuzz_onnx: every operator's inference writes its output 0.
  HostileModel m;
  m.Input("x", {2, 3});
  m.Node("Relu", "r", {"x"}, {});
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "Relu node 'r': has no output");
}

TEST(ImportHostileTest, OperatorsOfThePassesAreNotOperatorsOfAFile) {
  HostileModel m;
  m.Input("x", {1, 8, 2, 2});
  auto* t = m.Node("LayoutTransform", "lt", {"x"}, {"y"});
  HostileModel::Attr(t, "block", onnx::AttributeProto::INT)->set_i(0);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "not supported (opset 13): operator LayoutTransform at node 'lt'");
  // Nor a MatMul whose weight the compiler packed: a file cannot hand the kernel panels.
  HostileModel packed;
  packed.Input("a", {2, 8});
  packed.Input("b", {12, 8, 8});
  packed.Node("PackedMatMul", "pm", {"a", "b"}, {"y"});
  packed.Output("y");
  auto p = packed.Import();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "not supported (opset 13): operator PackedMatMul at node 'pm'");
}

// Everything missing in one refusal, before any tensor is read: each operator and attribute with
// its node count and first names, sorted, the opset named.
TEST(ImportHostileTest, EveryUnsupportedOperatorAndAttributeIsListedAtOnce) {
  HostileModel m;
  m.Input("x", {1, 4});
  m.Node("Hardmax", "e1", {"x"}, {"a"});
  m.Node("Hardmax", "", {"a"}, {"b"});
  for (int i = 0; i < 4; ++i) {
    m.Node("Det", "d" + std::to_string(i), {"b"}, {"c" + std::to_string(i)});
  }
  HostileModel::Attr(m.Node("Relu", "act", {"x"}, {"r"}), "inplace", onnx::AttributeProto::INT);
  m.Node("QOrderedMatMul", "qmm", {"x"}, {"y"})->set_domain("com.microsoft");
  auto* att = m.Node("Attention", "att", {"x"}, {"z"});
  att->set_domain("com.microsoft");
  HostileModel::Attr(att, "foo", onnx::AttributeProto::INT)->set_i(1);
  m.Output("y");
  auto g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "not supported (opset 13): attribute 'inplace' of Relu at node 'act'; attribute 'foo' "
            "of Attention of domain 'com.microsoft' at node 'att'; operator Det at 4 nodes ('d0', "
            "'d1', 'd2', ...); operator Hardmax at 2 nodes ('e1', 'Hardmax_1'); operator "
            "QOrderedMatMul of domain 'com.microsoft' at node 'qmm'");
}

// The 4- and 2-bit types are packed two or four to a byte in a file: unpacked and widened at
// import (int4 to int8), a packed size that does not fit refused, and the typed fields (whose
// packing the file format leaves to each writer) refused by name.
TEST(ImportHostileTest, PackedNarrowTensorsAreUnpackedOrRefusedByName) {
  {
    HostileModel m;
    m.Initializer("w", {3}, 22 /* INT4 */)->set_raw_data(std::string("\x21\x0f", 2));
    m.Node("Identity", "id", {"w"}, {"y"});
    m.Output("y");
    auto g = m.Import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    const Value& w = g->values[0];
    EXPECT_EQ(w.name, "w");
    EXPECT_EQ(w.dtype, DType::kInt8);
    EXPECT_EQ(w.AsInts(), (std::vector<int64_t>{1, 2, -1}));
  }
  {
    HostileModel m;
    m.Initializer("w", {3}, 21 /* UINT4 */)->set_raw_data(std::string("\x21", 1));
    m.Node("Identity", "id", {"w"}, {"y"});
    m.Output("y");
    auto g = m.Import();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().message(), "tensor 'w' [3] holds 1 values or bytes, not 3");
  }
  {
    HostileModel m;
    auto* t = m.Initializer("w", {2}, 26 /* INT2 */);
    t->add_int32_data(1);
    t->add_int32_data(1);
    m.Node("Identity", "id", {"w"}, {"y"});
    m.Output("y");
    auto g = m.Import();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().message(),
              "tensor 'w': a int2 tensor is read from raw_data or external data only");
  }
}

// A Cast to a narrow type inside a graph rounds to it, and the next node reads the value widened:
// float8e4m3fn's 0.3 is 0.3125, 1000 saturates to 448; the two nodes keep the Cast's name.
TEST(ImportHostileTest, ACastToANarrowTypeRoundsAndTheNextNodeReadsItWidened) {
  HostileModel m;
  m.Input("x", {3});
  HostileModel::Attr(m.Node("Cast", "c8", {"x"}, {"x8"}), "to", onnx::AttributeProto::INT)
      ->set_i(17);  // FLOAT8E4M3FN
  m.Node("Relu", "act", {"x8"}, {"y"});
  m.Output("y");
  auto g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::vector<std::string> names;
  for (const Node& n : g->nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c8", "c8:widen", "act"}));
  Value x = g->values[g->inputs[0]];
  const std::vector<float> v = {0.3F, -2.5F, 1000.0F};
  x.data = std::make_shared<std::vector<uint8_t>>(reinterpret_cast<const uint8_t*>(v.data()),
                                                  reinterpret_cast<const uint8_t*>(v.data() + 3));
  auto y = Interpret(*g, {x});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ((*y)[0].AsDoubles(), (std::vector<double>{0.3125, 0, 448}));
}

// com.microsoft's operators import as the ai.onnx nodes they stand for; what that rewriting does
// not cover is refused by name, before any kernel is built.
class ContribRefusals : public ::testing::Test {
 protected:
  // x [1,4,8] through com.microsoft's Attention (2 heads) with packed weights "w" [8,24].
  void SetUp() override {
    m_.Input("x", {1, 4, 8});
    std::vector<float> w(8 * 24, 0.5F);
    m_.Initializer("w", {8, 24})->mutable_float_data()->Add(w.begin(), w.end());
  }
  onnx::NodeProto* Attention(std::vector<std::string> inputs, std::vector<std::string> outputs) {
    auto* n = m_.Node("Attention", "att", std::move(inputs), std::move(outputs));
    n->set_domain("com.microsoft");
    HostileModel::Attr(n, "num_heads", onnx::AttributeProto::INT)->set_i(2);
    return n;
  }
  std::string Refusal() {
    auto g = m_.Import();
    return g.ok() ? "imported" : g.status().message();
  }
  HostileModel m_;
};

TEST_F(ContribRefusals, AttentionImportsAsMatMulsAndTheOnnxAttention) {
  Attention({"x", "w"}, {"y"});
  m_.Output("y");
  auto g = m_.Import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const GraphStats stats = Stats(*g);
  EXPECT_EQ(stats.ops.at("MatMul"), 3);
  EXPECT_EQ(stats.ops.at("Attention"), 1);
  EXPECT_EQ(g->values[g->outputs[0]].shape, (std::vector<int64_t>{1, 4, 8}));
}

TEST_F(ContribRefusals, AttentionWithWeightsComputedAtRunTimeIsRefused) {
  m_.Input("w2", {8, 24});
  Attention({"x", "w2"}, {"y"});
  m_.Output("y");
  EXPECT_EQ(Refusal(),
            "Attention node 'att': the weights must be a float32 constant [8, q + k + v hidden] "
            "(a model's initializer)");
}

TEST_F(ContribRefusals, AttentionWithPastKeysOrAPresentOutputIsRefused) {
  m_.Input("past", {2, 1, 2, 0, 4});
  Attention({"x", "w", "", "", "past"}, {"y"});
  m_.Output("y");
  EXPECT_EQ(Refusal(), "Attention node 'att': past key/value (inputs 4 and 6) is not supported");
}

TEST_F(ContribRefusals, AttentionWithAMaskOfAnotherShapeIsRefused) {
  m_.Input("mask", {1, 1, 4, 4}, onnx::TensorProto::INT32);
  Attention({"x", "w", "", "mask"}, {"y"});
  m_.Output("y");
  EXPECT_EQ(Refusal(),
            "Attention node 'att': mask_index [1,1,4,4] is not supported ([1] lengths, or ones "
            "and zeros [1,4] or [1,4,4])");
}

TEST_F(ContribRefusals, ARequiredInputLeftOutIsRefused) {
  m_.Node("SkipLayerNormalization", "sln", {"x", ""}, {"y"})->set_domain("com.microsoft");
  m_.Output("y");
  EXPECT_EQ(Refusal(), "SkipLayerNormalization node 'sln': input 1 is required (3 are)");
}

TEST_F(ContribRefusals, TheLayerNormsTrainingStatisticsAreRefusedWhenRead) {
  std::vector<float> ones(8, 1.0F);
  m_.Initializer("gamma", {8})->mutable_float_data()->Add(ones.begin(), ones.end());
  auto* n = m_.Node("SkipLayerNormalization", "sln", {"x", "x", "gamma"}, {"y", "mean"});
  n->set_domain("com.microsoft");
  m_.Output("y");
  m_.Output("mean");
  EXPECT_EQ(Refusal(),
            "SkipLayerNormalization node 'sln': outputs 1 and 2 (the mean and inverse standard "
            "deviation) are not supported; output 3, the sum, is");
}

TEST_F(HostileFiles, ModelFileThatIsACharacterDeviceIsRefusedByName) {
  auto g = ImportOnnx("/dev/zero");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "/dev/zero: not a regular file (a character device)");
}

TEST_F(HostileFiles, ModelFileThatIsAFolderIsRefusedByName) {
  auto g = ImportOnnx(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), dir_.string() + ": not a regular file (a folder)");
}

TEST_F(HostileFiles, ModelFileOverTheBudgetIsRefusedBeforeItIsRead) {
  const fs::path p = dir_ / "big.onnx";
  std::ofstream(p) << std::string(4096, '\0');
  ImportOptions o;
  o.max_model_bytes = 1024;
  auto g = ImportOnnx(p.string(), o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kLimitExceeded);
  EXPECT_EQ(g.status().message(), p.string() +
                                      ": the file is 4096 bytes, over the import budget of 1024 "
                                      "bytes (--max-model-mb)");
}

TEST_F(HostileFiles, ExternalDataThatIsAFolderIsRefusedByName) {
  fs::create_directories(dir_ / "weights");
  auto g = ExternalWeight("weights", 4).Import(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "tensor 'w': external data 'weights' is not a regular file (a folder)");
}

TEST_F(HostileFiles, ExternalDataIsReadWithinTheModelsFolder) {
  std::ofstream(dir_ / "w.bin") << "abcdefgh";
  auto g = ExternalWeight("w.bin", 4, "2", "4").Import(dir_.string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Value& w = g->values[g->outputs[0]];
  EXPECT_EQ(std::string(w.data->begin(), w.data->end()), "cdef");
}

TEST_F(HostileFiles, ExternalDataThroughASymlinkIsNotFollowed) {
  const auto size = static_cast<int64_t>(fs::file_size("/etc/passwd"));
  fs::create_symlink("/etc/passwd", dir_ / "w.bin");
  auto g = ExternalWeight("w.bin", size).Import(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "tensor 'w': external data 'w.bin' is a symbolic link (links are not followed)");
  // A linked folder on the way is not followed either.
  fs::create_directory_symlink("/etc", dir_ / "etc");
  auto through = ExternalWeight("etc/passwd", size).Import(dir_.string());
  ASSERT_FALSE(through.ok());
  EXPECT_EQ(through.status().message(),
            "tensor 'w': external data 'etc/passwd': 'etc' is a symbolic link (links are not "
            "followed)");
}

TEST_F(HostileFiles, ExternalDataThatIsAFifoIsRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "w.bin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const HostileModel m = ExternalWeight("w.bin", 4);
  std::promise<Status> done;
  std::future<Status> result = done.get_future();
  std::thread importer([&] { done.set_value(m.Import(dir_.string()).status()); });
  const bool finished = result.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!finished) {
    // Unblock the reader the import left waiting, so the test can end.
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  importer.join();
  ASSERT_TRUE(finished) << "import blocked on a FIFO";
  const Status s = result.get();
  EXPECT_EQ(s.message(), "tensor 'w': external data 'w.bin' is not a regular file (a FIFO)");
}

TEST_F(HostileFiles, ExternalDataOffsetThatIsNotANumberIsANamedError) {
  std::ofstream(dir_ / "w.bin") << "abcdefgh";
  auto g = ExternalWeight("w.bin", 4, "four").Import(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(Contains(g.status().message(), "tensor 'w': external data offset 'four'"));
}

TEST_F(HostileFiles, ExternalDataPastTheEndOfTheFileIsRefused) {
  std::ofstream(dir_ / "w.bin") << "abcdefgh";
  for (const auto& [offset, length] : std::vector<std::pair<std::string, std::string>>{
           {"6", "4"}, {"18446744073709551615", "4"}}) {
    auto g = ExternalWeight("w.bin", 4, offset, length).Import(dir_.string());
    ASSERT_FALSE(g.ok()) << offset;
    EXPECT_TRUE(Contains(g.status().message(), "tensor 'w': external data"));
  }
}

TEST_F(HostileFiles, ExternalDataOutsideTheFolderIsRefused) {
  for (const char* where : {"../w.bin", "/etc/passwd", "a/../../w.bin"}) {
    auto g = ExternalWeight(where, 4).Import(dir_.string());
    ASSERT_FALSE(g.ok()) << where;
    EXPECT_TRUE(Contains(g.status().message(), "tensor 'w': external data")) << where;
  }
}

}  // namespace
}  // namespace crosstune::model
