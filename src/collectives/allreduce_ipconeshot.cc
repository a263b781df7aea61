// SPDX-License-Identifier: Apache-2.0
// Small all-reduce of device buffers in one kernel, with a device-side barrier and no host step (collectives layer;
// a device program, device_program.h). Needs the communicator's flag board (CFX_CUDA_IPC_DEVICE_SYNC).
//
// The last 2 * S bytes of every rank's scratch are two slots of S bytes (CFX_CUDA_IPC_ONESHOT_BYTES); the k-th
// one-shot op of the communicator uses slot k % 2 on every rank:
//   1. each rank copies its input into its slot;                                            device-side barrier
//   2. each rank reduces every rank's slot, in rank order, into its output (one kernel).
// Every rank reduces the whole vector in the same order with the same kernel, so all get the same bits. No barrier
// ends the op: a rank refills slot k % 2 only at op k + 2, after op k + 1's barrier, which no peer reaches before
// its op k kernel has read the slot (a stream runs in order). In place is safe: the input is in the slot before the
// kernel writes the output. Cost: one copy of N bytes, the barrier (2(n-1) + 2 stream memory operations), one
// kernel reading n*N bytes; the host only enqueues.
#include <vector>

#include "collectives/device_program.h"

namespace cfx::coll {

void allReduceIpcOneShot(const DeviceOp& d, ProgramBuilder& b) {
  const size_t parity = (*d.comm.oneShotCount)++ % 2;
  const size_t slots = d.scratchBytes();  // where the windowed forms' scratch ends and the slots begin
  auto slot = [&](size_t rank) { return d.block(rank, slots + parity * d.comm.oneShotBytes); };
  b.copy(slot(d.me), d.send(0), d.a.count * d.es);
  d.sync(b);
  std::vector<cuda::CUdeviceptr> srcs(d.n);
  for (size_t p = 0; p < d.n; ++p) srcs[p] = slot(p);
  b.reduce(d.comm.kernels, d.a.op, d.recv(0), srcs, d.a.count);
}

}  // namespace cfx::coll
