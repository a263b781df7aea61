// SPDX-License-Identifier: Apache-2.0
// Shared by the libFuzzer targets and the seed generator (tests/fuzz): the fixed credentials and nonces the
// targets check against, and a crash-on-violation helper. Fixed values make a run reproducible: the seed
// generator signs its handshakes with them, so a seed passes authentication and the fuzzer starts from the
// code behind the HMAC check, not only from the rejections in front of it.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/wire.h"

namespace cfx::fuzz {

inline transport::Secret fixedSecret() {
  transport::Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xA5 ^ i);
  return s;
}

inline transport::boot::Credentials fixedCredentials() {
  return transport::boot::Credentials{fixedSecret(), 0x0123456789abcdefull};
}

// The communicator a fuzzed health monitor belongs to; seeds are sealed for it.
inline constexpr uint64_t kHealthCommTag = 0x0fedcba987654321ull;

// The UCX worker address of a fuzzed receiver: the hello it expects is bound to it.
inline std::array<uint8_t, 48> fixedWorkerAddress() {
  std::array<uint8_t, 48> a{};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(0x3c + 11 * i);
  return a;
}

// The nonce a fuzzed server (or client) is taken to have sent; seeds answer exactly this one.
inline std::array<uint8_t, 32> fixedNonce(uint8_t salt) {
  std::array<uint8_t, 32> n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(salt + 7 * i);
  return n;
}

// A property the parser promised does not hold: report and abort, so libFuzzer records the input as a crash.
[[noreturn]] inline void violated(const char* what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

inline void check(bool ok, const char* what) {
  if (!ok) violated(what);
}

}  // namespace cfx::fuzz
