// SPDX-License-Identifier: Apache-2.0
// Known-answer and behaviour tests for the OpenSSL crypto wrapper (common/crypto.h).
#include "common/crypto.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "common/wire.h"

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

// A key made once gives hmacSha256's MAC for every message after it, whatever came before: RFC 4231's test case 2
// twice, and keys of 0, 4, 64 (one block) and 131 bytes (hashed first) over messages of several parts.
TEST(CryptoTest, AKeyMadeOnceMacsEachMessageAsAFreshOneDoes) {
  Result<HmacKey> jefe = HmacKey::make(bytesOf("Jefe"));
  ASSERT_TRUE(jefe.ok()) << jefe.status().message();
  for (int i = 0; i < 2; ++i) {
    Result<Digest> mac = jefe->mac({bytesOf("what do ya "), bytesOf("want for nothing?")});
    ASSERT_TRUE(mac.ok()) << mac.status().message();
    EXPECT_EQ(hex(*mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  }
  for (size_t keyBytes : {size_t{0}, size_t{4}, size_t{64}, size_t{131}}) {
    std::vector<uint8_t> key(keyBytes);
    for (size_t i = 0; i < keyBytes; ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
    Result<HmacKey> once = HmacKey::make(key);
    ASSERT_TRUE(once.ok());
    for (const char* message : {"", "a", "the health datagram of rank 3", "x"}) {
      Result<Digest> fresh = hmacSha256(key, {bytesOf("label"), bytesOf(message)});
      Result<Digest> reused = once->mac({bytesOf("label"), bytesOf(message)});
      ASSERT_TRUE(fresh.ok());
      ASSERT_TRUE(reused.ok());
      EXPECT_EQ(*reused, *fresh) << keyBytes << "-byte key, message '" << message << "'";
    }
  }
}

TEST(CryptoTest, AMovedFromKeyRefusesToMac) {
  Result<HmacKey> a = HmacKey::make(bytesOf("k"));
  ASSERT_TRUE(a.ok());
  HmacKey b = std::move(*a);
  EXPECT_TRUE(b.mac({bytesOf("m")}).ok());
  Result<Digest> refused = a->mac({bytesOf("m")});  // NOLINT(bugprone-use-after-move): what it does is the test
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::InvalidUsage);
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

// ---- frame protection ---------------------------------------------------------------------------------------

std::array<uint8_t, 32> keyFilledWith(uint8_t v) {
  std::array<uint8_t, 32> k{};
  k.fill(v);
  return k;
}

// A sealer and an opener of one direction, as the two ends of a connection hold them.
struct Direction {
  FrameCipher send;
  FrameCipher recv;
};
Direction direction(Protection p, uint8_t key = 0x42) {
  return Direction{FrameCipher::create(p, keyFilledWith(key)).value(),
                   FrameCipher::create(p, keyFilledWith(key)).value()};
}

struct Sealed {
  std::vector<uint8_t> header;
  std::vector<uint8_t> payload;
  std::array<uint8_t, kTagBytes> tag{};
};
Sealed sealFrame(FrameCipher& c, uint8_t fill, size_t n = 1000) {
  Sealed f;
  f.header = {1, 2, 3, 4, 5, 6, 7, fill};
  f.payload.assign(n, fill);
  EXPECT_TRUE(c.seal(f.header, f.payload.data(), f.payload.data(), n, f.tag.data()).ok());
  return f;
}
bool opens(FrameCipher& c, Sealed f) {
  Result<bool> ok = c.open(f.header, f.payload.data(), f.payload.size(), f.tag.data());
  EXPECT_TRUE(ok.ok()) << ok.status().message();
  return ok.ok() && *ok;
}

TEST(FrameCipherTest, SealedFramesOpenInOrderAndKeepTheirPayload) {
  for (const Protection p : {Protection::Integrity, Protection::Encryption}) {
    SCOPED_TRACE(protectionName(p));
    Direction d = direction(p);
    for (uint8_t i = 0; i < 5; ++i) {
      Sealed f = sealFrame(d.send, i);
      // Encryption hides the payload; integrity leaves it readable.
      EXPECT_EQ(f.payload == std::vector<uint8_t>(1000, i), p == Protection::Integrity);
      Result<bool> ok = d.recv.open(f.header, f.payload.data(), f.payload.size(), f.tag.data());
      ASSERT_TRUE(ok.ok() && *ok);
      EXPECT_EQ(f.payload, std::vector<uint8_t>(1000, i));
    }
    EXPECT_EQ(d.send.frames(), 5u);
    EXPECT_EQ(d.recv.frames(), 5u);
  }
}

TEST(FrameCipherTest, AnyFlippedBitOfHeaderPayloadOrTagFailsTheFrame) {
  for (const Protection p : {Protection::Integrity, Protection::Encryption}) {
    SCOPED_TRACE(protectionName(p));
    for (int where = 0; where < 3; ++where) {
      Direction d = direction(p);
      Sealed f = sealFrame(d.send, 0x77, 64);
      (where == 0 ? f.header[3] : where == 1 ? f.payload[40] : f.tag[15]) ^= 0x10;
      EXPECT_FALSE(opens(d.recv, f)) << "part " << where;
    }
  }
}

TEST(FrameCipherTest, ReplayedReorderedDroppedOrForeignFramesFail) {
  for (const Protection p : {Protection::Integrity, Protection::Encryption}) {
    SCOPED_TRACE(protectionName(p));
    {
      Direction d = direction(p);
      const Sealed first = sealFrame(d.send, 1);
      ASSERT_TRUE(opens(d.recv, first));
      EXPECT_FALSE(opens(d.recv, first)) << "a replay of frame 0 as frame 1";
    }
    {
      Direction d = direction(p);
      const Sealed first = sealFrame(d.send, 1);
      const Sealed second = sealFrame(d.send, 2);
      EXPECT_FALSE(opens(d.recv, second)) << "frame 1 where frame 0 is due (reordered, or frame 0 dropped)";
      EXPECT_FALSE(opens(d.recv, first)) << "and the receiver's count moved on: frame 0 no longer opens either";
    }
    {
      Direction d = direction(p);
      FrameCipher other = FrameCipher::create(p, keyFilledWith(0x43)).value();
      EXPECT_FALSE(opens(other, sealFrame(d.send, 3))) << "a frame of another connection's key";
    }
  }
}

TEST(FrameCipherTest, OffSealsNothingAndOpensEverything) {
  Direction d = direction(Protection::Off);
  EXPECT_EQ(d.send.tagBytes(), 0u);
  Sealed f = sealFrame(d.send, 9);
  EXPECT_EQ(f.payload, std::vector<uint8_t>(1000, 9));
  EXPECT_TRUE(opens(d.recv, f));
  EXPECT_FALSE(FrameCipher::create(Protection::Integrity, std::vector<uint8_t>(15, 1)).ok()) << "a short key";
}

TEST(FrameCipherTest, FrameZeroIsStandardAesGcm) {
  // The nonce of frame 0 is 96 zero bits, so frame 0 of the all-zero key over nothing is the GCM specification's
  // test case 1 (key 0^128, IV 0^96, no plaintext, no associated data): a peer built from the documentation
  // interoperates.
  FrameCipher c = FrameCipher::create(Protection::Integrity, keyFilledWith(0)).value();
  uint8_t tag[kTagBytes];
  ASSERT_TRUE(c.seal({}, nullptr, nullptr, 0, tag).ok());
  // GCM with key 0^128, IV 0^96 and nothing to authenticate: the NIST test case 1 tag.
  const uint8_t expected[kTagBytes] = {0x58, 0xe2, 0xfc, 0xce, 0xfa, 0x7e, 0x30, 0x61,
                                       0x36, 0x7f, 0x1d, 0x57, 0xa4, 0xe7, 0x45, 0x5a};
  EXPECT_EQ(std::memcmp(tag, expected, kTagBytes), 0);
}

}  // namespace
}  // namespace cfx::crypto
