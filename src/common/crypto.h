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

}  // namespace cfx::crypto
