// SPDX-License-Identifier: Apache-2.0
// All-reduce and reduce of device buffers through every rank's CUDA IPC scratch (collectives layer; a device
// program, device_program.h).
//
// Per window of W elements (half the scratch: inputs in the first half, results in the second):
//   1. each rank copies its input window into its scratch;                                          barrier
//   2. rank r reduces its 1/n of the window from every rank's scratch, in rank order, into its own
//      result half (one kernel, no waiting inside it);                                               barrier
//   3. every rank (reduce: the root) copies each owner's result slice into its output;               barrier
// Every element is reduced once, by its owner, in one fixed order, so all ranks get the same bits. Cost per window:
// 3 host barriers; per rank W bytes in, W bytes read from peers by the kernel (n slices of W/n), W/n written, W
// bytes copied out (reduce: the root only).
#include <algorithm>
#include <vector>

#include "collectives/device_program.h"

namespace cfx::coll {

void allReduceIpcScratch(const DeviceOp& d, ProgramBuilder& b) {
  const int root = d.a.coll == Collective::Reduce ? d.a.root : -1;
  const size_t half = d.scratchBytes() / 2 / 256 * 256;
  const size_t windowElems = std::max<size_t>(1, half / d.es);
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    b.copy(d.block(d.me), d.send(first * d.es), len * d.es);
    d.sync(b);
    const size_t lo = len * d.me / d.n;
    const size_t hi = len * (d.me + 1) / d.n;
    std::vector<cuda::CUdeviceptr> srcs(d.n);
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, lo * d.es);
    b.reduce(d.comm.kernels, d.a.op, d.block(d.me, half + lo * d.es), srcs, hi - lo);
    d.sync(b);
    if (root < 0 || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) {
        const size_t plo = len * p / d.n;
        const size_t phi = len * (p + 1) / d.n;
        b.copy(d.recv((first + plo) * d.es), d.block(p, half + plo * d.es), (phi - plo) * d.es);
      }
    }
    d.sync(b);
  }
}

}  // namespace cfx::coll
