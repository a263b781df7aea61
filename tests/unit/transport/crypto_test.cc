// SPDX-License-Identifier: Apache-2.0
// Known-answer and behaviour tests for the OpenSSL crypto wrapper (common/crypto.h).
#include "common/crypto.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cfx::crypto {
namespace {

std::string hex(const Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

TEST(CryptoTest, HmacSha256MatchesRfc4231TestCase1) {
  const std::vector<uint8_t> key(20, 0x0b);
  Result<Digest> mac = hmacSha256(key, {bytesOf("Hi There")});
  ASSERT_TRUE(mac.ok()) << mac.status().message();
  EXPECT_EQ(hex(*mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(CryptoTest, HmacSha256MatchesRfc4231TestCase2) {
  Result<Digest> mac = hmacSha256(bytesOf("Jefe"), {bytesOf("what do ya want for nothing?")});
  ASSERT_TRUE(mac.ok()) << mac.status().message();
  EXPECT_EQ(hex(*mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, HmacOverSeveralPartsEqualsHmacOverTheirConcatenation) {
  Result<Digest> split =
      hmacSha256(bytesOf("Jefe"), {bytesOf("what do ya "), bytesOf(""), bytesOf("want for nothing?")});
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(hex(*split), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, HmacWithAnEmptyKeyIsDefined) {
  Result<Digest> a = hmacSha256({}, {bytesOf("x")});
  Result<Digest> b = hmacSha256({}, {bytesOf("x")});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(CryptoTest, Sha256MatchesFips180Vector) {
  Result<Digest> d = sha256(std::string_view("abc"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(hex(*d), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, RandomBytesDifferBetweenCalls) {
  std::array<uint8_t, 32> a{};
  std::array<uint8_t, 32> b{};
  ASSERT_TRUE(randomBytes(a).ok());
  ASSERT_TRUE(randomBytes(b).ok());
  EXPECT_NE(a, b);
  EXPECT_TRUE(randomBytes({}).ok());
}

TEST(CryptoTest, ConstantTimeEqualComparesContentsAndSizes) {
  const std::array<uint8_t, 4> x{1, 2, 3, 4};
  const std::array<uint8_t, 4> y{1, 2, 3, 5};
  const std::array<uint8_t, 3> shorter{1, 2, 3};
  EXPECT_TRUE(constantTimeEqual(x, x));
  EXPECT_FALSE(constantTimeEqual(x, y));
  EXPECT_FALSE(constantTimeEqual(x, shorter));
  EXPECT_TRUE(constantTimeEqual({}, {}));
}

}  // namespace
}  // namespace cfx::crypto
