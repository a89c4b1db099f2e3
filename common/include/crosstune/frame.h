// Frames: encoding and decoding of [opcode, request_id, payload] bodies with a u32 length prefix.
// Pure functions over bytes, shared by the blocking Channel and the tracker's async sessions.
// The templates below are defined in wire.h (msgpack) and instantiated in frame.cc for every
// message of messages.h and tracker_messages.h, so a file that sends or receives messages
// through a Channel compiles without msgpack's headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "crosstune/messages.h"
#include "crosstune/protocol.h"
#include "crosstune/status.h"

namespace crosstune {

// The decoded msgpack body of a frame (wire.h): the zone the payload points into, and the payload.
struct FrameBody;

// A decoded frame.
struct Frame {
  Opcode op = Opcode::kResult;
  uint32_t request_id = 0;
  std::shared_ptr<const FrameBody> body;

  // Converts the payload into an owned message; a payload of the wrong shape is kProtocolError.
  template <typename T>
  Expected<T> As() const;
  // For replies: the Error payload as a Status (kOk for a kResult frame).
  Status AsStatus() const;
};

// Encodes a whole frame, length prefix included.
template <typename T>
std::string EncodeFrame(Opcode op, uint32_t request_id, const T& payload);

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
