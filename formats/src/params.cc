#include "crosstune/params.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "crosstune/json_error.h"
#include "crosstune/json_fields.h"
#include "crosstune/json_reader.h"
#include "crosstune/tensor.h"
#include "crosstune/text.h"

namespace crosstune::pkg {
namespace {

constexpr uint64_t kBuildIdOffset = 16;
constexpr uint64_t kBuildIdBytes = 64;
constexpr uint64_t kIndexSizeOffset = kBuildIdOffset + kBuildIdBytes;  // 80
constexpr uint64_t kHeaderBytes = kIndexSizeOffset + 8;                // 88
constexpr uint64_t kMaxIndexBytes = 16u << 20;

uint64_t AlignUp(uint64_t v) {
  return (v + kParamsAlignment - 1) / kParamsAlignment * kParamsAlignment;
}

void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Status Bad(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "params.bin: " + what);
}

}  // namespace

Status ParamsWriter::Add(const std::string& name, DLDataType dtype,
                         const std::vector<int64_t>& shape, const void* data, uint64_t nbytes) {
  if (name.empty()) return Status(ErrorCode::kInvalidArgument, "params: empty tensor name");
  // The index is JSON: a name it cannot hold (from TVM's blob, say) is refused here, not when
  // the file is written.
  if (!IsValidUtf8(name)) {
    return Status(ErrorCode::kInvalidArgument,
                  "params: tensor name '" + EscapeForLog(name, 64) + "' is not valid UTF-8");
  }
  for (const Entry& e : entries_) {
    if (e.meta.name == name) {
      return Status(ErrorCode::kInvalidArgument, "params: duplicate tensor '" + name + "'");
    }
  }
  // A dtype the reader knows by name only (the index stores DTypeName).
  if (auto known = ParseDType(DTypeName(dtype)); !known.ok()) {
    return Status(ErrorCode::kInvalidArgument,
                  "params: tensor '" + EscapeForLog(name, 64) + "': " + known.status().message());
  }
  CT_ASSIGN_OR_RETURN(uint64_t want, TensorBytes(shape, dtype));
  if (want != nbytes) {
    return Status(ErrorCode::kInvalidArgument, "params: tensor '" + name + "' is " +
                                                   ShapeString(shape) + "x" + DTypeName(dtype) +
                                                   " = " + std::to_string(want) + " bytes, got " +
                                                   std::to_string(nbytes));
  }
  Entry e;
  e.meta.name = name;
  e.meta.dtype = dtype;
  e.meta.shape = shape;
  e.meta.nbytes = nbytes;
  e.bytes.assign(static_cast<const char*>(data), nbytes);
  entries_.push_back(std::move(e));
  return Status::Ok();
}

std::string ParamsWriter::Serialize() const {
  // The index size depends on the offsets, which depend on the index size: lay out with a
  // generous fixed guess first, then grow until it fits.
  uint64_t data_start = AlignUp(kHeaderBytes + 256 + 160 * entries_.size());
  std::string index;
  for (;;) {
    nlohmann::json tensors = nlohmann::json::array();
    uint64_t off = data_start;
    for (const Entry& e : entries_) {
      tensors.push_back({{"name", e.meta.name},
                         {"dtype", DTypeName(e.meta.dtype)},
                         {"shape", e.meta.shape},
                         {"offset", off},
                         {"nbytes", e.meta.nbytes}});
      off = AlignUp(off + e.meta.nbytes);
    }
    index = nlohmann::json{{"tensors", tensors}}.dump();
    if (kHeaderBytes + index.size() <= data_start) break;
    data_start = AlignUp(kHeaderBytes + index.size() + 64);
  }
  std::string out;
  out.reserve(data_start);
  out.append(kParamsMagic);
  PutU32(&out, kParamsVersion);
  PutU32(&out, 0);
  std::string id = build_id_.substr(0, kBuildIdBytes);
  id.resize(kBuildIdBytes, '\0');
  out += id;
  PutU64(&out, index.size());
  out += index;
  out.resize(data_start, '\0');
  for (const Entry& e : entries_) {
    out += e.bytes;
    out.resize(AlignUp(out.size()), '\0');
  }
  return out;
}

Status ParamsWriter::Write(const std::string& path) const {
  std::string bytes = Serialize();
  // Binary mode on purpose: text-mode writes are a classic way to corrupt params files.
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return Status(ErrorCode::kIoError, path + ": write failed");
  return Status::Ok();
}

Expected<std::string> RestampParams(std::string_view params, const std::string& build_id) {
  if (params.size() < kHeaderBytes || params.substr(0, 8) != kParamsMagic) {
    return Bad("not a params file (bad magic)");
  }
  std::string out(params);
  std::string id = build_id.substr(0, kBuildIdBytes);
  id.resize(kBuildIdBytes, '\0');
  out.replace(kBuildIdOffset, kBuildIdBytes, id);
  return out;
}

