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

Calibration agreeOn(const std::vector<Calibration>& perRank) {
  Calibration agreed;
  for (size_t c = 0; c < kNumLinkClasses; ++c) {
    std::vector<LinkFigures> got;
    for (const Calibration& r : perRank) {
      if (r.measured[c]) got.push_back(*r.measured[c]);
    }
    if (got.empty()) continue;
    // Bandwidth and latency separately: each its own median, so one slow rank moves neither.
    std::vector<double> gbps, lat;
    for (const LinkFigures& f : got) gbps.push_back(f.gbps), lat.push_back(f.latencyUs);
    const size_t mid = (got.size() - 1) / 2;
    std::nth_element(gbps.begin(), gbps.begin() + static_cast<std::ptrdiff_t>(mid), gbps.end());
    std::nth_element(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(mid), lat.end());
    agreed.measured[c] = LinkFigures{gbps[mid], lat[mid]};
  }
  return agreed;
}

}  // namespace cfx::topo
