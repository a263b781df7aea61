// SPDX-License-Identifier: Apache-2.0
// Crypto (common layer): the few primitives Conflux needs to authenticate connections, as a thin wrapper over
// OpenSSL's libcrypto. Nothing here is hand-written cryptography; every function maps to one OpenSSL call.
//
// Threading: every function is thread-safe and keeps no state between calls.
// Errors:    a failure inside OpenSSL is SystemError naming the OpenSSL function and its error string.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>

#include "common/status.h"

namespace cfx::crypto {

inline constexpr size_t kDigestBytes = 32;
using Digest = std::array<uint8_t, kDigestBytes>;

// Fills `out` from OpenSSL's CSPRNG (RAND_bytes). Use it for secrets and nonces, never std::random_device.
Status randomBytes(std::span<uint8_t> out);

// HMAC-SHA256(key, parts[0] || parts[1] || ...). The parts are fed in order without copying them together.
Result<Digest> hmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts);

// An HMAC-SHA256 key set up once. mac() re-initialises the keyed context for each message instead of building a
// context, fetching the digest and deriving the key pads per call as hmacSha256 does: 0.4-0.5 against 1.7-2.9 us
// for a 74-byte message here. For keys that sign many small messages (health datagrams: every rank to every peer,
// every period).
//
// Threading: one thread at a time (its owner's lock). Not copyable; movable.
// Errors:    SystemError when OpenSSL fails.
class HmacKey {
 public:
  static Result<HmacKey> make(std::span<const uint8_t> key);
  HmacKey(HmacKey&&) noexcept;
  HmacKey& operator=(HmacKey&&) noexcept;
  ~HmacKey();

  // HMAC-SHA256(key, parts[0] || parts[1] || ...), equal to hmacSha256(key, parts).
  Result<Digest> mac(std::initializer_list<std::span<const uint8_t>> parts);

 private:
  struct Ctx;
  explicit HmacKey(std::unique_ptr<Ctx> ctx);
  std::unique_ptr<Ctx> ctx_;
};

// SHA-256 of `data`: turns a secret text (CFX_SECRET, a launcher job id) into a fixed-size key.
Result<Digest> sha256(std::span<const uint8_t> data);
Result<Digest> sha256(std::string_view text);

// Compares in time independent of where the inputs differ (CRYPTO_memcmp), so a MAC check leaks nothing.
// Inputs of different sizes compare unequal.
bool constantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

// Views a string's bytes as a span, for feeding labels to hmacSha256.
inline std::span<const uint8_t> bytesOf(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// ---- frame protection ---------------------------------------------------------------------------------------

// What a connection's frames get after its handshake (CFX_WIRE_PROTECTION): nothing, an authentication tag over
// header and payload (AES-128-GCM with the payload as associated data, i.e. GMAC), or the same with the payload
// encrypted (AES-128-GCM).
enum class Protection : uint8_t { Off = 0, Integrity = 1, Encryption = 2 };
const char* protectionName(Protection p);

inline constexpr size_t kTagBytes = 16;

// One direction of one connection: its key and the number of the next frame. The frame number is the GCM nonce
// and is never sent, so both ends must seal and open the same frames in the same order: a frame that is replayed,
// dropped, reordered or moved to another connection (another key) fails open(), as does any flipped bit of its
// header, payload or tag. Frame numbers count to 2^64; no connection lives that long.
//
// Threading: one thread at a time (the connection's reader or writer). Not copyable; movable.
// Errors:    SystemError when OpenSSL fails; InvalidArgument for a key of the wrong size.
class FrameCipher {
 public:
  // `key`: at least 16 bytes of key material derived for this direction (the first 16 are used).
  static Result<FrameCipher> create(Protection protection, std::span<const uint8_t> key);
  FrameCipher();
  FrameCipher(FrameCipher&& other) noexcept;
  FrameCipher& operator=(FrameCipher&& other) noexcept;
  ~FrameCipher();

  Protection protection() const { return protection_; }
  // Bytes of tag each frame carries: 0 when Off.
  size_t tagBytes() const { return protection_ == Protection::Off ? 0 : kTagBytes; }
  uint64_t frames() const { return frames_; }

  // Seals the next frame: the tag covers header and payload; with Encryption the payload is encrypted from `src`
  // into `dst` (which may be src: in place; otherwise they must not overlap), else dst is untouched. `tag` gets
  // tagBytes() bytes. Off: does nothing.
  Status seal(std::span<const uint8_t> header, const uint8_t* src, uint8_t* dst, size_t n, uint8_t* tag);
  // Opens the next frame in place: checks the tag over header and payload and, with Encryption, decrypts the
  // payload. False (the payload is then garbage) when the frame is not the next one this direction sealed.
  Result<bool> open(std::span<const uint8_t> header, uint8_t* payload, size_t n, const uint8_t* tag);

 private:
  struct Ctx;
  Status start(bool encrypt);
  Ctx* ctx_ = nullptr;
  Protection protection_ = Protection::Off;
  uint64_t frames_ = 0;
};

// The two directions of one end of an authenticated connection: `send` seals this end's frames, `recv` opens the
// peer's.
struct FrameKeys {
  FrameCipher send;
  FrameCipher recv;
};

// One end's FrameKeys for a connection whose handshake both ends saw as `context` (its protocol's label, both
// nonces, whatever else binds it): each direction's key is HMAC-SHA256(secret, context || "client->server") or
// (... || "server->client"), so the two ends derive matching pairs and no two connections or directions share one.
Result<FrameKeys> connectionKeys(std::span<const uint8_t> secret, Protection protection, bool isClient,
                                 std::initializer_list<std::span<const uint8_t>> context);

}  // namespace cfx::crypto
