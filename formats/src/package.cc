#include "crosstune/package.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "crosstune/crypto.h"
#include "crosstune/graph.h"
#include "crosstune/json_error.h"
#include "crosstune/json_fields.h"
#include "crosstune/json_reader.h"
#include "crosstune/kernel_abi.h"
#include "crosstune/params.h"

namespace crosstune::pkg {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// --- ustar --------------------------------------------------------------------------------------
// Written here rather than with libarchive: crosstune-server must read packages on the ARM boards,
// whose cross builds carry only libcrypto; the subset needed (regular files, short names) is small.

constexpr size_t kBlock = 512;

struct UstarHeader {
  char name[100];
  char mode[8];
  char uid[8];
  char gid[8];
  char size[12];
  char mtime[12];
  char chksum[8];
  char typeflag;
  char linkname[100];
  char magic[6];
  char version[2];
  char uname[32];
  char gname[32];
  char devmajor[8];
  char devminor[8];
  char prefix[155];
  char pad[12];
};
static_assert(sizeof(UstarHeader) == kBlock);

void Octal(char* field, size_t width, uint64_t value) {
  std::string s(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value != 0; value >>= 3)
    s[i] = static_cast<char>('0' + (value & 7));
  std::memcpy(field, s.data(), width - 1);
  field[width - 1] = '\0';
}

bool ParseOctal(const char* field, size_t width, uint64_t* out) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = (v << 3) | static_cast<uint64_t>(field[i] - '0');
    any = true;
  }
  for (; i < width; ++i) {
    if (field[i] != '\0' && field[i] != ' ') return false;
  }
  *out = v;
  return any;
}

uint64_t HeaderChecksum(const UstarHeader& h) {
  const auto* p = reinterpret_cast<const unsigned char*>(&h);
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    bool in_chksum = i >= offsetof(UstarHeader, chksum) && i < offsetof(UstarHeader, chksum) + 8;
    sum += in_chksum ? ' ' : p[i];
  }
  return sum;
}

Status CheckMemberName(const std::string& name) {
  if (name.empty() || name.size() >= 100) {
    return Status(ErrorCode::kInvalidArgument,
                  "archive member name '" + name + "' is empty or too long");
  }
  if (name[0] == '/' || name.find('\\') != std::string::npos) {
    return Status(ErrorCode::kInvalidArgument,
                  "archive member '" + name + "' is not a relative path");
  }
  for (const auto& part : fs::path(name)) {
    if (part == ".." || part == ".") {
      return Status(ErrorCode::kInvalidArgument,
                    "archive member '" + name + "' leaves its directory");
    }
  }
  return Status::Ok();
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status PreadAll(int fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status(ErrorCode::kIoError, std::string("read: ") + std::strerror(errno));
    if (r == 0) return Status(ErrorCode::kInvalidArgument, "truncated archive");
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

// Streams one member through `fn(data, size)` in 1 MiB pieces.
template <typename Fn>
Status ForEachChunk(int fd, const TarMember& m, Fn&& fn) {
  std::vector<char> buf(std::min<uint64_t>(m.size, 1u << 20));
  uint64_t done = 0;
  while (done < m.size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), m.size - done));
    CT_RETURN_IF_ERROR(PreadAll(fd, buf.data(), n, m.offset + done));
    CT_RETURN_IF_ERROR(fn(buf.data(), n));
    done += n;
  }
  return Status::Ok();
}

Expected<std::string> ReadMember(int fd, const TarMember& m, uint64_t limit) {
  if (m.size > limit) {
    return Status(ErrorCode::kLimitExceeded, m.path + " is " + std::to_string(m.size) +
                                                 " bytes, limit " + std::to_string(limit));
  }
  std::string s(m.size, '\0');
  CT_RETURN_IF_ERROR(PreadAll(fd, s.data(), s.size(), m.offset));
  return s;
}

Expected<std::string> ReadInput(const PackageInput& in) {
  if (in.source_file.empty()) return in.data;
  std::ifstream f(in.source_file, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, in.source_file + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// --- manifest JSON ------------------------------------------------------------------------------

json FunctionToJson(const Function& f) {
  json j = {{"name", f.name}, {"signature", f.signature}};
  if (!f.symbol.empty()) j["symbol"] = f.symbol;
  if (!f.grid.empty()) j["grid"] = f.grid;
  if (!f.block.empty()) j["block"] = f.block;
  if (f.shared_mem_bytes != 0) j["shared_mem_bytes"] = f.shared_mem_bytes;
  return j;
}

std::string DescribeDevice(const msg::DeviceInfo& d) {
  std::string s = d.arch;
  if (!d.cpu_model.empty()) s += ", " + d.cpu_model;
  return s;
}

// CUDA compute capability "sm_86" -> 86; -1 when not of that form.
int SmNumber(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) return -1;
  try {
    return std::stoi(arch.substr(3));
  } catch (...) {
    return -1;
  }
}

}  // namespace

