#include "crosstune/tvm_params.h"

#include <set>

#include "crosstune/protocol.h"
#include "crosstune/tensor.h"

namespace crosstune::pkg {
namespace {

// Names longer than this are not a param name but a corrupt length.
constexpr uint64_t kMaxNameBytes = 4096;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Little-endian reads with bounds: every Read checks what is left first.
class Reader {
 public:
  explicit Reader(std::string_view blob) : blob_(blob) {}

  uint64_t offset() const { return at_; }
  uint64_t left() const { return blob_.size() - at_; }

  Status Read(uint64_t* v, int bytes, const std::string& what) {
    if (left() < static_cast<uint64_t>(bytes)) return Truncated(what);
    uint64_t r = 0;
    for (int i = bytes - 1; i >= 0; --i) {
      r = (r << 8) | static_cast<uint8_t>(blob_[at_ + static_cast<size_t>(i)]);
    }
    at_ += static_cast<uint64_t>(bytes);
    *v = r;
    return Status::Ok();
  }
  Status Bytes(uint64_t n, std::string_view* out, const std::string& what) {
    if (left() < n) return Truncated(what);
    *out = blob_.substr(static_cast<size_t>(at_), static_cast<size_t>(n));
    at_ += n;
    return Status::Ok();
  }
  Status Bad(const std::string& what) const {
    return Status(ErrorCode::kInvalidArgument,
                  "TVM params blob: " + what + " (at byte " + std::to_string(at_) + ")");
  }

 private:
  Status Truncated(const std::string& what) const {
    return Bad("truncated: " + what + " runs past the end (" + std::to_string(blob_.size()) +
               " bytes)");
  }

  std::string_view blob_;
  uint64_t at_ = 0;
};

}  // namespace

Status ImportTvmParams(std::string_view blob, ParamsWriter* out) {
  Reader r(blob);
  uint64_t magic = 0, reserved = 0, count = 0;
  CT_RETURN_IF_ERROR(r.Read(&magic, 8, "the magic"));
  if (magic != kTvmParamsMagic) return r.Bad("not a TVM params blob (wrong magic)");
  CT_RETURN_IF_ERROR(r.Read(&reserved, 8, "the header"));
  CT_RETURN_IF_ERROR(r.Read(&count, 8, "the name count"));
  // Each name takes at least its 8-byte length: a count past that is a corrupt blob, and nothing
  // is reserved from it.
  if (count > r.left() / 8) return r.Bad("a count of " + std::to_string(count) + " names");
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t len = 0;
    std::string_view name;
    CT_RETURN_IF_ERROR(r.Read(&len, 8, "name " + std::to_string(i)));
    if (len == 0 || len > kMaxNameBytes) {
      return r.Bad("name " + std::to_string(i) + " is " + std::to_string(len) + " bytes long");
    }
    CT_RETURN_IF_ERROR(r.Bytes(len, &name, "name " + std::to_string(i)));
    if (!seen.insert(std::string(name)).second) {
      return r.Bad("param '" + std::string(name) + "' appears twice");
    }
    names.emplace_back(name);
  }
  uint64_t tensors = 0;
  CT_RETURN_IF_ERROR(r.Read(&tensors, 8, "the tensor count"));
  if (tensors != count) {
    return r.Bad(std::to_string(count) + " names but " + std::to_string(tensors) + " tensors");
  }
  for (const std::string& name : names) {
    const std::string what = "param '" + name + "'";
    uint64_t tmagic = 0, device_type = 0, device_id = 0, ndim = 0, code = 0, bits = 0, lanes = 0;
    CT_RETURN_IF_ERROR(r.Read(&tmagic, 8, what));
    if (tmagic != kTvmTensorMagic) return r.Bad(what + " is not a tensor (wrong magic)");
    CT_RETURN_IF_ERROR(r.Read(&reserved, 8, what));
    CT_RETURN_IF_ERROR(r.Read(&device_type, 4, what));
    CT_RETURN_IF_ERROR(r.Read(&device_id, 4, what));
    if (device_type != kDLCPU) {
      return r.Bad(what + " is saved for device type " + std::to_string(device_type) +
                   ", blobs hold CPU tensors (1)");
    }
    CT_RETURN_IF_ERROR(r.Read(&ndim, 4, what));
    if (ndim > static_cast<uint64_t>(Limits::kMaxTensorRank)) {
      return r.Bad(what + " has rank " + std::to_string(static_cast<int32_t>(ndim)) +
                   ", over the limit of " + std::to_string(Limits::kMaxTensorRank));
    }
    CT_RETURN_IF_ERROR(r.Read(&code, 1, what));
    CT_RETURN_IF_ERROR(r.Read(&bits, 1, what));
    CT_RETURN_IF_ERROR(r.Read(&lanes, 2, what));
    const DLDataType dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits),
                           static_cast<uint16_t>(lanes)};
    if (lanes != 1 || bits % 8 != 0) {
      return r.Bad(what + " has dtype " + DTypeName(dtype) +
                   "; params.bin holds whole-byte scalar dtypes");
    }
    std::vector<int64_t> shape(static_cast<size_t>(ndim));
    for (int64_t& d : shape) {
      uint64_t v = 0;
      CT_RETURN_IF_ERROR(r.Read(&v, 8, what));
      d = static_cast<int64_t>(v);
    }
    auto want = TensorBytes(shape, dtype);
    if (!want.ok()) return r.Bad(what + ": " + want.status().message());
    uint64_t nbytes = 0;
    std::string_view data;
    CT_RETURN_IF_ERROR(r.Read(&nbytes, 8, what));
    if (nbytes != *want) {
      return r.Bad(what + " says " + std::to_string(static_cast<int64_t>(nbytes)) +
                   " bytes of data, its shape " + ShapeString(shape) + "x" + DTypeName(dtype) +
                   " needs " + std::to_string(*want));
    }
    CT_RETURN_IF_ERROR(r.Bytes(nbytes, &data, what + "'s data"));
    CT_RETURN_IF_ERROR(out->Add(name, dtype, shape, data.data(), nbytes));
  }
  if (r.left() != 0) return r.Bad(std::to_string(r.left()) + " bytes after the last tensor");
  return Status::Ok();
}

std::string ExportTvmParams(const ParamsFile& params) {
  std::string out;
  PutLe(&out, kTvmParamsMagic, 8);
  PutLe(&out, 0, 8);
  PutLe(&out, params.tensors().size(), 8);
  for (const ParamTensor& t : params.tensors()) {
    PutLe(&out, t.name.size(), 8);
    out += t.name;
  }
  PutLe(&out, params.tensors().size(), 8);
  for (const ParamTensor& t : params.tensors()) {
    PutLe(&out, kTvmTensorMagic, 8);
    PutLe(&out, 0, 8);
    PutLe(&out, kDLCPU, 4);
    PutLe(&out, 0, 4);
    PutLe(&out, t.shape.size(), 4);
    PutLe(&out, t.dtype.code, 1);
    PutLe(&out, t.dtype.bits, 1);
    PutLe(&out, t.dtype.lanes, 2);
    for (int64_t d : t.shape) PutLe(&out, static_cast<uint64_t>(d), 8);
    PutLe(&out, t.nbytes, 8);
    out.append(static_cast<const char*>(params.data(t)), static_cast<size_t>(t.nbytes));
  }
  return out;
}

}  // namespace crosstune::pkg
