#include "crosstune/crypto.h"

#include <gtest/gtest.h>

namespace crosstune {
namespace {

TEST(Crypto, Sha256OfKnownString) {
  // FIPS 180-2 test vector.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Crypto, Sha256Base64OfKnownStrings) {
  EXPECT_EQ(Sha256Base64("abc"), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
  EXPECT_EQ(Sha256Base64(""), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
}

TEST(Crypto, IncrementalMatchesOneShot) {
  Sha256 h;
  h.Update("a", 1);
  h.Update("bc", 2);
  EXPECT_EQ(h.FinalHex(), Sha256Hex("abc"));
}

TEST(Crypto, HmacOfKnownVector) {
  // RFC 4231 test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Crypto, NoncesDiffer) { EXPECT_NE(RandomHex(16), RandomHex(16)); }

}  // namespace
}  // namespace crosstune