std::string NormalizeArch(std::string_view a) {
  std::string s(a.substr(0, a.find('-')));
  if (s == "amd64" || s == "x86-64") return "x86_64";
  if (s == "arm64" || s == "aarch64") return "aarch64";
  if (s.rfind("arm", 0) == 0 || s.rfind("thumb", 0) == 0) return "arm";
  if (s == "riscv64" || s.rfind("rv64", 0) == 0) return "riscv64";
  return s;
}

std::string ManifestToJson(const Manifest& m, int indent) {
  json files = json::array();
  for (const FileHash& f : m.files) {
    files.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  }
  json fns = json::array();
  for (const Function& f : m.functions) fns.push_back(FunctionToJson(f));
  json j = {{"format_version", m.format_version},
            {"kind", m.kind},
            {"target", m.target},
            {"triple", m.triple},
            {"arch", m.arch},
            {"cpu", m.cpu},
            {"required_features", m.required_features},
            {"abi_version", m.abi_version},
            {"builder_version", m.builder_version},
            {"compiler", m.compiler},
            {"compiler_version", m.compiler_version},
            {"library", m.library},
            {"build_id", m.build_id},
            {"functions", fns},
            {"files", files}};
  if (!m.ptx.empty()) j["ptx"] = m.ptx;
  if (!m.tuning.empty()) {
    // The manifest's own text, read back: bounded like the manifest it came from.
    auto t = ParseJson(m.tuning, {.max_bytes = kMaxManifestBytes});
    j["tuning"] = t.ok() ? std::move(t).value() : json(m.tuning);
  }
  return j.dump(indent);
}

Expected<Manifest> ManifestFromJson(std::string_view text) {
  auto parsed = ParseJson(text, {.max_bytes = kMaxManifestBytes});
  if (!parsed.ok()) {
    return Status(ErrorCode::kInvalidArgument, "manifest.json: " + parsed.status().message());
  }
  const json& j = *parsed;
  Manifest m;
  try {
    if (!j.is_object()) throw std::runtime_error("not an object");
    m.format_version = JsonInteger<uint32_t>(j.at("format_version"), "format_version");
    if (m.format_version != kFormatVersion) {
      return Status(ErrorCode::kVersionMismatch, "package format version " +
                                                     std::to_string(m.format_version) +
                                                     " is unknown (this crosstune reads version " +
                                                     std::to_string(kFormatVersion) + ")");
    }
    m.kind = j.at("kind").get<std::string>();
    m.target = j.at("target").get<std::string>();
    m.triple = j.at("triple").get<std::string>();
    m.arch = j.at("arch").get<std::string>();
    m.cpu = j.value("cpu", "");
    m.required_features = j.value("required_features", std::vector<std::string>{});
    m.abi_version = JsonInteger<uint32_t>(j.at("abi_version"), "abi_version");
    m.builder_version = j.value("builder_version", "");
    m.compiler = j.value("compiler", "");
    m.compiler_version = j.value("compiler_version", "");
    m.library = j.at("library").get<std::string>();
    m.ptx = j.value("ptx", "");
    m.build_id = j.value("build_id", "");
    if (auto t = j.find("tuning"); t != j.end())
      m.tuning = t->is_string() ? t->get<std::string>() : t->dump();
    for (const auto& f : j.at("functions")) {
      Function fn;
      fn.name = f.at("name").get<std::string>();
      fn.signature = f.at("signature").get<std::string>();
      fn.symbol = f.value("symbol", "");
      fn.grid = f.value("grid", std::vector<std::string>{});
      fn.block = f.value("block", std::vector<std::string>{});
      if (auto sm = f.find("shared_mem_bytes"); sm != f.end()) {
        fn.shared_mem_bytes = JsonInteger<uint32_t>(*sm, "shared_mem_bytes");
      }
      m.functions.push_back(std::move(fn));
    }
    for (const auto& f : j.at("files")) {
      m.files.push_back({f.at("path").get<std::string>(),
                         JsonInteger<uint64_t>(f.at("size"), "size"),
                         f.at("sha256").get<std::string>()});
    }
  } catch (const json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, "manifest.json: " + JsonErrorReason(e));
  } catch (const std::exception& e) {  // JsonInteger's range errors
    return Status(ErrorCode::kInvalidArgument, std::string("manifest.json: ") + e.what());
  }
  if (m.kind != "cpu" && m.kind != "cuda") {
    return Status(ErrorCode::kVersionMismatch,
                  "manifest.json: unknown package kind '" + m.kind + "'");
  }
  return m;
}

