// The Build request on the wire, both sides (protocol.h Opcode::kBuild): a BuildJob header frame
// and the request's bytes; a BuildJobReply header frame and the result's bytes. The bytes are the
// builder's own msgpack forms, opaque here (common knows nothing of the builder). Sizes are checked
// before anything is allocated and every byte is hashed as it arrives, so a damaged result is a
// kBadHash error, never a wrong library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "crosstune/channel.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune {

// Client side: sends one build job and waits up to `deadline` for its result's bytes. The peer's
// error reply is its Status (e.g. kBuildError is not one: build errors travel inside the result).
// kBadHash when the result's bytes do not match their SHA-256, kLimitExceeded when the reply
// announces more than Limits::kMaxBuildJobBytes; after either (and after any I/O error) the
// connection is out of step and must be closed.
Expected<std::string> CallBuildJob(Channel& ch, std::string_view request, uint32_t timeout_ms,
                                   Deadline deadline);

// Server side, after a Build header frame: reads its `request_bytes` (refused with kLimitExceeded
// before reading when over the limit: the connection must then close) and checks their hash
// (kBadHash: the stream is still in step, so the session may go on after replying).
Expected<std::string> ReceiveBuildJob(Channel& ch, const msg::BuildJob& job, Deadline deadline);

// Server side: the reply to request `request_id`, header then `result`'s bytes.
Status SendBuildJobResult(Channel& ch, uint32_t request_id, std::string_view result,
                          Deadline deadline);

}  // namespace crosstune
