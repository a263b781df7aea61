// SPDX-License-Identifier: Apache-2.0
// Reduce-scatter of device buffers in symmetric windows, read where they lie (collectives layer; a device program,
// device_program.h).
//
// After the op's agreeing first step (see allreduce_ipczerocopy.cc): rank r reduces block r of every rank's send
// buffer, in rank order, into its output (one kernel); barrier. Cost: 2 host steps; N/n read from each rank, N/n
// written.
#include <vector>

#include "collectives/device_program.h"

namespace cfx::coll {

void reduceScatterIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b) {
  const size_t blockBytes = d.a.count * d.es;
  std::vector<cuda::CUdeviceptr> srcs(d.n);
  for (size_t p = 0; p < d.n; ++p) srcs[p] = z.send[p] + d.me * blockBytes;
  b.reduce(d.comm.kernels, d.a.op, d.recv(0), srcs, d.a.count);
  b.host(d.barrier);
}

}  // namespace cfx::coll