Status WriteTar(const std::string& out_path, const std::vector<PackageInput>& members) {
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) return Status(ErrorCode::kIoError, out_path + ": cannot create");
  for (const PackageInput& in : members) {
    CT_RETURN_IF_ERROR(CheckMemberName(in.path));
    CT_ASSIGN_OR_RETURN(std::string data, ReadInput(in));
    UstarHeader h{};
    std::memcpy(h.name, in.path.data(), in.path.size());
    Octal(h.mode, sizeof(h.mode), 0644);
    Octal(h.uid, sizeof(h.uid), 0);
    Octal(h.gid, sizeof(h.gid), 0);
    Octal(h.size, sizeof(h.size), data.size());
    Octal(h.mtime, sizeof(h.mtime), 0);  // reproducible packages
    h.typeflag = '0';
    std::memcpy(h.magic, "ustar", 6);
    std::memcpy(h.version, "00", 2);
    Octal(h.chksum, 7, HeaderChecksum(h));
    h.chksum[7] = ' ';
    out.write(reinterpret_cast<const char*>(&h), kBlock);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    static const char kZeros[kBlock] = {};
    out.write(kZeros, static_cast<std::streamsize>((kBlock - data.size() % kBlock) % kBlock));
  }
  static const char kEnd[2 * kBlock] = {};
  out.write(kEnd, sizeof(kEnd));
  out.close();
  if (!out) return Status(ErrorCode::kIoError, out_path + ": write failed");
  return Status::Ok();
}

Expected<std::vector<TarMember>> ListTar(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kInvalidArgument, path + ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::vector<TarMember> members;
  std::set<std::string> seen;
  uint64_t off = 0;
  for (;;) {
    if (off + kBlock > file_size) {
      return Status(ErrorCode::kInvalidArgument, "truncated archive (ends at byte " +
                                                     std::to_string(file_size) +
                                                     " without the end-of-archive marker)");
    }
    UstarHeader h;
    CT_RETURN_IF_ERROR(PreadAll(fd.get(), &h, kBlock, off));
    static const char kZeros[kBlock] = {};
    if (std::memcmp(&h, kZeros, kBlock) == 0) {
      // The end marker is two zero blocks; one alone means the archive was cut.
      char second[kBlock];
      if (off + 2 * kBlock > file_size || !PreadAll(fd.get(), second, kBlock, off + kBlock).ok() ||
          std::memcmp(second, kZeros, kBlock) != 0) {
        return Status(ErrorCode::kInvalidArgument,
                      "truncated archive (the end-of-archive marker is cut short)");
      }
      break;
    }
    uint64_t sum = 0;
    if (!ParseOctal(h.chksum, sizeof(h.chksum), &sum) || sum != HeaderChecksum(h)) {
      return Status(ErrorCode::kInvalidArgument,
                    "corrupt archive (bad header checksum at byte " + std::to_string(off) + ")");
    }
    if (std::memcmp(h.magic, "ustar", 5) != 0) {
      return Status(ErrorCode::kInvalidArgument, "not a ustar archive");
    }
    std::string name(h.name, strnlen(h.name, sizeof(h.name)));
    std::string prefix(h.prefix, strnlen(h.prefix, sizeof(h.prefix)));
    if (!prefix.empty()) name = prefix + "/" + name;
    if (h.typeflag != '0' && h.typeflag != '\0') {
      return Status(ErrorCode::kInvalidArgument,
                    "archive member '" + name +
                        "' is not a regular file (links and directories are refused)");
    }
    CT_RETURN_IF_ERROR(CheckMemberName(name));
    uint64_t size = 0;
    if (!ParseOctal(h.size, sizeof(h.size), &size)) {
      return Status(ErrorCode::kInvalidArgument, "corrupt archive (bad size of '" + name + "')");
    }
    uint64_t data_off = off + kBlock;
    if (size > file_size || data_off > file_size - size) {
      return Status(ErrorCode::kInvalidArgument, "truncated archive ('" + name + "' needs " +
                                                     std::to_string(size) + " bytes at offset " +
                                                     std::to_string(data_off) + ", the file has " +
                                                     std::to_string(file_size) + ")");
    }
    if (!seen.insert(name).second) {
      return Status(ErrorCode::kInvalidArgument, "archive member '" + name + "' appears twice");
    }
    if (members.size() >= kMaxMembers) {
      return Status(ErrorCode::kLimitExceeded,
                    "archive has more than " + std::to_string(kMaxMembers) + " members");
    }
    members.push_back({name, data_off, size});
    off = data_off + (size + kBlock - 1) / kBlock * kBlock;
  }
  return members;
}