Expected<std::unique_ptr<ParamsFile>> ParamsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status(ErrorCode::kIoError, path + ": " + std::strerror(errno));
  }
  std::unique_ptr<ParamsFile> p(new ParamsFile());
  p->size_ = static_cast<uint64_t>(st.st_size);
  if (p->size_ > 0) {
    void* m = ::mmap(nullptr, p->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return Status(ErrorCode::kIoError, path + ": mmap: " + std::strerror(errno));
    }
    p->map_ = m;
    p->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  CT_RETURN_IF_ERROR(p->Parse());
  return p;
}

Expected<std::unique_ptr<ParamsFile>> ParamsFile::FromBuffer(const void* data, uint64_t size) {
  std::unique_ptr<ParamsFile> p(new ParamsFile());
  p->base_ = static_cast<const uint8_t*>(data);
  p->size_ = size;
  CT_RETURN_IF_ERROR(p->Parse());
  return p;
}

ParamsFile::~ParamsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

const ParamTensor* ParamsFile::Find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status ParamsFile::Parse() {
  if (size_ < kHeaderBytes) {
    return Bad("truncated (" + std::to_string(size_) + " bytes, the header alone is " +
               std::to_string(kHeaderBytes) + ")");
  }
  if (std::memcmp(base_, kParamsMagic.data(), 8) != 0) return Bad("not a params file (bad magic)");
  uint32_t version = GetU32(base_ + 8);
  if (version != kParamsVersion) {
    return Status(ErrorCode::kVersionMismatch,
                  "params.bin: format version " + std::to_string(version) + ", this reader knows " +
                      std::to_string(kParamsVersion));
  }
  const char* id = reinterpret_cast<const char*>(base_ + kBuildIdOffset);
  build_id_.assign(id, strnlen(id, kBuildIdBytes));
  uint64_t index_bytes = GetU64(base_ + kIndexSizeOffset);
  if (index_bytes > kMaxIndexBytes)
    return Bad("index of " + std::to_string(index_bytes) + " bytes");
  if (kHeaderBytes + index_bytes > size_) return Bad("truncated (index runs past the end)");
  auto parsed =
      ParseJson(std::string_view(reinterpret_cast<const char*>(base_ + kHeaderBytes), index_bytes),
                {.max_bytes = kMaxIndexBytes});
  if (!parsed.ok()) return Bad("index: " + parsed.status().message());
  const nlohmann::json& index = *parsed;
  uint64_t data_start = kHeaderBytes + index_bytes;
  std::set<std::string> names;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  try {
    for (const auto& j : index.at("tensors")) {
      ParamTensor t;
      t.name = j.at("name").get<std::string>();
      CT_ASSIGN_OR_RETURN(t.dtype, ParseDType(j.at("dtype").get<std::string>()));
      t.shape = JsonIntegers<int64_t>(j.at("shape"), "shape");
      t.offset = JsonInteger<uint64_t>(j.at("offset"), "offset");
      t.nbytes = JsonInteger<uint64_t>(j.at("nbytes"), "nbytes");
      if (!names.insert(t.name).second) return Bad("duplicate tensor '" + t.name + "'");
      auto want = TensorBytes(t.shape, t.dtype);
      if (!want.ok()) return Bad("tensor '" + t.name + "': " + want.status().message());
      if (*want != t.nbytes) {
        return Bad("tensor '" + t.name + "' says " + std::to_string(t.nbytes) +
                   " bytes, its shape " + ShapeString(t.shape) + "x" + DTypeName(t.dtype) +
                   " needs " + std::to_string(*want));
      }
      if (t.offset % kParamsAlignment != 0) {
        return Bad("tensor '" + t.name + "' at offset " + std::to_string(t.offset) +
                   " is not 64-byte aligned");
      }
      if (t.offset < data_start) return Bad("tensor '" + t.name + "' overlaps the index");
      if (t.offset > size_ || t.nbytes > size_ - t.offset) {
        return Bad("truncated (tensor '" + t.name + "' needs bytes up to " +
                   std::to_string(t.offset + t.nbytes) + ", file has " + std::to_string(size_) +
                   ")");
      }
      ranges.emplace_back(t.offset, t.offset + t.nbytes);
      tensors_.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    return Bad("malformed index: " + JsonErrorReason(e));
  } catch (const std::exception& e) {  // JsonInteger's range errors
    return Bad(std::string("malformed index: ") + e.what());
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Bad("tensors overlap");
  }
  return Status::Ok();
}

}  // namespace crosstune::pkg
