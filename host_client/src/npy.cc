#include "crosstune/client/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>

#include "crosstune/tensor.h"

namespace crosstune::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

Status Bad(const std::string& what, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument, what + ": " + why);
}

// A minimal reader for the one Python literal numpy writes in the header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool Word(std::string* out) {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    *out = std::string(s_.substr(start, pos_ - start));
    return !out->empty();
  }
  bool Int(int64_t* out) {
    SkipSpace();
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (s_[pos_++] - '0');
    }
    // numpy on some platforms writes "3L".
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    *out = v;
    return pos_ > start;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

Expected<Header> ParseHeader(std::string_view text, const std::string& what) {
  HeaderParser p(text);
  Header h;
  bool have_descr = false, have_order = false, have_shape = false;
  auto bad = [&](const std::string& why) { return Bad(what, "bad .npy header (" + why + ")"); };
  if (!p.Eat('{')) return bad("not a dict");
  while (!p.Eat('}')) {
    std::string key;
    if (!p.String(&key)) return bad("expected a key");
    if (!p.Eat(':')) return bad("expected ':' after '" + key + "'");
    if (key == "descr") {
      if (!p.String(&h.descr))
        return bad("descr is not a string (structured dtypes are not supported)");
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string w;
      if (!p.Word(&w) || (w != "True" && w != "False"))
        return bad("fortran_order is not True/False");
      h.fortran_order = w == "True";
      have_order = true;
    } else if (key == "shape") {
      if (!p.Eat('(')) return bad("shape is not a tuple");
      while (!p.Eat(')')) {
        int64_t d;
        if (!p.Int(&d)) return bad("shape holds a non-integer");
        h.shape.push_back(d);
        if (!p.Eat(',') && !p.Peek(')')) return bad("expected ',' or ')' in shape");
      }
      have_shape = true;
    } else {
      return bad("unknown key '" + key + "'");
    }
    if (!p.Eat(',') && !p.Peek('}')) return bad("expected ',' or '}'");
  }
  if (!have_descr || !have_order || !have_shape) {
    return bad("needs descr, fortran_order and shape");
  }
  return h;
}

Expected<DLDataType> DTypeFromDescr(const std::string& descr, bool* is_bool,
                                    const std::string& what) {
  *is_bool = false;
  if (descr.size() < 3) return Bad(what, "unsupported dtype '" + descr + "'");
  char order = descr[0];
  char kind = descr[1];
  int size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i]))) {
      return Bad(what, "unsupported dtype '" + descr + "'");
    }
    size = size * 10 + (descr[i] - '0');
    if (size > 64) return Bad(what, "unsupported dtype '" + descr + "'");
  }
  if (order == '>' && size > 1) {
    return Bad(what, "big-endian data ('" + descr +
                         "') is not supported; save it little-endian "
                         "(arr.astype(arr.dtype.newbyteorder('<')))");
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    return Bad(what, "unsupported dtype '" + descr + "'");
  }
  DLDataType t{0, static_cast<uint8_t>(size * 8), 1};
  switch (kind) {
    case 'f':
      if (size != 2 && size != 4 && size != 8) break;
      t.code = kDLFloat;
      return t;
    case 'i':
      if (size != 1 && size != 2 && size != 4 && size != 8) break;
      t.code = kDLInt;
      return t;
    case 'u':
      if (size != 1 && size != 2 && size != 4 && size != 8) break;
      t.code = kDLUInt;
      return t;
    case 'b':
      if (size != 1) break;
      *is_bool = true;
      t.code = kDLUInt;
      return t;
    default:
      break;
  }
  return Bad(what,
             "unsupported dtype '" + descr + "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
}

}  // namespace

uint64_t NpyArray::num_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

Expected<std::string> NpyDescr(DLDataType dtype, bool is_bool) {
  if (dtype.lanes != 1) {
    return Status(ErrorCode::kInvalidArgument, "vector dtypes cannot be saved as .npy");
  }
  int bytes = dtype.bits / 8;
  if (is_bool && dtype.code == kDLUInt && dtype.bits == 8) return std::string("|b1");
  char kind = 0;
  switch (dtype.code) {
    case kDLFloat:
      if (dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64) kind = 'f';
      break;
    case kDLInt:
      if (dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64) kind = 'i';
      break;
    case kDLUInt:
      if (dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64) kind = 'u';
      break;
    default:
      break;
  }
  if (kind == 0) {
    return Status(ErrorCode::kInvalidArgument,
                  "dtype " + DTypeName(dtype) + " cannot be saved as .npy");
  }
  return std::string(bytes == 1 ? "|" : "<") + kind + std::to_string(bytes);
}