Expected<Manifest> WritePackage(const std::string& out_path, Manifest manifest,
                                const std::vector<PackageInput>& files) {
  std::vector<PackageInput> members;
  manifest.files.clear();
  // The library first: its hash is the build id the graph and params are stamped with.
  for (const PackageInput& in : files) {
    if (in.path == manifest.library) {
      CT_ASSIGN_OR_RETURN(std::string data, ReadInput(in));
      manifest.build_id = Sha256Hex(data);
    }
  }
  for (const PackageInput& in : files) {
    CT_ASSIGN_OR_RETURN(std::string data, ReadInput(in));
    if (in.path == kParamsPath) {
      CT_ASSIGN_OR_RETURN(data, RestampParams(data, manifest.build_id));
    } else if (in.path == kGraphPath) {
      auto g = ParseJson(data, {.max_bytes = graph::kMaxGraphBytes});  // the limits first
      if (!g.ok()) {
        return Status(ErrorCode::kInvalidArgument, "graph.json: " + g.status().message());
      }
      if (!g->is_object()) {
        return Status(ErrorCode::kInvalidArgument, "graph.json: not a JSON object");
      }
      // The build id goes under "metadata", which stays the last key (graph.h: TVM's loader
      // stops reading there); a version 1 file's top-level one is dropped. The keys keep their
      // order.
      auto doc = nlohmann::ordered_json::parse(data);
      doc.erase("build_id");
      nlohmann::ordered_json meta = nlohmann::ordered_json::object();
      if (auto it = doc.find("metadata"); it != doc.end() && it->is_object()) meta = *it;
      doc.erase("metadata");
      meta["build_id"] = manifest.build_id;
      doc["metadata"] = std::move(meta);
      data = doc.dump(2);
    }
    manifest.files.push_back({in.path, data.size(), Sha256Hex(data)});
    members.push_back({in.path, std::move(data), ""});
  }
  members.insert(members.begin(),
                 PackageInput{std::string(kManifestPath), ManifestToJson(manifest), ""});
  std::string tmp = out_path + ".tmp" + std::to_string(::getpid());
  Status st = WriteTar(tmp, members);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), out_path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status(ErrorCode::kIoError, out_path + ": " + std::strerror(errno));
  }
  return manifest;
}

namespace {

// The whole params.bin checked where it lies in the archive (mapped, not read), so that a package
// whose hashes match but whose tensor index is broken is invalid here, as the server's loader
// finds it. Where the member cannot be mapped (a 32-bit board and a huge file), the check is left
// to the loader, which validates the extracted file anyway.
Status CheckParamsInPlace(int fd, const TarMember& member) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = member.offset / page * page;
  const uint64_t span = member.offset - start + member.size;
  if (member.size == 0 || span > std::numeric_limits<size_t>::max() ||
      start > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return Status::Ok();
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(span), PROT_READ, MAP_PRIVATE, fd,
                     static_cast<off_t>(start));
  if (map == MAP_FAILED) return Status::Ok();
  const auto* data = static_cast<const uint8_t*>(map) + (member.offset - start);
  auto params = ParamsFile::FromBuffer(data, member.size);
  ::munmap(map, static_cast<size_t>(span));
  return params.ok() ? Status::Ok() : params.status();
}

}  // namespace

