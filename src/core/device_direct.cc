// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer).
#include "core/device_direct.h"

#include <algorithm>

#include "common/cuda_driver.h"
#include "primitives/device/reduce_args.h"
#include "primitives/device_kernels.h"
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
  // Every rank computes the same size from the same call, so all take the same path.
  const size_t bytes = a.count * dataTypeSize(a.type) *
                       (a.coll == coll::Collective::AllGather ? static_cast<size_t>(comm->nRanks()) : 1);
  if (bytes < comm->ipcMinBytes()) return false;
  switch (a.coll) {
    case coll::Collective::AllGather: return isDevice(a.sendbuff) && isDevice(a.recvbuff);
    case coll::Collective::Broadcast:
      return isDevice(a.recvbuff) && (comm->rank() != a.root || isDevice(a.sendbuff));
    case coll::Collective::AllReduce:
      return comm->nRanks() <= prims::device::kMaxReduceSources && prims::DeviceKernels::covers(a.type) &&
             ops[0]->deviceScalar == nullptr && isDevice(a.sendbuff) && isDevice(a.recvbuff);
    default: return false;
  }
}

namespace {

// All-reduce, per window of W elements (half the scratch: inputs in the first half, results in the second): each
// rank copies its input window into its scratch; barrier; rank r reduces its 1/n of the window from every rank's
// scratch, in rank order, into its own result half (one kernel, no waiting inside it); barrier; every rank copies
// each owner's result slice into its output; barrier. Every element is reduced once, by its owner, in one fixed
// order, so all ranks get the same bits. Cost per window: 3 host barriers; per rank W bytes in, W bytes read from
// peers by the kernel (n slices of W/n), W/n written, W bytes copied out.
Status allReduceDirect(Communicator* comm, const Op& op, const std::function<Status()>& barrier) {
  const transport::cuda_ipc::IpcScratch& scratch = *comm->ipcScratch();
  DeviceState& dev = comm->device();
  const coll::CollArgs& a = op.args;
  const size_t es = dataTypeSize(a.type);
  const size_t half = scratch.bytes() / 2 / 256 * 256;
  const size_t windowElems = half / es;
  const size_t n = static_cast<size_t>(comm->nRanks());
  const size_t me = static_cast<size_t>(comm->rank());
  CFX_TRY_ASSIGN(const prims::DeviceKernels* kernels, prims::DeviceKernels::get(dev.copyContext()));
  cuda::CUdeviceptr srcs[prims::device::kMaxReduceSources];
  for (size_t first = 0; first < a.count; first += windowElems) {
    const size_t len = std::min(windowElems, a.count - first);
    CFX_TRY(dev.copyAsync(scratch.block(static_cast<int>(me)), dptr(a.sendbuff) + first * es, len * es));
    CFX_TRY(dev.waitCopies());
    CFX_TRY(barrier());
    const size_t lo = len * me / n;
    const size_t hi = len * (me + 1) / n;
    for (size_t p = 0; p < n; ++p) srcs[p] = scratch.block(static_cast<int>(p)) + lo * es;
    {
      cuda::ScopedContext scope(dev.copyContext());
      CFX_TRY(kernels->reduceCopy(a.op, scratch.block(static_cast<int>(me)) + half + lo * es, srcs, static_cast<int>(n),
                                  hi - lo, true, dev.copyStream()));
    }
    CFX_TRY(dev.waitCopies());
    CFX_TRY(barrier());
    for (size_t p = 0; p < n; ++p) {
      const size_t plo = len * p / n;
      const size_t phi = len * (p + 1) / n;
      CFX_TRY(dev.copyAsync(dptr(a.recvbuff) + (first + plo) * es, scratch.block(static_cast<int>(p)) + half + plo * es,
                            (phi - plo) * es));
    }
    CFX_TRY(dev.waitCopies());
    CFX_TRY(barrier());
  }
  return Status();
}

}  // namespace

Status runDeviceDirect(Communicator* comm, const Op& op, const std::function<Status()>& barrier) {
  if (op.args.coll == coll::Collective::AllReduce) return allReduceDirect(comm, op, barrier);
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
