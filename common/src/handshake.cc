#include "crosstune/handshake.h"

#include "crosstune/crypto.h"

namespace crosstune {

Expected<msg::HelloReply> ClientHandshake(Channel& ch, const msg::Hello& hello,
                                          const std::string& secret, Deadline deadline) {
  CT_ASSIGN_OR_RETURN(msg::HelloReply reply, ch.Call<msg::HelloReply>(Opcode::kHello, hello, deadline));
  if (reply.major != kProtocolMajor) {
    return Status(ErrorCode::kVersionMismatch,
                  "peer speaks protocol " + std::to_string(reply.major) + "." +
                      std::to_string(reply.minor) + ", this client " +
                      std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor));
  }
  if (reply.auth_required) {
    if (secret.empty()) {
      ch.Close();
      return Status(ErrorCode::kUnauthorized,
                    "peer requires authentication; pass --auth-token-file (or CROSSTUNE_AUTH_TOKEN_FILE)");
    }
    msg::Auth auth{HmacSha256Hex(secret, reply.nonce)};
    auto ok = ch.Call<msg::Empty>(Opcode::kAuth, auth, deadline);
    if (!ok.ok()) return ok.status();
  }
  return reply;
}

bool HelloIsComplete(const Frame& f) {
  return f.payload.type == msgpack::type::ARRAY && f.payload.via.array.size >= 4;
}

Expected<msg::Hello> ServerHandshake(Channel& ch, const ServerHandshakeOptions& options,
                                     Deadline deadline) {
  // An unauthenticated peer gets small frames only: no megabyte buffers for a bare header.
  auto first = ch.ReadFrame(deadline, Limits::kMaxHandshakeFrameBytes);
  if (!first.ok()) {
    // Garbage or an oversize frame: answer with the reason (request id 0) where the socket allows.
    if (first.status().code() != ErrorCode::kDisconnected &&
        first.status().code() != ErrorCode::kTimeout) {
      (void)ch.SendError(0, first.status(), DeadlineIn(std::chrono::milliseconds(200)));
    }
    return first.status();
  }
  const Frame& f = *first;
  if (f.op != Opcode::kHello) {
    Status s(ErrorCode::kProtocolError,
             "expected Hello as the first frame, got " + std::string(OpcodeName(f.op)));
    (void)ch.SendError(f.request_id, s, deadline);
    return s;
  }
  auto hello = f.As<msg::Hello>();
  if (!hello.ok()) {
    (void)ch.SendError(f.request_id, hello.status(), deadline);
    return hello.status();
  }
  if (hello->magic != kProtocolMagic || !HelloIsComplete(f)) {
    Status s(ErrorCode::kProtocolError, "bad magic: not a crosstune peer");
    (void)ch.SendError(f.request_id, s, deadline);
    return s;
  }
  if (hello->major != kProtocolMajor) {
    Status s(ErrorCode::kVersionMismatch,
             "client speaks protocol " + std::to_string(hello->major) + "." +
                 std::to_string(hello->minor) + ", this peer " + std::to_string(kProtocolMajor) +
                 "." + std::to_string(kProtocolMinor) + " (crosstune " +
                 std::string(kCrosstuneVersion) + ")");
    (void)ch.SendError(f.request_id, s, deadline);
    return s;
  }
  msg::HelloReply reply;
  reply.version = std::string(kCrosstuneVersion);
  reply.session_id = options.session_id;
  reply.auth_required = !options.secret.empty();
  if (reply.auth_required) reply.nonce = RandomHex(32);
  // Authentication comes before any check that would tell an unauthenticated peer something.
  if (!reply.auth_required && options.accept_hello) {
    Status s = options.accept_hello(*hello);
    if (!s.ok()) {
      (void)ch.SendError(f.request_id, s, deadline);
      return s;
    }
  }
  CT_RETURN_IF_ERROR(ch.Send(Opcode::kResult, f.request_id, reply, deadline));
  if (!reply.auth_required) return std::move(hello).value();

  CT_ASSIGN_OR_RETURN(Frame af, ch.ReadFrame(deadline, Limits::kMaxHandshakeFrameBytes));
  auto auth = af.op == Opcode::kAuth ? af.As<msg::Auth>()
                                     : Expected<msg::Auth>(Status(ErrorCode::kUnauthorized, ""));
  if (!auth.ok() || !ConstantTimeEquals(auth->hmac_hex, HmacSha256Hex(options.secret, reply.nonce))) {
    Status s(ErrorCode::kUnauthorized, "authentication failed: wrong or missing shared secret");
    (void)ch.SendError(af.request_id, s, deadline);
    return s;
  }
  if (options.accept_hello) {
    Status s = options.accept_hello(*hello);
    if (!s.ok()) {
      (void)ch.SendError(af.request_id, s, deadline);
      return s;
    }
  }
  CT_RETURN_IF_ERROR(ch.Send(Opcode::kResult, af.request_id, msg::Empty{}, deadline));
  return std::move(hello).value();
}

}  // namespace crosstune
