#include "crosstune/frame.h"

#include "crosstune/text.h"
#include "crosstune/wire.h"

namespace crosstune {
namespace {

// Strings on the wire are UTF-8 (msgpack's str type says so); anything else is refused here,
// where bytes from a peer become values, so no later JSON or log output meets raw bytes.
bool StringsAreUtf8(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::STR:
      return IsValidUtf8(std::string_view(o.via.str.ptr, o.via.str.size));
    case msgpack::type::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        if (!StringsAreUtf8(o.via.array.ptr[i])) return false;
      }
      return true;
    case msgpack::type::MAP:
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        if (!StringsAreUtf8(o.via.map.ptr[i].key) || !StringsAreUtf8(o.via.map.ptr[i].val)) {
          return false;
        }
      }
      return true;
    default:
      return true;
  }
}

}  // namespace

#define CT_WIRE_INSTANTIATE(T)                         \
  template Expected<msg::T> Frame::As<msg::T>() const; \
  template std::string EncodeFrame<msg::T>(Opcode, uint32_t, const msg::T&);
CT_WIRE_MESSAGES(CT_WIRE_INSTANTIATE)
#undef CT_WIRE_INSTANTIATE

Status Frame::AsStatus() const {
  if (op == Opcode::kResult) return Status::Ok();
  if (op != Opcode::kError) {
    return Status(ErrorCode::kProtocolError,
                  "expected a reply, got " + std::string(OpcodeName(op)));
  }
  auto err = As<msg::Error>();
  if (!err.ok()) return err.status();
  auto code = static_cast<ErrorCode>(err->code);
  if (code == ErrorCode::kOk || ErrorCodeName(code) == "Unknown") code = ErrorCode::kInternal;
  return Status(code, err->message);
}

std::string EncodeError(uint32_t request_id, const Status& status) {
  msg::Error e;
  e.code = static_cast<uint8_t>(status.code());
  // Messages quote paths, dlerror() and kernels' own text: whatever their bytes, the peer
  // receives valid UTF-8.
  e.message = ToValidUtf8(status.message());
  // Cut so the error frame always fits one frame, whatever a message quotes.
  constexpr size_t kMaxMessageBytes = 64 * 1024;
  if (e.message.size() > kMaxMessageBytes) {
    e.message = ToValidUtf8(std::string_view(e.message).substr(0, kMaxMessageBytes)) + "... (" +
                std::to_string(e.message.size()) + " bytes)";
  }
  return EncodeFrame(Opcode::kError, request_id, e);
}

Expected<uint32_t> DecodeFrameLength(const unsigned char prefix[4], uint32_t max_frame_bytes) {
  uint32_t n = uint32_t(prefix[0]) | uint32_t(prefix[1]) << 8 | uint32_t(prefix[2]) << 16 |
               uint32_t(prefix[3]) << 24;
  if (n == 0) return Status(ErrorCode::kProtocolError, "empty frame");
  if (n > max_frame_bytes) {
    return Status(ErrorCode::kLimitExceeded, "frame of " + std::to_string(n) +
                                                 " bytes is over the limit of " +
                                                 std::to_string(max_frame_bytes));
  }
  return n;
}

Expected<Frame> DecodeFrameBody(const char* data, size_t size, bool utf8_strings) {
  Frame f;
  try {
    // Container sizes are bounded by the frame itself; this stops a 5-byte header claiming
    // a 4-billion-element array from allocating before the bytes run out.
    msgpack::unpack_limit limit(/*array=*/size, /*map=*/size, /*str=*/size, /*bin=*/size,
                                /*ext=*/size, /*depth=*/32);
    msgpack::object_handle handle;
    size_t off = 0;
    msgpack::unpack(handle, data, size, off, nullptr, nullptr, limit);
    if (off != size) return Status(ErrorCode::kProtocolError, "trailing bytes after frame body");
    const msgpack::object& o = handle.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 3) {
      return Status(ErrorCode::kProtocolError, "frame body is not [opcode, request_id, payload]");
    }
    const msgpack::object* items = o.via.array.ptr;
    if (items[0].type != msgpack::type::POSITIVE_INTEGER ||
        items[1].type != msgpack::type::POSITIVE_INTEGER) {
      return Status(ErrorCode::kProtocolError, "frame opcode or request id is not an integer");
    }
    uint64_t op = items[0].via.u64;
    // Unknown opcodes are decoded: the dispatcher answers them with a named error and the
    // connection goes on.
    if (op > 0xffff) return Status(ErrorCode::kProtocolError, "opcode out of range");
    if (items[1].via.u64 > 0xffffffffull) {
      return Status(ErrorCode::kProtocolError, "request id out of range");
    }
    if (utf8_strings && !StringsAreUtf8(items[2])) {
      return Status(ErrorCode::kProtocolError, "a string in the frame is not valid UTF-8");
    }
    f.op = static_cast<Opcode>(op);
    f.request_id = static_cast<uint32_t>(items[1].via.u64);
    auto body = std::make_shared<FrameBody>();
    body->payload = items[2];
    body->handle = std::move(handle);
    f.body = std::move(body);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kProtocolError, std::string("malformed frame: ") + e.what());
  }
  return f;
}

}  // namespace crosstune
