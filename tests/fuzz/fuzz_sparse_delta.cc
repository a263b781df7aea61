// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a delta broadcast's payload as a receiver applies it (compress/sparse_delta.h): the encoding, the
// changed count and the payload come from the root, the state is the receiver's. applyDelta must refuse what cannot
// be such an encoding and then leave the state exactly as it was; what it accepts must rebuild a state in which
// only elements the payload names (every one, for a full buffer) changed.
//   byte 0: encoding (0..3, 3 unknown), 1: element size (1, 2, 4, 8), 2-3: elements (0..4095), 4-5: changed count
#include <cstring>
#include <vector>

#include "compress/sparse_delta.h"
#include "fuzz_common.h"

namespace compress = cfx::compress;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  const auto mode = static_cast<compress::DeltaMode>(data[0] % 4);
  const size_t elt = size_t{1} << (data[1] % 4);
  const size_t count = (static_cast<size_t>(data[2]) | static_cast<size_t>(data[3]) << 8) % 4096;
  const uint64_t changed = static_cast<uint64_t>(data[4]) | static_cast<uint64_t>(data[5]) << 8;
  const std::vector<uint8_t> payload(data + 6, data + size);  // its own buffer: ASan sees any overread
  std::vector<uint8_t> state(count * elt);
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::vector<uint8_t> before = state;
  const cfx::Status st = compress::applyDelta(mode, payload.data(), payload.size(), changed, state.data(), count, elt);
  if (!st.ok()) {
    cfx::fuzz::check(st.code() == cfx::Errc::InvalidArgument, "a refused delta is an InvalidArgument");
    cfx::fuzz::check(state == before, "a refused delta leaves the state as it was");
    return 0;
  }
  cfx::fuzz::check(payload.size() == compress::deltaBytes(mode, changed, count, elt), "an accepted delta has its size");
  if (mode != compress::DeltaMode::Full) {
    uint64_t differing = 0;
    for (size_t i = 0; i < count; ++i) differing += std::memcmp(&state[i * elt], &before[i * elt], elt) != 0;
    cfx::fuzz::check(differing <= changed, "no more elements change than the delta names");
  }
  return 0;
}