Expected<Package> OpenPackage(const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::vector<TarMember> members, ListTar(path));
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  std::map<std::string, const TarMember*> by_name;
  for (const TarMember& m : members) by_name[m.path] = &m;
  auto mit = by_name.find(std::string(kManifestPath));
  if (mit == by_name.end()) {
    return Status(ErrorCode::kInvalidArgument, "not a crosstune package (no manifest.json)");
  }
  CT_ASSIGN_OR_RETURN(std::string text, ReadMember(fd.get(), *mit->second, kMaxManifestBytes));
  CT_ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(text));
  if (m.abi_version != CT_ABI_VERSION) {
    return Status(ErrorCode::kVersionMismatch, "kernel ABI version " +
                                                   std::to_string(m.abi_version) +
                                                   " is unknown (this crosstune runs ABI " +
                                                   std::to_string(CT_ABI_VERSION) + ")");
  }
  // Every member listed, every listed file present, sizes and hashes right.
  std::map<std::string, const FileHash*> listed;
  for (const FileHash& f : m.files) listed[f.path] = &f;
  for (const TarMember& mem : members) {
    if (mem.path == kManifestPath) continue;
    if (listed.find(mem.path) == listed.end()) {
      return Status(ErrorCode::kBadHash, mem.path + ": not listed in the manifest");
    }
  }
  for (const FileHash& f : m.files) {
    auto it = by_name.find(f.path);
    if (it == by_name.end()) {
      return Status(ErrorCode::kBadHash, f.path + ": listed in the manifest but missing");
    }
    if (it->second->size != f.size) {
      return Status(ErrorCode::kBadHash, f.path + ": " + std::to_string(it->second->size) +
                                             " bytes, the manifest says " + std::to_string(f.size));
    }
    Sha256 h;
    CT_RETURN_IF_ERROR(ForEachChunk(fd.get(), *it->second, [&](const char* p, size_t n) {
      h.Update(p, n);
      return Status::Ok();
    }));
    std::string got = h.FinalHex();
    if (got != f.sha256) {
      return Status(ErrorCode::kBadHash, f.path + ": SHA-256 mismatch (manifest " +
                                             f.sha256.substr(0, 12) + "…, file " +
                                             got.substr(0, 12) + "…)");
    }
  }
  auto lib = listed.find(m.library);
  if (lib == listed.end()) {
    return Status(ErrorCode::kInvalidArgument,
                  "manifest names library '" + m.library + "', not in the package");
  }
  if (m.build_id != lib->second->sha256) {
    return Status(ErrorCode::kBadHash, "manifest build_id does not match " + m.library);
  }
  // graph.json and params.bin must come from the build that made this library.
  if (auto g = by_name.find(std::string(kGraphPath)); g != by_name.end()) {
    CT_ASSIGN_OR_RETURN(std::string gtext, ReadMember(fd.get(), *g->second, graph::kMaxGraphBytes));
    auto doc = ParseJson(gtext, {.max_bytes = graph::kMaxGraphBytes});
    if (!doc.ok()) {
      return Status(ErrorCode::kInvalidArgument, "graph.json: " + doc.status().message());
    }
    // build_id under "metadata" (graph.h's version 2), or at the top level (version 1).
    const json* b = nullptr;
    if (doc->is_object()) {
      auto meta = doc->find("metadata");
      if (meta != doc->end() && meta->is_object() && meta->contains("build_id")) {
        b = &meta->at("build_id");
      } else if (doc->contains("build_id")) {
        b = &doc->at("build_id");
      }
    }
    std::string id;
    if (b != nullptr) {
      if (!b->is_string()) {
        return Status(ErrorCode::kInvalidArgument,
                      "graph.json: build_id is not a string: " + JsonExcerpt(*b));
      }
      id = b->get<std::string>();
    }
    if (id != m.build_id) {
      return Status(ErrorCode::kBadHash,
                    "graph.json belongs to build " +
                        (id.empty() ? std::string("(none)") : id.substr(0, 12)) +
                        ", not to this library (" + m.build_id.substr(0, 12) + ")");
    }
  }
  if (auto p = by_name.find(std::string(kParamsPath)); p != by_name.end()) {
    // Header only here; the full validation runs on the extracted, mmap-able file.
    std::string head(std::min<uint64_t>(p->second->size, 88), '\0');
    CT_RETURN_IF_ERROR(PreadAll(fd.get(), head.data(), head.size(), p->second->offset));
    if (head.size() < 88 || head.compare(0, 8, kParamsMagic) != 0) {
      return Status(ErrorCode::kInvalidArgument,
                    "params.bin: not a params file (bad magic or truncated)");
    }
    std::string id(head.data() + 16, strnlen(head.data() + 16, 64));
    if (id != m.build_id) {
      return Status(ErrorCode::kBadHash,
                    "params.bin belongs to build " +
                        (id.empty() ? std::string("(none)") : id.substr(0, 12)) +
                        ", not to this library (" + m.build_id.substr(0, 12) + ")");
    }
    CT_RETURN_IF_ERROR(CheckParamsInPlace(fd.get(), *p->second));
  }
  return Package{path, std::move(m), std::move(members)};
}

