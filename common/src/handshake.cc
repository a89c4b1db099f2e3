#include "crosstune/handshake.h"

#include "crosstune/crypto.h"
#include "crosstune/wire.h"

namespace crosstune {

Expected<msg::HelloReply> ClientHandshake(Channel& ch, const msg::Hello& hello,
                                          const std::string& secret, Deadline deadline) {
  CT_ASSIGN_OR_RETURN(msg::HelloReply reply,
                      ch.Call<msg::HelloReply>(Opcode::kHello, hello, deadline));
  if (reply.major != kProtocolMajor) {
    return Status(ErrorCode::kVersionMismatch,
                  "peer speaks protocol " + std::to_string(reply.major) + "." +
                      std::to_string(reply.minor) + ", this client " +
                      std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor));
  }
  if (reply.auth_required) {
    if (secret.empty()) {
      ch.Close();
      return Status(
          ErrorCode::kUnauthorized,
          "peer requires authentication; pass --auth-token-file (or CROSSTUNE_AUTH_TOKEN_FILE)");
    }
    msg::Auth auth{HmacSha256Hex(secret, reply.nonce)};
    auto ok = ch.Call<msg::Empty>(Opcode::kAuth, auth, deadline);
    if (!ok.ok()) return ok.status();
  }
  return reply;
}

bool HelloIsComplete(const Frame& f) {
  const msgpack::object& payload = PayloadOf(f);
  return payload.type == msgpack::type::ARRAY && payload.via.array.size >= 4;
}

Expected<msg::Hello> CheckHello(const Frame& f) {
  if (f.op != Opcode::kHello) {
    return Status(ErrorCode::kProtocolError,
                  "expected Hello as the first frame, got " + std::string(OpcodeName(f.op)));
  }
  auto hello = f.As<msg::Hello>();
  if (!hello.ok()) return hello.status();
  if (hello->magic != kProtocolMagic || !HelloIsComplete(f)) {
    return Status(ErrorCode::kProtocolError, "bad magic: not a crosstune peer");
  }
  if (hello->major != kProtocolMajor) {
    return Status(ErrorCode::kVersionMismatch,
                  "client speaks protocol " + std::to_string(hello->major) + "." +
                      std::to_string(hello->minor) + ", this peer " +
                      std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor) +
                      " (crosstune " + std::string(kCrosstuneVersion) + ")");
  }
  return hello;
}

msg::HelloReply MakeHelloReply(const std::string& session_id, bool auth_required) {
  msg::HelloReply reply;
  reply.version = std::string(kCrosstuneVersion);
  reply.session_id = session_id;
  reply.auth_required = auth_required;
  if (auth_required) reply.nonce = RandomHex(32);
  return reply;
}

Status CheckAuth(const Frame& f, const std::string& secret, const std::string& nonce) {
  auto auth = f.op == Opcode::kAuth ? f.As<msg::Auth>()
                                    : Expected<msg::Auth>(Status(ErrorCode::kUnauthorized, ""));
  if (!auth.ok() || !ConstantTimeEquals(auth->hmac_hex, HmacSha256Hex(secret, nonce))) {
    return Status(ErrorCode::kUnauthorized,
                  "authentication failed: wrong or missing shared secret");
  }
  return Status::Ok();
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
  auto hello = CheckHello(f);
  if (!hello.ok()) {
    (void)ch.SendError(f.request_id, hello.status(), deadline);
    return hello.status();
  }
  msg::HelloReply reply = MakeHelloReply(options.session_id, !options.secret.empty());
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
  if (Status s = CheckAuth(af, options.secret, reply.nonce); !s.ok()) {
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
