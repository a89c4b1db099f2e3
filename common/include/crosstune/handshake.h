// The handshake that opens every connection (rpc server and tracker alike):
//   client -> Hello{magic, major, minor, role, name, lease_token}
//   peer   -> Result HelloReply{..., auth_required, nonce}   or Error (bad magic / major)
//   client -> Auth{HMAC-SHA256(secret, nonce)}               only when auth_required
//   peer   -> Result Empty                                   or Error kUnauthorized
#pragma once

#include <functional>
#include <string>

#include "crosstune/channel.h"
#include "crosstune/messages.h"

namespace crosstune {

// Whether a Hello frame's payload carries the fields up to the role itself: a short or empty
// array would decode to msg::Hello's defaults, magic and version included, and pass as ours.
bool HelloIsComplete(const Frame& f);

// Client side. `secret` empty: a peer that requires auth is refused with kUnauthorized locally.
Expected<msg::HelloReply> ClientHandshake(Channel& ch, const msg::Hello& hello,
                                          const std::string& secret, Deadline deadline);

// Server side. Checks magic and major and, when `secret` is not empty, the HMAC. On failure the
// error has been sent to the peer (where the frame allowed it) and the caller should close.
// `accept_hello`, when set, may refuse a Hello (e.g. a stale lease token) with its Status.
struct ServerHandshakeOptions {
  std::string secret;
  std::string session_id;
  std::function<Status(const msg::Hello&)> accept_hello;
};
Expected<msg::Hello> ServerHandshake(Channel& ch, const ServerHandshakeOptions& options,
                                     Deadline deadline);

// The accepting side's checks without I/O, one implementation for ServerHandshake above and the
// tracker's asynchronous connections, so every peer answers a bad handshake alike. A failed
// check's Status is the error to send (to the frame's request id) before closing.
//
// The first frame: a Hello with our magic and protocol major.
Expected<msg::Hello> CheckHello(const Frame& first);
// The reply to an accepted Hello; with `auth_required` it carries a fresh nonce to answer.
msg::HelloReply MakeHelloReply(const std::string& session_id, bool auth_required);
// The second frame when authentication was required: an Auth with HMAC-SHA256(secret, nonce).
Status CheckAuth(const Frame& second, const std::string& secret, const std::string& nonce);

}  // namespace crosstune
