// SPDX-License-Identifier: Apache-2.0
// All-gather and all-to-all of device buffers in symmetric windows, read where they lie (collectives layer; a device
// program, device_program.h).
//
// After the op's agreeing first step (see allreduce_ipczerocopy.cc):
//   all-gather: each rank copies every rank's send buffer into its block of the output (its own too, unless in
//               place);                                                                                 barrier
//   all-to-all: each rank copies block r of every rank's send buffer into block p of its output;        barrier
// Cost: 2 host steps; the bytes cross once.
#include "collectives/device_program.h"

namespace cfx::coll {

void allGatherIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b) {
  const size_t blockBytes = d.a.count * d.es;
  const bool a2a = d.a.coll == Collective::AlltoAll;
  for (size_t p = 0; p < d.n; ++p) {
    const cuda::CUdeviceptr src = z.send[p] + (a2a ? d.me * blockBytes : 0);
    const cuda::CUdeviceptr dst = d.recv(p * blockBytes);
    if (src != dst) b.copy(dst, src, blockBytes);
  }
  b.host(d.barrier);
}

}  // namespace cfx::coll
