// SPDX-License-Identifier: Apache-2.0
// Reduce-scatter of device buffers through every rank's CUDA IPC scratch (collectives layer; a device program,
// device_program.h).
//
// Per window of W elements of each rank's n blocks (the scratch holds n windows):
//   1. each rank copies the window of each of its n input blocks into its scratch;                  barrier
//   2. rank r reduces window r of every rank's scratch, in rank order, straight into its output
//      (one kernel);                                                                                 barrier
// Cost per window: 2 host barriers; per rank n*W elements copied in, n*W read by the kernel, W written.
#include <algorithm>
#include <vector>

#include "collectives/device_program.h"

namespace cfx::coll {

void reduceScatterIpcScratch(const DeviceOp& d, ProgramBuilder& b) {
  const size_t windowElems = std::max<size_t>(1, d.scratchBytes() / d.n / d.es);
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    for (size_t p = 0; p < d.n; ++p) {
      b.copy(d.block(d.me, p * len * d.es), d.send((p * d.a.count + first) * d.es), len * d.es);
    }
    d.sync(b);
    std::vector<cuda::CUdeviceptr> srcs(d.n);
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, d.me * len * d.es);
    b.reduce(d.comm.kernels, d.a.op, d.recv(first * d.es), srcs, len);
    d.sync(b);
  }
}

}  // namespace cfx::coll
