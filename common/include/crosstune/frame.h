// Frames: encoding and decoding of [opcode, request_id, payload] bodies with a u32 length prefix.
// Pure functions over bytes, shared by the blocking Channel and the tracker's async sessions.
#pragma once

#include <cstdint>
#include <memory>
#include <msgpack.hpp>
#include <string>

#include "crosstune/messages.h"
#include "crosstune/protocol.h"
#include "crosstune/status.h"

namespace crosstune {

// A decoded frame. Owns the msgpack zone that `payload` points into.
struct Frame {
  Opcode op = Opcode::kResult;
  uint32_t request_id = 0;
  std::shared_ptr<msgpack::object_handle> handle;
  msgpack::object payload;

  // Converts the payload into an owned message; a payload of the wrong shape is kProtocolError.
  template <typename T>
  Expected<T> As() const {
    try {
      T out{};
      payload.convert(out);
      return out;
    } catch (const std::exception& e) {
      return Status(
          ErrorCode::kProtocolError,
          std::string("malformed ") + std::string(OpcodeName(op)) + " payload: " + e.what());
    }
  }
  // For replies: the Error payload as a Status (kOk for a kResult frame).
  Status AsStatus() const;
};

// Encodes a whole frame, length prefix included.
template <typename T>
std::string EncodeFrame(Opcode op, uint32_t request_id, const T& payload) {
  msgpack::sbuffer body;
  body.write("\0\0\0\0", 4);  // room for the length prefix
  msgpack::packer<msgpack::sbuffer> pk(&body);
  pk.pack_array(3);
  pk.pack(static_cast<uint16_t>(op));
  pk.pack(request_id);
  pk.pack(payload);
  std::string out(body.data(), body.size());
  uint32_t n = static_cast<uint32_t>(out.size() - 4);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::string EncodeError(uint32_t request_id, const Status& status);

// Reads the little-endian u32 length prefix; lengths over max_frame_bytes are kLimitExceeded
// (checked before anything is allocated).
Expected<uint32_t> DecodeFrameLength(const unsigned char prefix[4],
                                     uint32_t max_frame_bytes = Limits::kMaxFrameBytes);

// Decodes a body (without its prefix). Malformed msgpack, a body that is not a 3-array, an
// opcode over 16 bits, or a string anywhere in it that is not valid UTF-8 is kProtocolError.
// Unknown opcodes decode; check IsKnownOpcode().
// `utf8_strings` false skips the UTF-8 check, for trusted internal pipes whose strings carry raw
// bytes (the builder's worker protocol ships libraries and compiler output).
Expected<Frame> DecodeFrameBody(const char* data, size_t size, bool utf8_strings = true);

}  // namespace crosstune