Expected<NpyArray> ParseNpy(std::string_view bytes, const std::string& what) {
  if (bytes.size() < kMagicLen + 2 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return Bad(what, "not a .npy file (no \\x93NUMPY magic)");
  }
  auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  uint8_t major = byte(6), minor = byte(7);
  size_t pos = kMagicLen + 2;
  uint64_t header_len = 0;
  if (major == 1) {
    if (bytes.size() < pos + 2) return Bad(what, "truncated .npy header");
    header_len = byte(pos) | (byte(pos + 1) << 8);
    pos += 2;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < pos + 4) return Bad(what, "truncated .npy header");
    header_len = uint64_t{byte(pos)} | (uint64_t{byte(pos + 1)} << 8) |
                 (uint64_t{byte(pos + 2)} << 16) | (uint64_t{byte(pos + 3)} << 24);
    pos += 4;
  } else {
    return Bad(what, "unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  if (bytes.size() - pos < header_len) return Bad(what, "truncated .npy header");
  CT_ASSIGN_OR_RETURN(Header h, ParseHeader(bytes.substr(pos, header_len), what));
  pos += header_len;

  NpyArray out;
  CT_ASSIGN_OR_RETURN(out.dtype, DTypeFromDescr(h.descr, &out.is_bool, what));
  out.shape = h.shape;
  auto nbytes = TensorBytes(out.shape, out.dtype);
  if (!nbytes.ok()) return Bad(what, nbytes.status().message());
  if (h.fortran_order && out.shape.size() > 1) {
    return Bad(what, "Fortran-order arrays are not supported; save with np.ascontiguousarray()");
  }
  uint64_t have = bytes.size() - pos;
  if (have < *nbytes) {
    return Bad(what, "truncated data: shape " + ShapeString(out.shape) + " of " + h.descr +
                         " needs " + std::to_string(*nbytes) + " bytes, the file has " +
                         std::to_string(have));
  }
  if (have > *nbytes) {
    return Bad(what, std::to_string(have - *nbytes) + " bytes after the array's data");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + pos;
  out.data.assign(p, p + *nbytes);
  return out;
}

Expected<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status(ErrorCode::kIoError, path + ": cannot open");
  std::streamsize size = in.tellg();
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) return Status(ErrorCode::kIoError, path + ": read failed");
  return ParseNpy(bytes, path);
}

Expected<std::string> EncodeNpy(const std::vector<int64_t>& shape, DLDataType dtype,
                                const void* data, uint64_t nbytes, bool is_bool) {
  CT_ASSIGN_OR_RETURN(std::string descr, NpyDescr(dtype, is_bool));
  CT_ASSIGN_OR_RETURN(uint64_t want, TensorBytes(shape, dtype));
  if (want != nbytes) {
    return Status(ErrorCode::kInvalidArgument, "npy: " + std::to_string(nbytes) +
                                                   " bytes given for shape " + ShapeString(shape) +
                                                   " of " + DTypeName(dtype) + " (needs " +
                                                   std::to_string(want) + ")");
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // The data starts 64-byte aligned; the header ends with '\n' after space padding.
  uint8_t major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xffff) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out += static_cast<char>((header_len >> (8 * i)) & 0xff);
  }
  out += dict;
  out.append(static_cast<const char*>(data), nbytes);
  return out;
}

Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape, DLDataType dtype,
                const void* data, uint64_t nbytes, bool is_bool) {
  auto bytes = EncodeNpy(shape, dtype, data, nbytes, is_bool);
  if (!bytes.ok()) return Status(bytes.status().code(), path + ": " + bytes.status().message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status(ErrorCode::kIoError, path + ": cannot create");
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  if (!out.flush()) return Status(ErrorCode::kIoError, path + ": write failed");
  return Status::Ok();
}

Status WriteNpy(const std::string& path, const NpyArray& array) {
  return WriteNpy(path, array.shape, array.dtype, array.data.data(), array.data.size(),
                  array.is_bool);
}

}  // namespace crosstune::client
