// Writes the seed corpora under fuzz/corpus/ with the project's own encoders, so seeds follow the
// formats as they change: `build/fuzz/fuzz/crosstune-make-seeds fuzz/corpus`.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crosstune/client/npy.h"
#include "crosstune/frame.h"
#include "crosstune/package.h"
#include "crosstune/params.h"
#include "crosstune/tracker_messages.h"

namespace {

namespace fs = std::filesystem;
using namespace crosstune;

void Put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A frame's body (the fuzzer gets what follows the length prefix).
template <typename T>
std::string Body(Opcode op, const T& payload) {
  return EncodeFrame(op, 7, payload).substr(4);
}

}  // namespace

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
  time.repeat = 5;
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

  fs::path constraints = root / "fuzz_constraint";
  Put(constraints, "simple", "bcm2711\nsoc=bcm2711\nmemory_mb>=2048\n+neon\narch!=x86_64");
  Put(constraints, "numbers", "x\ncores>=4\ncores<=8.5\nmemory_mb>=1e3");
  return 0;
}