Status CheckDevice(const Manifest& m, const msg::DeviceInfo& device) {
  if (m.kind == "cuda") {
    if (device.gpus.empty()) {
      std::string why = device.gpu_status.empty() ? "no GPU" : device.gpu_status;
      return Status(ErrorCode::kNoDevice,
                    "package is for CUDA " + m.arch + ", device has no usable GPU (" + why + ")");
    }
    int want = SmNumber(m.arch);
    std::string seen;
    for (const msg::GpuInfo& g : device.gpus) {
      int have = SmNumber(g.arch);
      // A cubin runs on its own major at the same or a later minor; PTX is JIT-compiled by newer
      // drivers for any later GPU.
      if (have >= 0 && want >= 0 &&
          ((have / 10 == want / 10 && have >= want) || (!m.ptx.empty() && have >= want))) {
        return Status::Ok();
      }
      seen += (seen.empty() ? "" : ", ") + g.arch;
    }
    return Status(ErrorCode::kWrongArch, "built for " + m.arch + (m.ptx.empty() ? "" : " (+PTX)") +
                                             ", device GPU is " + seen);
  }
  std::string want = NormalizeArch(m.arch.empty() ? m.triple : m.arch);
  std::string have = NormalizeArch(device.arch.empty() ? device.triple : device.arch);
  if (want != have) {
    return Status(ErrorCode::kWrongArch, "built for " + m.arch + ", device is " + device.arch);
  }
  if (!device.cpu_features.empty()) {
    std::set<std::string> has(device.cpu_features.begin(), device.cpu_features.end());
    for (const std::string& f : m.required_features) {
      if (has.count(f) == 0) {
        return Status(ErrorCode::kWrongArch, "built for cpu feature " + f + " (-mcpu=" + m.cpu +
                                                 "), which the device (" + DescribeDevice(device) +
                                                 ") lacks");
      }
    }
  }
  return Status::Ok();
}

Expected<Manifest> VerifyPackage(const std::string& path, const msg::DeviceInfo& device) {
  CT_ASSIGN_OR_RETURN(Package p, OpenPackage(path));
  CT_RETURN_IF_ERROR(CheckDevice(p.manifest, device));
  return std::move(p.manifest);
}

Expected<Manifest> ExtractPackage(const std::string& path, const std::string& dest_dir,
                                  const msg::DeviceInfo& device) {
  CT_ASSIGN_OR_RETURN(Package p, OpenPackage(path));
  CT_RETURN_IF_ERROR(CheckDevice(p.manifest, device));
  std::error_code ec;
  fs::create_directories(dest_dir, ec);
  if (ec) return Status(ErrorCode::kIoError, dest_dir + ": " + ec.message());
  Fd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  std::map<std::string, std::string> want;
  for (const FileHash& f : p.manifest.files) want[f.path] = f.sha256;
  for (const TarMember& m : p.members) {
    std::string out_path = dest_dir + "/" + m.path;
    fs::create_directories(fs::path(out_path).parent_path(), ec);
    if (ec) return Status(ErrorCode::kIoError, out_path + ": " + ec.message());
    // O_NOFOLLOW | O_EXCL: never write through a link planted in the destination.
    ::unlink(out_path.c_str());
    Fd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (out.get() < 0) return Status(ErrorCode::kIoError, out_path + ": " + std::strerror(errno));
    Sha256 h;
    CT_RETURN_IF_ERROR(ForEachChunk(in.get(), m, [&](const char* data, size_t n) {
      h.Update(data, n);
      while (n > 0) {
        ssize_t w = ::write(out.get(), data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Status(ErrorCode::kIoError, out_path + ": " + std::strerror(errno));
        data += w;
        n -= static_cast<size_t>(w);
      }
      return Status::Ok();
    }));
    auto it = want.find(m.path);
    if (it != want.end() && h.FinalHex() != it->second) {
      return Status(ErrorCode::kBadHash, m.path + ": changed while it was extracted");
    }
  }
  if (auto it = want.find(std::string(kParamsPath)); it != want.end()) {
    auto params = ParamsFile::Open(dest_dir + "/" + std::string(kParamsPath));
    if (!params.ok()) return params.status();
  }
  return std::move(p.manifest);
}

}  // namespace crosstune::pkg
