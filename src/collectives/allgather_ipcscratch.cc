// SPDX-License-Identifier: Apache-2.0
// All-gather, gather and broadcast of device buffers through every rank's CUDA IPC scratch (collectives layer; a
// device program, device_program.h).
//
// Per window of W bytes of one block (the whole scratch):
//   1. the ranks whose block is read (broadcast: the root; else all) copy its window into their scratch;  barrier
//   2. each rank that receives (gather: the root) copies every rank's (broadcast: the root's) window into its
//      output;                                                                                           barrier
// The second barrier keeps every scratch from being refilled while a peer still reads it. Cost per window: 2 host
// barriers; W bytes in per sender, W per block received out.
#include <algorithm>

#include "collectives/device_program.h"

namespace cfx::coll {

void allGatherIpcScratch(const DeviceOp& d, ProgramBuilder& b) {
  const bool bcast = d.a.coll == Collective::Broadcast;
  const bool gather = d.a.coll == Collective::Gather;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = d.scratchBytes();
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!bcast || d.isRoot()) b.copy(d.block(d.me), d.send(off), len);
    d.sync(b);
    if (bcast) {
      b.copy(d.recv(off), d.block(static_cast<size_t>(d.a.root)), len);
    } else if (!gather || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.recv(p * blockBytes + off), d.block(p), len);
    }
    d.sync(b);
  }
}

}  // namespace cfx::coll
