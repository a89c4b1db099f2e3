// Writes the seed corpora under fuzz/corpus/ with the project's own encoders, so seeds follow the
// formats as they change: `build/fuzz/fuzz/crosstune-make-seeds fuzz/corpus`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crosstune/client/npy.h"
#include "crosstune/frame.h"
#include "crosstune/graph.h"
#include "crosstune/package.h"
#include "crosstune/params.h"
#include "crosstune/tracker_messages.h"
#include "crosstune/tvm_params.h"
#include "onnx.pb.h"

namespace {

namespace fs = std::filesystem;
using namespace crosstune;

// `levels` arrays, one in another: just past the JSON readers' depth limit (64) at 65.
std::string Nested(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string Le32(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

void Put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A module of two functions as crosstune's builder links one (clang-14 and lld, -shared, PIC,
// relative relocations, symbol table kept) for each board's triple; skipped without clang-14.
void PutModules(const fs::path& dir) {
  const fs::path tmp = fs::temp_directory_path() / "crosstune-seed-module";
  fs::create_directories(tmp);
  std::ofstream(tmp / "m.c") << R"(#include "crosstune/kernel_abi.h"
static int32_t vadd(const ct_arg* a, int32_t n) { (void)a; return n == 3 ? 0 : 1; }
static int32_t scale(const ct_arg* a, int32_t n) { (void)a; return n == 2 ? 0 : 1; }
static const ct_function kFns[] = {{"vadd", vadd, "ttt"}, {"scale", scale, "tf"}};
CT_DEFINE_MODULE("llvm", kFns, 0)
)";
  for (const char* triple :
       {"x86_64-linux-gnu", "aarch64-linux-gnu", "armv7a-linux-gnueabihf", "riscv64-linux-gnu"}) {
    const fs::path out = tmp / (std::string(triple) + ".so");
    const std::string cmd = std::string("clang-14 -O1 -g0 -fPIC -shared -nostdlib -fuse-ld=lld ") +
                            "--target=" + triple + " -I" + std::string(CT_SOURCE_DIR) +
                            "/common/include -o " + out.string() + " " + (tmp / "m.c").string();
    if (std::system(cmd.c_str()) == 0) Put(dir, std::string("module-") + triple, Slurp(out));
  }
  fs::remove_all(tmp);
}

// A frame's body (the fuzzer gets what follows the length prefix).
template <typename T>
std::string Body(Opcode op, const T& payload) {
  return EncodeFrame(op, 7, payload).substr(4);
}

}  // namespace

// Small ONNX models of the supported operators, built with the generated classes (opset 13).
class OnnxSeed {
 public:
  OnnxSeed() {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(13);
    m_.mutable_graph()->set_name("seed");
  }
  void Input(const std::string& name, const std::vector<int64_t>& dims) {
    auto* in = g()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void Output(const std::string& name) { g()->add_output()->set_name(name); }
  // A float initializer of 0.1, 0.2, ... (raw_data when `raw`).
  void Weight(const std::string& name, const std::vector<int64_t>& dims, bool raw = false) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(0.1F * static_cast<float>(i % 7 + 1));
    if (raw) {
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    } else {
      for (float f : v) t->add_float_data(f);
    }
  }
  void Ints(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g()->node_size()));
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return n;
  }
  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::string Bytes() const { return m_.SerializeAsString(); }

 private:
  onnx::GraphProto* g() { return m_.mutable_graph(); }
  onnx::ModelProto m_;
};

