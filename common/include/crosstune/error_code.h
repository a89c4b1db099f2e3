// The error codes every Status carries; the wire sends them as they are (protocol.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace crosstune {

// Small on purpose: callers decide retries from the code, humans read the message.
enum class ErrorCode : uint8_t {
  kOk = 0,
  kDisconnected = 1,  // peer went away; retry on another device is safe
  kTimeout = 2,       // a deadline passed (network wait, call, session)
  kNotFound = 3,
  kInvalidArgument = 4,
  kRemoteCrash = 5,  // uploaded code died by a signal
  kWrongArch = 6,    // module or package built for another architecture / missing cpu feature
  kUnauthorized = 7,
  kBusy = 8,
  kVersionMismatch = 9,  // protocol major, ABI or package format version
  kProtocolError = 10,   // malformed frame, bad magic, unknown opcode
  kLimitExceeded = 11,   // frame, upload, tensor or workspace limit
  kIoError = 12,
  kBadHash = 13,
  kKernelError = 14,  // the kernel returned non-zero
  kBuildError = 15,
  kNoDevice = 16,  // no device can ever match a request / no GPU or driver present
  kInternal = 17,
};

std::string_view ErrorCodeName(ErrorCode code);

}  // namespace crosstune
