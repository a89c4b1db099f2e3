// The deployable package (.ctpkg) and its checks, shared by the builder (which writes packages) and
// crosstune-server (which verifies them before it loads anything). No LLVM here: the server
// cross-compiles for small boards with few dependencies.
//
// A package is a POSIX ustar archive of regular files only:
//   manifest.json   format version, target, triple, cpu, required cpu features, ABI version,
//                   builder and compiler versions, functions, SHA-256 of every other file
//   lib/<name>.so   a CPU module (kernel_abi.h), or lib/<name>.cubin (+ lib/<name>.ptx) for CUDA
//   graph.json      optional; carries "build_id" of the library it belongs to
//   params.bin      optional; named tensors (params.h), its header carries the same build_id
// build_id is the SHA-256 of the library file, so graph/params from another build are refused.
//
// Thread-safety: free functions with no shared state; safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/messages_fwd.h"
#include "crosstune/status.h"

namespace crosstune::pkg {

// Bumped only for incompatible changes; readers refuse other versions with kVersionMismatch.
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr std::string_view kManifestPath = "manifest.json";
inline constexpr std::string_view kGraphPath = "graph.json";
inline constexpr std::string_view kParamsPath = "params.bin";
// Archive limits, checked before allocation: the manifest is small, members are few.
inline constexpr uint64_t kMaxManifestBytes = 4u << 20;
inline constexpr size_t kMaxMembers = 64;

// One kernel a module offers. For CUDA kernels the launch geometry is part of the contract: each of
// grid[3]/block[3] is a decimal number ("256") or "aK/N", which means ceil(int argument K / N)
// ("a3/256": the 4th argument, an int64 element count, over 256 threads). "aK" alone is the
// argument itself. CUDA arguments: 't' passes the tensor's device pointer, 'i' an int64 (declare
// `long long`), 'f' a double.
struct Function {
  std::string name;
  std::string signature;           // kernel_abi.h characters: t i f
  std::string symbol;              // CUDA: the lowered (mangled) name in the cubin; empty for CPU
  std::vector<std::string> grid;   // CUDA only, 3 entries
  std::vector<std::string> block;  // CUDA only, 3 entries
  uint32_t shared_mem_bytes = 0;   // CUDA dynamic shared memory
};

struct FileHash {
  std::string path;
  uint64_t size = 0;
  std::string sha256;
};

struct Manifest {
  uint32_t format_version = kFormatVersion;
  std::string kind;    // "cpu" or "cuda"
  std::string target;  // canonical target string, "llvm -mtriple=... -mcpu=..."
  std::string triple;  // CPU: aarch64-linux-gnu; CUDA: nvptx64-nvidia-cuda
  std::string arch;    // CPU: x86_64, aarch64, armv7, riscv64; CUDA: sm_90
  std::string cpu;     // CPU name given to LLVM ("cortex-a72", "generic")
  std::vector<std::string> required_features;  // ISA features the code may use (LLVM names)
  uint32_t abi_version = 0;                    // kernel_abi.h CT_ABI_VERSION
  std::string builder_version;                 // crosstune release
  std::string compiler;                        // "clang+lld" / "nvrtc"
  std::string compiler_version;                // "14.0.6" / "13.0"
  std::string library;                         // path of the library in the archive
  std::string ptx;       // CUDA: optional PTX beside the cubin, for newer GPUs
  std::string build_id;  // SHA-256 of the library
  std::vector<Function> functions;
  std::vector<FileHash> files;  // every member except manifest.json
  // Where a tuned package came from, as a JSON object text ({"task": ..., "config": ...,
  // "record": ...}); empty for packages that were not tuned. Informational: nothing checks it.
  std::string tuning;
};

std::string ManifestToJson(const Manifest& m, int indent = 2);
// kInvalidArgument for malformed JSON or fields; kVersionMismatch for another format version.
Expected<Manifest> ManifestFromJson(std::string_view text);

// --- The archive --------------------------------------------------------------------------------

struct TarMember {
  std::string path;
  uint64_t offset = 0;  // of the data in the archive file
  uint64_t size = 0;
};

// Input for WritePackage: a member's bytes, from memory or from a file.
struct PackageInput {
  std::string path;  // name in the archive ("lib/kernel.so")
  std::string data;  // used when source_file is empty
  std::string source_file;
};

// Writes `files` plus manifest.json, filling manifest.files (sizes and SHA-256) and, when the
// library is among the files, manifest.build_id. Writes to a temporary file then renames, so a
// reader never sees half a package. Returns the manifest as written.
Expected<Manifest> WritePackage(const std::string& out_path, Manifest manifest,
                                const std::vector<PackageInput>& files);
// Low level, for tests that build malformed packages: writes exactly these members, in order.
Status WriteTar(const std::string& out_path, const std::vector<PackageInput>& members);
// Lists the members of a ustar archive: only regular files with relative, `..`-free names, no
// duplicates. A member or end marker running past the end of the file is "truncated archive"
// (kInvalidArgument); a bad header checksum is "corrupt archive".
Expected<std::vector<TarMember>> ListTar(const std::string& path);

// --- Verification -------------------------------------------------------------------------------

struct Package {
  std::string path;
  Manifest manifest;
  std::vector<TarMember> members;
};

// Reads and checks everything that does not depend on the device: archive structure, manifest,
// format and ABI version (kVersionMismatch), that every member is listed with the right size and
// SHA-256 and every listed file is present (kBadHash naming the file), and that graph.json and
// params.bin carry the library's build_id (kBadHash naming them).
Expected<Package> OpenPackage(const std::string& path);

// Can this device run the package? kWrongArch "built for aarch64, device is x86_64", kWrongArch
// naming a required cpu feature the device lacks, kNoDevice for a CUDA package on a device without
// a GPU, kWrongArch for a GPU too old for the cubin and no PTX. A device that reports no cpu
// features at all (it could not tell) is not refused for features.
Status CheckDevice(const Manifest& manifest, const msg::DeviceInfo& device);

// OpenPackage + CheckDevice.
Expected<Manifest> VerifyPackage(const std::string& path, const msg::DeviceInfo& device);

// Verifies the package for `device`, then writes its members under `dest_dir` (created; must be
// a directory the caller confines, e.g. inside a session workspace), re-hashing every byte as it
// is written so the files on disk are the ones verified. Returns the manifest; the library is at
// dest_dir + "/" + manifest.library.
Expected<Manifest> ExtractPackage(const std::string& path, const std::string& dest_dir,
                                  const msg::DeviceInfo& device);

// "x86_64", "aarch64", "arm", "riscv64" from a triple's arch or a uname machine, so that
// "armv7l" (uname) and "armv7" (triple) compare equal.
std::string NormalizeArch(std::string_view arch_or_triple);

}  // namespace crosstune::pkg
