// SHA-256 and HMAC-SHA256 through OpenSSL's libcrypto, plus random nonces.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "crosstune/channel.h"
#include "crosstune/status.h"

namespace crosstune {

// Incremental SHA-256. Not thread-safe.
class Sha256 : public Channel::ByteSink {
 public:
  Sha256();
  ~Sha256() override;
  void Update(const void* data, size_t size) override;
  std::string FinalHex();  // lower-case hex; the object is reset afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::string_view data);
// The digest in standard base64 with padding (RFC 4648), as a Content-Security-Policy hash source
// and Subresource Integrity write it.
std::string Sha256Base64(std::string_view data);
Expected<std::string> Sha256FileHex(const std::string& path);
std::string HmacSha256Hex(std::string_view key, std::string_view data);
std::string RandomHex(size_t bytes);
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// Reads a secret from a file (trailing whitespace stripped); empty files are refused.
Expected<std::string> ReadSecretFile(const std::string& path);

}  // namespace crosstune
