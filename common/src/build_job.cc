#include "crosstune/build_job.h"

#include "crosstune/crypto.h"

namespace crosstune {
namespace {

// Reads `size` bytes (already checked against the limit), hashing them, and compares the hash.
Expected<std::string> ReadHashed(Channel& ch, uint64_t size, const std::string& sha256,
                                 const char* what, Deadline deadline) {
  std::string bytes(size, '\0');
  CT_RETURN_IF_ERROR(ch.ReadBytes(bytes.data(), bytes.size(), deadline));
  std::string got = Sha256Hex(bytes);
  if (!ConstantTimeEquals(got, sha256)) {
    return Status(ErrorCode::kBadHash, std::string(what) + " of " + std::to_string(size) +
                                           " bytes arrived with SHA-256 " + got +
                                           ", not the announced " + sha256);
  }
  return bytes;
}

Status CheckSize(uint64_t size, const char* what) {
  if (size > Limits::kMaxBuildJobBytes) {
    return Status(ErrorCode::kLimitExceeded, std::string(what) + " of " + std::to_string(size) +
                                                 " bytes is over the limit of " +
                                                 std::to_string(Limits::kMaxBuildJobBytes));
  }
  return Status::Ok();
}

}  // namespace

Expected<std::string> CallBuildJob(Channel& ch, std::string_view request, uint32_t timeout_ms,
                                   Deadline deadline) {
  CT_RETURN_IF_ERROR(CheckSize(request.size(), "a build request"));
  msg::BuildJob job;
  job.request_bytes = request.size();
  job.request_sha256 = Sha256Hex(request);
  job.timeout_ms = timeout_ms;
  const uint32_t id = ch.NextRequestId();
  CT_RETURN_IF_ERROR(ch.Send(Opcode::kBuild, id, job, deadline));
  CT_RETURN_IF_ERROR(ch.WriteBytes(request.data(), request.size(), deadline));
  CT_ASSIGN_OR_RETURN(msg::BuildJobReply reply, ch.ReadReply<msg::BuildJobReply>(id, deadline));
  CT_RETURN_IF_ERROR(CheckSize(reply.result_bytes, "a build result"));
  return ReadHashed(ch, reply.result_bytes, reply.result_sha256, "the build result", deadline);
}

Expected<std::string> ReceiveBuildJob(Channel& ch, const msg::BuildJob& job, Deadline deadline) {
  CT_RETURN_IF_ERROR(CheckSize(job.request_bytes, "a build request"));
  return ReadHashed(ch, job.request_bytes, job.request_sha256, "the build request", deadline);
}

Status SendBuildJobResult(Channel& ch, uint32_t request_id, std::string_view result,
                          Deadline deadline) {
  msg::BuildJobReply reply;
  reply.result_bytes = result.size();
  reply.result_sha256 = Sha256Hex(result);
  CT_RETURN_IF_ERROR(ch.Send(Opcode::kResult, request_id, reply, deadline));
  return ch.WriteBytes(result.data(), result.size(), deadline);
}

}  // namespace crosstune
