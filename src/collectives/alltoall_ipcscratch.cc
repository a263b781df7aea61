// SPDX-License-Identifier: Apache-2.0
// All-to-all and scatter of device buffers through every rank's CUDA IPC scratch (collectives layer; a device
// program, device_program.h).
//
// Per window of W bytes of each of the n blocks (the scratch holds n windows):
//   1. each sender (scatter: the root) copies the window of each of its n blocks into its scratch;   barrier
//   2. rank r copies window r of each sender's scratch into its output;                              barrier
// Cost per window: 2 host barriers; n*W bytes in per sender, W per block received out.
#include <algorithm>

#include "collectives/device_program.h"

namespace cfx::coll {

void alltoAllIpcScratch(const DeviceOp& d, ProgramBuilder& b) {
  const bool scatter = d.a.coll == Collective::Scatter;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = std::max<size_t>(1, d.scratchBytes() / d.n);
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!scatter || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.block(d.me, p * len), d.send(p * blockBytes + off), len);
    }
    d.sync(b);
    if (scatter) {
      b.copy(d.recv(off), d.block(static_cast<size_t>(d.a.root), d.me * len), len);
    } else {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.recv(p * blockBytes + off), d.block(p, d.me * len), len);
    }
    d.sync(b);
  }
}

}  // namespace cfx::coll
