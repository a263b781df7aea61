// SPDX-License-Identifier: Apache-2.0
// 128-bit hashes of shared state (faulttol layer): how the members of a group find out, without moving the state,
// whether they hold the same bytes (cfxSharedStateSync, core/state_sync.h).
//
// XXH3-128 (libxxhash, compiled in from its header so libnccl.so.2 gains no run-time dependency): tens of GB/s on
// one core, so hashing a model's weights costs a fraction of sending them once. It is not a cryptographic hash:
// it tells honest members apart, and the wire that carries the digests is authenticated by the session secret.
// 128 bits make an accidental collision between two different states negligible (2^-64 at 2^32 states).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cfx::ft {

struct StateHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const StateHash&) const = default;
  std::string hex() const;  // 32 hex digits, high half first
};

// Streaming: update() any number of times, then digest(). The digest of a sequence of updates depends only on
// the concatenated bytes, not on how they were split, so a rank may hash its entries one by one.
class StateHasher {
 public:
  StateHasher();
  ~StateHasher();
  StateHasher(const StateHasher&) = delete;
  StateHasher& operator=(const StateHasher&) = delete;

  void update(const void* data, size_t bytes);
  StateHash digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One-shot convenience.
StateHash hashBytes128(const void* data, size_t bytes);

}  // namespace cfx::ft
