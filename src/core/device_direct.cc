// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer).
#include "core/device_direct.h"

#include <algorithm>

#include "common/cuda_driver.h"
#include "transport/cuda_ipc/ipc_scratch.h"

namespace cfx::core {

namespace {

cuda::CUdeviceptr dptr(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

bool isDevice(const void* p) { return p != nullptr && cuda::classify(p).kind == cuda::MemKind::Device; }

}  // namespace

bool deviceDirectApplies(Communicator* comm, const std::vector<const Op*>& ops) {
  if (comm->ipcScratch() == nullptr || ops.size() != 1 || ops[0]->kind != Op::Kind::Coll) return false;
  const coll::CollArgs& a = ops[0]->args;
  if (a.count == 0) return false;
  switch (a.coll) {
    case coll::Collective::AllGather: return isDevice(a.sendbuff) && isDevice(a.recvbuff);
    case coll::Collective::Broadcast:
      return isDevice(a.recvbuff) && (comm->rank() != a.root || isDevice(a.sendbuff));
    default: return false;
  }
}

Status runDeviceDirect(Communicator* comm, const Op& op, const std::function<Status()>& barrier) {
  const transport::cuda_ipc::IpcScratch& scratch = *comm->ipcScratch();
  DeviceState& dev = comm->device();
  const coll::CollArgs& a = op.args;
  const size_t bytes = a.count * dataTypeSize(a.type);
  const size_t window = scratch.bytes();
  const int n = comm->nRanks();
  const int me = comm->rank();
  for (size_t off = 0; off < bytes; off += window) {
    const size_t len = std::min(window, bytes - off);
    if (a.coll == coll::Collective::AllGather) {
      CFX_TRY(dev.copyAsync(scratch.block(me), dptr(a.sendbuff) + off, len));
      CFX_TRY(dev.waitCopies());
      CFX_TRY(barrier());
      for (int p = 0; p < n; ++p) {
        CFX_TRY(dev.copyAsync(dptr(a.recvbuff) + static_cast<size_t>(p) * bytes + off, scratch.block(p), len));
      }
    } else {  // Broadcast
      if (me == a.root) CFX_TRY(dev.copyAsync(scratch.block(me), dptr(a.sendbuff) + off, len));
      CFX_TRY(dev.waitCopies());
      CFX_TRY(barrier());
      CFX_TRY(dev.copyAsync(dptr(a.recvbuff) + off, scratch.block(a.root), len));
    }
    CFX_TRY(dev.waitCopies());
    CFX_TRY(barrier());
  }
  return Status();
}

}  // namespace cfx::core
