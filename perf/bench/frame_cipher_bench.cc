// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark of frame protection (common layer): what crypto::FrameCipher costs per byte to seal and to open
// one frame, for integrity (AES-128-GCM over header and payload as associated data: GMAC) and encryption, at the
// frame sizes the transports send (a 4 KiB slot, a 32 KiB stripe, a 128 KiB slice). Both ends of a connection pay:
// the sender seals, the receiver opens. docs/notes/security.md turns the figures into cores per link speed.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/crypto.h"

namespace {

using cfx::crypto::FrameCipher;
using cfx::crypto::Protection;

void seal(benchmark::State& state, Protection p) {
  const std::vector<uint8_t> key(32, 0x5a);
  FrameCipher c = FrameCipher::create(p, key).value();
  std::vector<uint8_t> payload(static_cast<size_t>(state.range(0)), 0x33);
  uint8_t header[32] = {};
  uint8_t tag[cfx::crypto::kTagBytes];
  for (auto _ : state) {
    if (!c.seal(header, payload.data(), payload.data(), payload.size(), tag).ok()) state.SkipWithError("seal");
    benchmark::DoNotOptimize(tag);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void open(benchmark::State& state, Protection p) {
  // Frames sealed ahead in order, opened in order (the receiver's frame number must follow the sender's).
  const std::vector<uint8_t> key(32, 0x5a);
  FrameCipher sender = FrameCipher::create(p, key).value();
  FrameCipher receiver = FrameCipher::create(p, key).value();
  const size_t bytes = static_cast<size_t>(state.range(0));
  uint8_t header[32] = {};
  std::vector<uint8_t> payload(bytes, 0x33);
  std::vector<uint8_t> sealed(bytes);
  uint8_t tag[cfx::crypto::kTagBytes];
  for (auto _ : state) {
    state.PauseTiming();
    sealed = payload;
    if (!sender.seal(header, sealed.data(), sealed.data(), bytes, tag).ok()) state.SkipWithError("seal");
    state.ResumeTiming();
    if (!receiver.open(header, sealed.data(), bytes, tag).value()) state.SkipWithError("open");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

BENCHMARK_CAPTURE(seal, integrity, Protection::Integrity)->Arg(4 << 10)->Arg(32 << 10)->Arg(128 << 10);
BENCHMARK_CAPTURE(seal, encryption, Protection::Encryption)->Arg(4 << 10)->Arg(32 << 10)->Arg(128 << 10);
BENCHMARK_CAPTURE(open, integrity, Protection::Integrity)->Arg(4 << 10)->Arg(32 << 10)->Arg(128 << 10);
BENCHMARK_CAPTURE(open, encryption, Protection::Encryption)->Arg(4 << 10)->Arg(32 << 10)->Arg(128 << 10);

}  // namespace
