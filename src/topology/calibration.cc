// SPDX-License-Identifier: Apache-2.0
// The local micro-benchmark behind CFX_TOPO_CALIBRATE (topology layer).
#include "topology/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace cfx::topo {

Calibration measureLocalCalibration(const TopologyView& view) {
  using Clock = std::chrono::steady_clock;
  // Large enough to leave the caches, small enough to stay a blip at init.
  constexpr size_t kBigBytes = 16u << 20;
  constexpr int kRounds = 3;
  std::vector<char> src(kBigBytes, 1), dst(kBigBytes, 0);
  double bestBig = 1e9;
  for (int i = 0; i < kRounds; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), kBigBytes);
    bestBig = std::min(bestBig, std::chrono::duration<double>(Clock::now() - t0).count());
    src[i] = dst[kBigBytes - 1 - i];  // keeps the copy observable so it is not optimised away
  }
  Calibration c;
  // Latency needs a peer thread to ping-pong with, which on a 2-core host measures the scheduler rather than
  // the memory; it keeps the view's figure.
  c.measured[static_cast<size_t>(LinkClass::Memory)] =
      LinkFigures{kBigBytes / std::max(bestBig, 1e-9) / 1e9, view.figures(LinkClass::Memory).latencyUs};
  return c;
}

}  // namespace cfx::topo
