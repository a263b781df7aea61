// SPDX-License-Identifier: Apache-2.0
// All-reduce of device buffers in symmetric windows, read where they lie (collectives layer; a device program,
// device_program.h).
//
// The op's first host step (built by buildDeviceProgram) agrees that every rank found the same windows and offsets,
// and every rank's stream has reached the op, so inputs are final and outputs free. Then, in one pass:
//   1. rank r reduces its 1/n slice from every rank's send buffer, in rank order, into its own receive buffer (one
//      kernel);                                                                                          barrier
//   2. each rank copies every other owner's slice out of that owner's receive buffer;                   barrier
// The last barrier keeps every rank's stream (and its user, who may overwrite a buffer) from going on while a peer
// still reads it. In place is safe: a rank writes only its own slice in step 1, which peers read only then, and the
// kernel reads every source of an element before writing it. Cost: 3 host steps whatever the size; per rank N bytes
// read by the kernel (N/n from each rank), N/n written, N - N/n copied in from peers.
#include <vector>

#include "collectives/device_program.h"

namespace cfx::coll {

void allReduceIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b) {
  const size_t lo = d.a.count * d.me / d.n;
  const size_t hi = d.a.count * (d.me + 1) / d.n;
  std::vector<cuda::CUdeviceptr> srcs(d.n);
  for (size_t p = 0; p < d.n; ++p) srcs[p] = z.send[p] + lo * d.es;
  b.reduce(d.comm.kernels, d.a.op, z.recv[d.me] + lo * d.es, srcs, hi - lo);
  b.host(d.barrier);
  for (size_t p = 0; p < d.n; ++p) {
    const size_t plo = d.a.count * p / d.n;
    const size_t phi = d.a.count * (p + 1) / d.n;
    if (p != d.me && phi > plo) b.copy(z.recv[d.me] + plo * d.es, z.recv[p] + plo * d.es, (phi - plo) * d.es);
  }
  b.host(d.barrier);
}

}  // namespace cfx::coll
