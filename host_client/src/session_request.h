// Private to the client library: the request templates of Session (session.h), shared by
// session.cc and remote_model.cc.
#pragma once

#include <chrono>
#include <string>

#include "crosstune/client/session.h"

namespace crosstune::client {
namespace detail {

// Error codes after which the server has ended the session (it sends them from the parent
// process, then closes): the channel is closed here too so later calls fail fast.
inline bool EndsSession(const Status& s, uint32_t reply_id) {
  return reply_id == 0 || s.code() == ErrorCode::kRemoteCrash || s.code() == ErrorCode::kTimeout;
}

// Why a read of the server's reply failed on our side rather than with the server's answer.
inline bool IsConnectionFailure(const Status& s) {
  return s.code() == ErrorCode::kDisconnected || s.code() == ErrorCode::kTimeout ||
         s.code() == ErrorCode::kIoError;
}

// Fails a request on a closed channel, naming why it closed.
inline Status ClosedStatus() { return Status(ErrorCode::kDisconnected, "the session is closed"); }

}  // namespace detail

template <typename Reply, typename Req>
Expected<Reply> Session::Request(Opcode op, const Req& req, std::chrono::milliseconds extra) {
  if (!channel_.is_open()) return detail::ClosedStatus();
  Deadline deadline = DeadlineIn(options_.request_timeout + extra);
  uint32_t id = channel_.NextRequestId();
  Status sent = channel_.Send(op, id, req, deadline);
  if (!sent.ok()) {
    channel_.Close();
    return sent;
  }
  auto frame = channel_.ReadFrame(deadline);
  if (!frame.ok()) {
    channel_.Close();
    return frame.status();
  }
  if (frame->op != Opcode::kResult && frame->op != Opcode::kError) {
    channel_.Close();
    return Status(ErrorCode::kProtocolError,
                  "expected a reply, got " + std::string(OpcodeName(frame->op)));
  }
  if (frame->request_id != id && frame->request_id != 0) {
    channel_.Close();
    return Status(ErrorCode::kProtocolError, "reply to request " +
                                                 std::to_string(frame->request_id) + ", expected " +
                                                 std::to_string(id));
  }
  Status s = frame->AsStatus();
  if (!s.ok()) {
    if (detail::EndsSession(s, frame->request_id)) channel_.Close();
    return s;
  }
  auto out = frame->template As<Reply>();
  if (!out.ok()) channel_.Close();
  return out;
}

template <typename Reply, typename Header, typename SendBody>
Expected<Reply> Session::RequestWithBytes(Opcode op, const Header& header, uint64_t size,
                                          SendBody&& send_body) {
  using std::chrono::milliseconds;
  if (!channel_.is_open()) return detail::ClosedStatus();
  Deadline deadline = DeadlineIn(options_.request_timeout + milliseconds(size / 1024));
  uint32_t id = channel_.NextRequestId();
  Status s = channel_.Send(op, id, header, deadline);
  if (s.ok()) s = send_body(deadline);
  if (!s.ok()) {
    // The server may have refused the request and closed; its reason beats "connection reset".
    auto why = channel_.ReadReply<Reply>(id, DeadlineIn(milliseconds(1000)));
    channel_.Close();
    if (!why.ok() && !detail::IsConnectionFailure(why.status())) return why.status();
    return s;
  }
  auto reply = channel_.ReadFrame(deadline);
  if (!reply.ok()) {
    channel_.Close();
    return reply.status();
  }
  Status rs = reply->AsStatus();
  if (!rs.ok()) {
    if (detail::EndsSession(rs, reply->request_id)) channel_.Close();
    return rs;
  }
  auto out = reply->template As<Reply>();
  if (!out.ok()) channel_.Close();
  return out;
}

}  // namespace crosstune::client
