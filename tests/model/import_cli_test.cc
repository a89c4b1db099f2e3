// `crosstune import` on hostile files, end to end through the binary: what a user sees is a named
// error or well-formed JSON, never an exception's text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/testing/support.h"
#include "onnx.pb.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;

testing::CommandResult Crosstune(const std::string& args) {
  return testing::RunCommand(std::string(CT_CLI) + " " + args);
}

class ImportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ct_import_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Relu of one float input named `input`; with `weight_floats`, an Add of a weight that size.
  std::string WriteModel(const std::string& file, const std::string& input,
                         int64_t weight_floats = 0) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto* g = m.mutable_graph();
    g->set_name("cli");
    auto* in = g->add_input();
    in->set_name(input);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(weight_floats > 0 ? weight_floats : 4);
    auto* relu = g->add_node();
    relu->set_op_type("Relu");
    relu->set_name("relu");
    relu->add_input(input);
    relu->add_output("y");
    std::string out = "y";
    if (weight_floats > 0) {
      auto* w = g->add_initializer();
      w->set_name("w");
      w->set_data_type(onnx::TensorProto::FLOAT);
      w->add_dims(weight_floats);
      w->set_raw_data(std::string(static_cast<size_t>(weight_floats) * 4, '\0'));
      auto* add = g->add_node();
      add->set_op_type("Add");
      add->set_name("add");
      add->add_input("y");
      add->add_input("w");
      add->add_output("z");
      out = "z";
    }
    g->add_output()->set_name(out);
    const fs::path p = dir_ / file;
    std::ofstream(p, std::ios::binary) << m.SerializeAsString();
    return p.string();
  }

  fs::path dir_;
};

TEST_F(ImportCliTest, JsonReplacesANameThatIsNotUtf8) {
  const std::string model = WriteModel("latin1.onnx", "caf\xe9");
  auto r = Crosstune("import " + model + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["inputs"][0]["name"], "caf\xef\xbf\xbd");  // U+FFFD
}

TEST_F(ImportCliTest, RefusesACharacterDeviceByName) {
  auto r = Crosstune("import /dev/zero");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/dev/zero: not a regular file (a character device)"), std::string::npos)
      << r.err;
}

// A model with what the importer does not take: `import --json` lists all of it for a script
// (every node's name, counted), exits 1, and the line without --json names the same.
TEST_F(ImportCliTest, JsonListsEverythingUnsupportedAtOnce) {
  const std::string path = WriteModel("unsupported.onnx", "x");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(testing::ReadFile(path)));
  auto* g = m.mutable_graph();
  for (int i = 0; i < 2; ++i) {
    auto* hm = g->add_node();
    hm->set_op_type("Hardmax");
    hm->set_name("hm" + std::to_string(i));
    hm->add_input(i == 0 ? "y" : "e0");
    hm->add_output("e" + std::to_string(i));
  }
  auto* inplace = g->mutable_node(0)->add_attribute();  // the Relu
  inplace->set_name("inplace");
  inplace->set_type(onnx::AttributeProto::INT);
  testing::WriteFile(path, m.SerializeAsString());

  auto r = Crosstune("import " + path + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["supported"], false);
  EXPECT_EQ(j["opset"], 13);
  ASSERT_EQ(j["unsupported"].size(), 2u) << j.dump();
  EXPECT_EQ(j["unsupported"][0]["kind"], "attribute");
  EXPECT_EQ(j["unsupported"][0]["op"], "Relu");
  EXPECT_EQ(j["unsupported"][0]["attribute"], "inplace");
  EXPECT_EQ(j["unsupported"][0]["nodes"], nlohmann::json::array({"relu"}));
  EXPECT_EQ(j["unsupported"][1]["kind"], "operator");
  EXPECT_EQ(j["unsupported"][1]["op"], "Hardmax");
  EXPECT_EQ(j["unsupported"][1]["count"], 2);
  EXPECT_EQ(j["unsupported"][1]["nodes"], nlohmann::json::array({"hm0", "hm1"}));

  auto line = Crosstune("import " + path);
  EXPECT_EQ(line.exit_code, 1);
  EXPECT_NE(line.err.find("not supported (opset 13): attribute 'inplace' of Relu at node 'relu'; "
                          "operator Hardmax at 2 nodes ('hm0', 'hm1')"),
            std::string::npos)
      << line.err;
}

TEST_F(ImportCliTest, MaxModelMbRaisesTheBudget) {
  const std::string model = WriteModel("weights.onnx", "x", int64_t{1} << 19);  // 2 MiB
  auto tight = Crosstune("import " + model + " --max-model-mb 1");
  EXPECT_EQ(tight.exit_code, 1);
  EXPECT_NE(tight.err.find("over the import budget of 1048576 bytes (--max-model-mb)"),
            std::string::npos)
      << tight.err;
  auto roomy = Crosstune("import " + model + " --max-model-mb 3");
  EXPECT_EQ(roomy.exit_code, 0) << roomy.err;
}

}  // namespace
}  // namespace crosstune