void PutOnnx(const fs::path& dir) {
  {
    OnnxSeed m;  // conv + bias + relu, then a pool
    m.Input("x", {1, 3, 8, 8});
    m.Weight("w", {4, 3, 3, 3}, true);
    m.Weight("b", {4});
    auto* conv = m.Node("Conv", {"x", "w", "b"}, {"c"});
    OnnxSeed::IntsAttr(conv, "pads", {1, 1, 1, 1});
    OnnxSeed::IntsAttr(conv, "strides", {1, 1});
    m.Node("Relu", {"c"}, {"r"});
    auto* pool = m.Node("MaxPool", {"r"}, {"y"});
    OnnxSeed::IntsAttr(pool, "kernel_shape", {2, 2});
    OnnxSeed::IntsAttr(pool, "strides", {2, 2});
    m.Output("y");
    Put(dir, "conv_relu_pool", m.Bytes());
  }
  {
    OnnxSeed m;  // gemm with a transposed weight, softmax
    m.Input("x", {2, 4});
    m.Weight("w", {3, 4});
    m.Weight("b", {3});
    auto* gemm = m.Node("Gemm", {"x", "w", "b"}, {"g"});
    OnnxSeed::IntAttr(gemm, "transB", 1);
    m.Node("Softmax", {"g"}, {"y"});
    m.Output("y");
    Put(dir, "gemm_softmax", m.Bytes());
  }
  {
    OnnxSeed m;  // constants folded at import: ConstantOfShape, Shape, Reshape, Add
    m.Input("x", {2, 3, 4});
    m.Ints("shape", {2, 12});
    auto* fill = m.Node("ConstantOfShape", {"shape"}, {"ones"});
    auto* value = fill->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    value->mutable_t()->add_dims(1);
    value->mutable_t()->add_float_data(1.0F);
    m.Node("Shape", {"ones"}, {"s"});
    m.Node("Reshape", {"x", "s"}, {"flat"});
    m.Node("Add", {"flat", "ones"}, {"y"});
    m.Output("y");
    Put(dir, "constant_of_shape_reshape", m.Bytes());
  }
  {
    OnnxSeed m;  // transpose, concat, flatten
    m.Input("x", {2, 3, 4});
    auto* t = m.Node("Transpose", {"x"}, {"t"});
    OnnxSeed::IntsAttr(t, "perm", {2, 0, 1});
    auto* c = m.Node("Concat", {"t", "t"}, {"c"});
    OnnxSeed::IntAttr(c, "axis", 0);
    m.Node("Flatten", {"c"}, {"y"});
    m.Output("y");
    Put(dir, "transpose_concat_flatten", m.Bytes());
  }
  {
    OnnxSeed m;  // a constant through Constant, Unsqueeze and Mul, batchnorm on a conv
    m.Input("x", {1, 2, 4, 4});
    m.Weight("w", {2, 2, 1, 1});
    for (const char* p : {"scale", "bias", "mean", "var"}) m.Weight(p, {2});
    m.Node("Conv", {"x", "w"}, {"c"});
    m.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"});
    auto* k = m.Node("Constant", {}, {"k"});
    auto* a = k->add_attribute();
    a->set_name("value_float");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(2.0F);
    m.Ints("axes", {0});
    m.Node("Unsqueeze", {"k", "axes"}, {"k1"});
    m.Node("Mul", {"bn", "k1"}, {"y"});
    m.Output("y");
    Put(dir, "conv_batchnorm_constant", m.Bytes());
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: crosstune-make-seeds CORPUS_DIR\n");
    return 1;
  }
  fs::path root = argv[1];

  fs::path frames = root / "fuzz_frame";
  msg::Hello hello;
  hello.peer_name = "alice@host";
  Put(frames, "hello", Body(Opcode::kHello, hello));
  Put(frames, "auth", Body(Opcode::kAuth, msg::Auth{std::string(64, 'a')}));
  Put(frames, "error", EncodeError(3, Status(ErrorCode::kNotFound, "no such file")).substr(4));
  Put(frames, "upload", Body(Opcode::kUpload, msg::UploadRequest{"dir/k.so", 4096, ""}));
  msg::CallRequest call;
  call.module_id = 1;
  call.function = "vadd";
  call.args = {msg::Arg{static_cast<uint8_t>(msg::ArgKind::kTensor), 0, 0.0, 1},
               msg::Arg{static_cast<uint8_t>(msg::ArgKind::kInt64), 42, 0.0, 0}};
  Put(frames, "call", Body(Opcode::kCall, call));
  msg::TimeRequest time;
  time.call = call;
  time.timing.repeat = 5;
  Put(frames, "time", Body(Opcode::kTimeCall, time));
  msg::TensorAllocRequest alloc;
  alloc.shape = {64, 64};
  Put(frames, "alloc", Body(Opcode::kTensorAlloc, alloc));
  msg::Register reg;
  reg.key = "rpi4";
  reg.tags = {{"room", "lab"}};
  reg.info.arch = "aarch64";
  reg.port = 9090;
  reg.server_id = "0123456789abcdef";
  Put(frames, "register", Body(Opcode::kRegister, reg));
  msg::DeviceRequest req;
  req.key = "rpi4";
  req.constraints = {"memory_mb>=2048", "+neon"};
  req.holder = "ci";
  Put(frames, "request", Body(Opcode::kRequestDevice, req));
  Put(frames, "release", Body(Opcode::kReleaseLease, msg::ReleaseLease{"token", 0, "done"}));

  fs::path npy = root / "fuzz_npy";
  float f[6] = {1, 2, 3, 4, 5, 6};
  if (auto b = client::EncodeNpy({2, 3}, DLDataType{kDLFloat, 32, 1}, f, sizeof(f)); b.ok()) {
    Put(npy, "f32_2x3", *b);
  }
  uint8_t flags[3] = {1, 0, 1};
  if (auto b = client::EncodeNpy({3}, DLDataType{kDLUInt, 8, 1}, flags, 3, true); b.ok()) {
    Put(npy, "bool_3", *b);
  }
  int64_t scalar = 7;
  if (auto b = client::EncodeNpy({}, DLDataType{kDLInt, 64, 1}, &scalar, 8); b.ok()) {
    Put(npy, "i64_scalar", *b);
  }

  fs::path params = root / "fuzz_params";
  pkg::ParamsWriter w;
  (void)w.Add("weight", DLDataType{kDLFloat, 32, 1}, {2, 3}, f, sizeof(f));
  (void)w.Add("bias", DLDataType{kDLInt, 64, 1}, {1}, &scalar, 8);
  w.set_build_id(std::string(64, 'b'));
  Put(params, "two_tensors.bin", w.Serialize());

  fs::path packages = root / "fuzz_package";
  pkg::Manifest m;
  m.kind = "cpu";
  m.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  m.arch = "aarch64";
  m.cpu = "cortex-a72";
  m.library = "lib/kernel.so";
  m.functions = {pkg::Function{"vadd", "ttt", "", {}, {}, 0}};
  std::string tmp = (fs::temp_directory_path() / "crosstune-seed.tar").string();
  if (pkg::WritePackage(tmp, m,
                        {pkg::PackageInput{"lib/kernel.so",
                                           "\x7f"
                                           "ELF fake",
                                           ""},
                         pkg::PackageInput{"params.bin", w.Serialize(), ""}})
          .ok()) {
    std::ifstream in(tmp, std::ios::binary);
    Put(packages, "sample_package", std::string(std::istreambuf_iterator<char>(in), {}));
    fs::remove(tmp);
  }
  Put(packages, "manifest.json", pkg::ManifestToJson(m));
  // Nested at the limit and one level past it, where a value is quoted in an error text.
  std::string deep_manifest = pkg::ManifestToJson(m);
  const std::string version = "\"format_version\": 1";
  deep_manifest.replace(deep_manifest.find(version), version.size(),
                        "\"format_version\": " + Nested(65));
  Put(packages, "deep-format-version", deep_manifest);
  Put(packages, "deep-at-limit", "{\"tuning\": " + Nested(63) + "}");

  // Params indexes nested past the limit in a tensor's shape (the header's size says how long).
  const std::string good_params = w.Serialize();
  auto with_index = [&](const std::string& index) {
    std::string b = good_params.substr(0, 80);
    uint64_t n = index.size();
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    return b + index;
  };
  Put(params, "deep-shape",
      with_index(R"({"tensors":[{"name":"w","dtype":"float32","offset":128,"nbytes":4,"shape":)" +
                 Nested(62) + "}]}"));

  // JSON of every kind, at the limit and past it, for the reader itself.
  fs::path json = root / "fuzz_json";
  Put(json, "deep-arrays", Nested(65));
  Put(json, "at-limit", Nested(64));
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += "{\"a\":";
  Put(json, "deep-objects", objects + "1" + std::string(65, '}'));
  Put(json, "mixed",
      R"({"k":[1,-2.5e3,"x\u00fc\ud83d\ude00",null,true,false,{}],"n":18446744073709551615})");

  // A record log: a good line, then lines nested past the limit where values are copied or quoted.
  fs::path records = root / "fuzz_records";
  const std::string line =
      R"({"v":1,"tool":"crosstune","run":"r","tuner":"xgb","task":{"template":"matmul","shape":[64,64,64],"dtype":"float32"},"target":"llvm -mtriple=x86_64-linux-gnu","device":{"name":"local","arch":"x86_64","cpu":"x","key":""},"config":{"index":3,"values":{"mr":4}},"flops":524288.0,"costs":[0.001],"mean":0.001,"error":"ok","message":"","build_s":0.1,"run_s":0.1,"timestamp":"t")";
  std::string deep_log = line + "}\n";
  deep_log += line + R"(,"workload":{"w":)" + Nested(63) + "}}\n";
  std::string deep_v = line + "}";
  deep_v.replace(deep_v.find("\"v\":1"), 5, "\"v\":" + Nested(65));
  deep_log += deep_v + "\n";
  Put(records, "deep-lines", deep_log);

  // A Kernel Tuner cache with its problem_size nested past the limit.
  Put(root / "fuzz_kt_cache", "deep-problem-size",
      R"({"tune_params_keys": ["x"], "problem_size": )" + Nested(65) +
          R"(, "cache": {"1": {"x": 1, "time": 1.0}}})");

  // TVM peers: an UPDATE_INFO and a PUT nested past the limit, each a step of connection 1
  // (step byte 0: bytes arrive; then their count, then the bytes: [int32 length][JSON]).
  fs::path tvm = root / "fuzz_tvm_tracker";
  auto step = [](const std::string& message) {
    std::string bytes = Le32(static_cast<uint32_t>(message.size())) + message;
    return std::string(1, '\0') + static_cast<char>(bytes.size()) + bytes;
  };
  Put(tvm, "deep-update-info",
      step(R"([5, {"key": "server:cpu", "addr": )" + Nested(64) + "}]") + step("[6]"));
  Put(tvm, "deep-put-port", step(R"([3, "cpu", [)" + Nested(65) + R"(, "cpu:1"], null])"));

  PutModules(root / "fuzz_module_table");

  // graph.json: an input, a param and one node writing the output, as the compiler writes it.
  fs::path graphs = root / "fuzz_graph";
  {
    graph::Graph g;
    for (const char* name : {"input", "weight"}) {
      graph::Node arg;
      arg.op = "null";
      arg.name = name;
      g.nodes.push_back(arg);
    }
    graph::Node op;
    op.op = "tvm_op";
    op.name = "dense0";
    op.inputs = {{0, 0, 0}, {1, 0, 0}};
    op.func_name = "ct_n2_dense";
    op.num_inputs = 2;
    op.op_type = "dense";
    op.scratch_bytes = 64;
    op.flops = 96;
    op.provenance = graph::Provenance{false, "dense 1,8,6", 12, 1764000000.0};
    g.nodes.push_back(op);
    g.arg_nodes = {0, 1};
    g.node_row_ptr = {0, 1, 2, 3};
    g.heads = {{2, 0, 0}};
    g.storage_id = {0, 1, 2};
    g.shape = {{1, 8}, {6, 8}, {1, 6}};
    g.dltype = std::vector<DLDataType>(3, DLDataType{kDLFloat, 32, 1});
    g.build_id = std::string(64, 'b');
    g.inputs = {"input"};
    g.outputs = {"logits"};
    g.storage_bytes = {32, 192, 24};
    Put(graphs, "dense", graph::GraphToJson(g));
    g.nodes[2].provenance = graph::Provenance{true, "", -1, 0};
    Put(graphs, "dense-default-config", graph::GraphToJson(g, 0));
  }
  Put(graphs, "deep-attrs",
      R"({"nodes": [{"op": "null", "name": "x", "attrs": )" + Nested(65) + "}]}");

  // TVM's params blob, from the params.bin above.
  {
    std::string bin = w.Serialize();
    void* buf = std::aligned_alloc(64, (bin.size() + 63) / 64 * 64);
    std::memcpy(buf, bin.data(), bin.size());
    auto file = pkg::ParamsFile::FromBuffer(buf, bin.size());
    if (file.ok()) Put(root / "fuzz_tvm_params", "two_tensors", pkg::ExportTvmParams(**file));
    std::free(buf);
  }

  fs::path constraints = root / "fuzz_constraint";
  Put(constraints, "simple", "bcm2711\nsoc=bcm2711\nmemory_mb>=2048\n+neon\narch!=x86_64");
  Put(constraints, "numbers", "x\ncores>=4\ncores<=8.5\nmemory_mb>=1e3");

  PutOnnx(root / "fuzz_onnx");
  return 0;
}
