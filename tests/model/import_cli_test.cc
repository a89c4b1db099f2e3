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
