// SPDX-License-Identifier: Apache-2.0
// XXH3-128 streaming hasher (faulttol layer).
#include "faulttol/state_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace cfx::ft {

struct StateHasher::State {
  XXH3_state_t xxh;
};

std::string StateHash::hex() const {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return text;
}

StateHasher::StateHasher() : state_(std::make_unique<State>()) { XXH3_128bits_reset(&state_->xxh); }

StateHasher::~StateHasher() = default;

void StateHasher::update(const void* data, size_t bytes) {
  if (bytes > 0) XXH3_128bits_update(&state_->xxh, data, bytes);
}

StateHash StateHasher::digest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(&state_->xxh);
  return StateHash{h.low64, h.high64};
}

StateHash hashBytes128(const void* data, size_t bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  return StateHash{h.low64, h.high64};
}

}  // namespace cfx::ft
