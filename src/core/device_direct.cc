// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer).
#include "core/device_direct.h"

#include <algorithm>
#include <map>

#include "common/cuda_driver.h"
#include "primitives/device/reduce_args.h"
#include "primitives/device_kernels.h"
#include "transport/cuda_ipc/ipc_scratch.h"

namespace cfx::core {

namespace {

cuda::CUdeviceptr dptr(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

bool isDevice(const void* p) { return p != nullptr && cuda::classify(p).kind == cuda::MemKind::Device; }

}  // namespace

namespace {

bool opApplies(Communicator* comm, const Op& op) {
  if (op.kind != Op::Kind::Coll) return false;
  const coll::CollArgs& a = op.args;
  if (a.count == 0) return false;
  const bool root = comm->rank() == a.root;
  if (reduces(a.coll) && (comm->nRanks() > prims::device::kMaxReduceSources || !prims::DeviceKernels::covers(a.type) ||
                          op.deviceScalar != nullptr)) {
    return false;
  }
  // Every rank computes the same size from the same call, so all take the same path. The size is the op's largest
  // buffer: n blocks for the collectives that move one block per rank.
  const bool perRank = a.coll != coll::Collective::AllReduce && a.coll != coll::Collective::Broadcast &&
                       a.coll != coll::Collective::Reduce;
  const size_t bytes = a.count * dataTypeSize(a.type) * (perRank ? static_cast<size_t>(comm->nRanks()) : 1);
  if (bytes < comm->ipcMinBytes()) return false;
  // Buffers a rank does not use (a non-root's receive buffer of reduce and gather, send buffer of broadcast and
  // scatter) may be anything, as in NCCL.
  switch (a.coll) {
    case coll::Collective::AllReduce:
    case coll::Collective::AllGather:
    case coll::Collective::ReduceScatter:
    case coll::Collective::AlltoAll:
      return isDevice(a.sendbuff) && isDevice(a.recvbuff);
    case coll::Collective::Broadcast:
    case coll::Collective::Scatter:
      return isDevice(a.recvbuff) && (!root || isDevice(a.sendbuff));
    case coll::Collective::Reduce:
    case coll::Collective::Gather:
      return isDevice(a.sendbuff) && (!root || isDevice(a.recvbuff));
  }
  return false;
}

}  // namespace

bool reduces(coll::Collective c) {
  return c == coll::Collective::AllReduce || c == coll::Collective::Reduce || c == coll::Collective::ReduceScatter;
}

const void* deviceBufferOf(const Op& op) {
  const coll::Collective c = op.args.coll;
  const bool sendSide = c == coll::Collective::Reduce || c == coll::Collective::Gather;
  return sendSide ? op.args.sendbuff : op.args.recvbuff;
}

bool p2pDirectApplies(Communicator* comm, const Op& op) {
  if (comm->ipcScratch() == nullptr || op.kind == Op::Kind::Coll || op.peer == comm->rank()) return false;
  // Zero bytes stage: a zero-byte buffer may be NULL on one side and device memory on the other.
  if (op.bytes == 0 || op.bytes < comm->ipcMinBytes()) return false;
  return isDevice(op.kind == Op::Kind::Send ? op.sendbuff : op.recvbuff);
}

bool selfDirectApplies(Communicator* comm, const Op& send, const Op& recv) {
  return comm->ipcScratch() != nullptr && send.bytes == recv.bytes && send.bytes > 0 &&
         send.bytes >= comm->ipcMinBytes() && isDevice(send.sendbuff) && isDevice(recv.recvbuff);
}

bool deviceDirectApplies(Communicator* comm, const std::vector<const Op*>& ops) {
  if (comm->ipcScratch() == nullptr || ops.empty()) return false;
  // A group runs its ops one after another, so every one must have the path; else the whole group stages.
  return std::all_of(ops.begin(), ops.end(), [comm](const Op* op) { return opApplies(comm, *op); });
}

namespace {

// One op on the device-direct path: its buffers, this rank's place, and the two steps every window ends with.
struct Direct {
  Communicator* comm;
  DeviceState& dev;
  const transport::cuda_ipc::IpcScratch& scratch;
  const coll::CollArgs& a;
  const std::function<Status()>& barrier;
  size_t es;  // element size
  size_t n;
  size_t me;

  cuda::CUdeviceptr send(size_t byteOffset) const { return dptr(a.sendbuff) + byteOffset; }
  cuda::CUdeviceptr recv(size_t byteOffset) const { return dptr(a.recvbuff) + byteOffset; }
  cuda::CUdeviceptr block(size_t rank, size_t byteOffset = 0) const {
    return scratch.block(static_cast<int>(rank)) + byteOffset;
  }
  bool isRoot() const { return static_cast<int>(me) == a.root; }
  // Waits for this rank's copies and kernels, then for every rank's: after it, what each rank wrote is visible to
  // all, and what each read may be overwritten.
  Status settle() const {
    CFX_TRY(dev.waitCopies());
    return barrier();
  }
};

// All-reduce and reduce (root >= 0), per window of W elements (half the scratch: inputs in the first half, results
// in the second): each rank copies its input window into its scratch; barrier; rank r reduces its 1/n of the window
// from every rank's scratch, in rank order, into its own result half (one kernel, no waiting inside it); barrier;
// every rank (reduce: the root) copies each owner's result slice into its output; barrier. Every element is reduced
// once, by its owner, in one fixed order, so all ranks get the same bits. Cost per window: 3 host barriers; per
// rank W bytes in, W bytes read from peers by the kernel (n slices of W/n), W/n written, W bytes copied out (reduce:
// the root only).
Status reduceDirect(const Direct& d, int root) {
  CFX_TRY_ASSIGN(const prims::DeviceKernels* kernels, prims::DeviceKernels::get(d.dev.copyContext()));
  const size_t half = d.scratch.bytes() / 2 / 256 * 256;
  const size_t windowElems = std::max<size_t>(1, half / d.es);
  cuda::CUdeviceptr srcs[prims::device::kMaxReduceSources];
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    CFX_TRY(d.dev.copyAsync(d.block(d.me), d.send(first * d.es), len * d.es));
    CFX_TRY(d.settle());
    const size_t lo = len * d.me / d.n;
    const size_t hi = len * (d.me + 1) / d.n;
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, lo * d.es);
    {
      cuda::ScopedContext scope(d.dev.copyContext());
      CFX_TRY(kernels->reduceCopy(d.a.op, d.block(d.me, half + lo * d.es), srcs, static_cast<int>(d.n), hi - lo, true,
                                  d.dev.copyStream()));
    }
    CFX_TRY(d.settle());
    if (root < 0 || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) {
        const size_t plo = len * p / d.n;
        const size_t phi = len * (p + 1) / d.n;
        CFX_TRY(d.dev.copyAsync(d.recv((first + plo) * d.es), d.block(p, half + plo * d.es), (phi - plo) * d.es));
      }
    }
    CFX_TRY(d.settle());
  }
  return Status();
}

// Reduce-scatter, per window of W elements of each rank's n blocks (the scratch holds n windows): each rank copies
// the window of each of its n input blocks into its scratch; barrier; rank r reduces window r of every rank's
// scratch, in rank order, straight into its output (one kernel); barrier. Cost per window: 2 host barriers; per rank
// n*W elements copied in, n*W read by the kernel, W written.
Status reduceScatterDirect(const Direct& d) {
  CFX_TRY_ASSIGN(const prims::DeviceKernels* kernels, prims::DeviceKernels::get(d.dev.copyContext()));
  const size_t windowElems = std::max<size_t>(1, d.scratch.bytes() / d.n / d.es);
  cuda::CUdeviceptr srcs[prims::device::kMaxReduceSources];
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    for (size_t p = 0; p < d.n; ++p) {
      CFX_TRY(d.dev.copyAsync(d.block(d.me, p * len * d.es), d.send((p * d.a.count + first) * d.es), len * d.es));
    }
    CFX_TRY(d.settle());
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, d.me * len * d.es);
    {
      cuda::ScopedContext scope(d.dev.copyContext());
      CFX_TRY(kernels->reduceCopy(d.a.op, d.recv(first * d.es), srcs, static_cast<int>(d.n), len, true,
                                  d.dev.copyStream()));
    }
    CFX_TRY(d.settle());
  }
  return Status();
}

// All-gather, gather and broadcast, per window of W bytes of one block (the whole scratch): the ranks whose block is
// read (broadcast: the root; else all) copy its window into their scratch; barrier; each rank that receives (gather:
// the root) copies every rank's (broadcast: the root's) window into its output; barrier (no scratch is refilled
// while a peer still reads it). Cost per window: 2 host barriers; W bytes in per sender, W per block received out.
Status gatherLikeDirect(const Direct& d) {
  const bool bcast = d.a.coll == coll::Collective::Broadcast;
  const bool gather = d.a.coll == coll::Collective::Gather;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = d.scratch.bytes();
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!bcast || d.isRoot()) CFX_TRY(d.dev.copyAsync(d.block(d.me), d.send(off), len));
    CFX_TRY(d.settle());
    if (bcast) {
      CFX_TRY(d.dev.copyAsync(d.recv(off), d.block(static_cast<size_t>(d.a.root)), len));
    } else if (!gather || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) CFX_TRY(d.dev.copyAsync(d.recv(p * blockBytes + off), d.block(p), len));
    }
    CFX_TRY(d.settle());
  }
  return Status();
}

// All-to-all and scatter, per window of W bytes of each of the n blocks (the scratch holds n windows): each sender
// (scatter: the root) copies the window of each of its n blocks into its scratch; barrier; rank r copies window r of
// each sender's scratch into its output; barrier. Cost per window: 2 host barriers; n*W bytes in per sender, W per
// block received out.
Status scatterLikeDirect(const Direct& d) {
  const bool scatter = d.a.coll == coll::Collective::Scatter;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = std::max<size_t>(1, d.scratch.bytes() / d.n);
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!scatter || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p)
        CFX_TRY(d.dev.copyAsync(d.block(d.me, p * len), d.send(p * blockBytes + off), len));
    }
    CFX_TRY(d.settle());
    if (scatter) {
      CFX_TRY(d.dev.copyAsync(d.recv(off), d.block(static_cast<size_t>(d.a.root), d.me * len), len));
    } else {
      for (size_t p = 0; p < d.n; ++p)
        CFX_TRY(d.dev.copyAsync(d.recv(p * blockBytes + off), d.block(p, d.me * len), len));
    }
    CFX_TRY(d.settle());
  }
  return Status();
}

}  // namespace

Status runDeviceDirect(Communicator* comm, const Op& op, const std::function<Status()>& barrier) {
  const coll::CollArgs& a = op.args;
  const Direct d{comm,
                 comm->device(),
                 *comm->ipcScratch(),
                 a,
                 barrier,
                 dataTypeSize(a.type),
                 static_cast<size_t>(comm->nRanks()),
                 static_cast<size_t>(comm->rank())};
  switch (a.coll) {
    case coll::Collective::AllReduce:
      return reduceDirect(d, -1);
    case coll::Collective::Reduce:
      return reduceDirect(d, a.root);
    case coll::Collective::ReduceScatter:
      return reduceScatterDirect(d);
    case coll::Collective::AllGather:
    case coll::Collective::Gather:
    case coll::Collective::Broadcast:
      return gatherLikeDirect(d);
    case coll::Collective::AlltoAll:
    case coll::Collective::Scatter:
      return scatterLikeDirect(d);
  }
  return Status::error(Errc::InternalError, "device-direct: unknown collective");
}

namespace {

// One chunk of a point-to-point message: what one round moves through one slot.
struct P2pChunk {
  cuda::CUdeviceptr buffer;  // the message's device buffer, at the chunk's offset
  size_t bytes;
};

// A token of the p2p protocol: the round it is for, and how many rounds its sender counts for the pair (both sides
// must count alike; a difference shows on the first token instead of a wait that never ends).
struct P2pToken {
  uint32_t round;
  uint32_t rounds;
};

}  // namespace

// Point-to-point, per round: rank r's scratch holds one slot of W = scratch/n bytes per peer, for what r sends it.
// Each message to a peer is cut into chunks of at most W in call order (a pair's messages match in call order, as
// in NCCL), and round k moves the k-th chunk of every pair: the sender copies it into its slot for the receiver,
// waits for the copy, and sends the receiver a token over the host transport; the receiver, with the token, copies
// from the sender's slot into its buffer, waits, and sends a token back, after which the sender may refill the
// slot. Both tokens of a round go as one host group, so ranks that send to each other do not wait in a cycle; a
// pair's rounds are counted alike on both sides, so a rank waits only on partners that are in the same round. Cost
// per round: two copy waits and two token exchanges (shared memory, ~10-50 us); the bytes cross once into the slot
// and once out, at device-memory or NVLink speed.
Status runDeviceDirectP2p(Communicator* comm, const std::vector<Op>& ops,
                          const std::function<Status(const std::vector<Op>&)>& exchange) {
  const transport::cuda_ipc::IpcScratch& scratch = *comm->ipcScratch();
  DeviceState& dev = comm->device();
  const size_t n = static_cast<size_t>(comm->nRanks());
  const size_t me = static_cast<size_t>(comm->rank());
  const size_t slot = std::max<size_t>(1, scratch.bytes() / n);
  std::map<int, std::vector<P2pChunk>> sends;
  std::map<int, std::vector<P2pChunk>> recvs;
  std::vector<const Op*> selfSends;
  std::vector<const Op*> selfRecvs;
  for (const Op& op : ops) {
    const bool send = op.kind == Op::Kind::Send;
    if (op.peer == static_cast<int>(me)) {  // paired by the caller (selfDirectApplies): one copy each
      (send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    const cuda::CUdeviceptr base = dptr(send ? op.sendbuff : op.recvbuff);
    std::vector<P2pChunk>& chunks = (send ? sends : recvs)[op.peer];
    for (size_t off = 0; off < op.bytes; off += slot) chunks.push_back({base + off, std::min(slot, op.bytes - off)});
  }
  size_t rounds = 0;
  for (const auto& [peer, chunks] : sends) rounds = std::max(rounds, chunks.size());
  for (const auto& [peer, chunks] : recvs) rounds = std::max(rounds, chunks.size());
  std::map<int, P2pToken> out;
  std::map<int, P2pToken> in;
  auto tokens = [&](const std::map<int, std::vector<P2pChunk>>& to, const std::map<int, std::vector<P2pChunk>>& from,
                    size_t k) -> Status {
    std::vector<Op> t;
    auto token = [&t](Op::Kind kind, int peer, P2pToken* buffer) {
      Op op;
      op.kind = kind;
      op.sendbuff = buffer;
      op.recvbuff = buffer;
      op.bytes = sizeof(P2pToken);
      op.peer = peer;
      t.push_back(op);
    };
    for (const auto& [peer, chunks] : to) {
      if (k >= chunks.size()) continue;
      out[peer] = {static_cast<uint32_t>(k), static_cast<uint32_t>(chunks.size())};
      token(Op::Kind::Send, peer, &out[peer]);
    }
    for (const auto& [peer, chunks] : from) {
      if (k < chunks.size()) token(Op::Kind::Recv, peer, &in[peer]);
    }
    if (t.empty()) return Status();
    CFX_TRY(exchange(t));
    for (const auto& [peer, chunks] : from) {
      if (k >= chunks.size()) continue;
      const P2pToken& got = in[peer];
      if (got.round != k || got.rounds != chunks.size()) {
        return Status::error(
            Errc::InvalidUsage,
            strprintf("device-direct send/recv with rank %d: it is at chunk %u of %u, this rank at chunk %zu of %zu "
                      "(the messages between the two differ in number or size, or CFX_CUDA_IPC_BYTES differs)",
                      peer, got.round, got.rounds, k, chunks.size()));
      }
    }
    return Status();
  };
  if (selfSends.size() != selfRecvs.size()) {
    return Status::error(Errc::InternalError, "device-direct: unpaired messages to self");
  }
  for (size_t i = 0; i < selfSends.size(); ++i) {
    CFX_TRY(dev.copyAsync(dptr(selfRecvs[i]->recvbuff), dptr(selfSends[i]->sendbuff), selfSends[i]->bytes));
  }
  if (rounds == 0) CFX_TRY(dev.waitCopies());  // else the first round's wait covers them
  for (size_t k = 0; k < rounds; ++k) {
    for (const auto& [peer, chunks] : sends) {
      if (k < chunks.size()) {
        CFX_TRY(dev.copyAsync(scratch.block(static_cast<int>(me)) + static_cast<size_t>(peer) * slot, chunks[k].buffer,
                              chunks[k].bytes));
      }
    }
    CFX_TRY(dev.waitCopies());
    CFX_TRY(tokens(sends, recvs, k));  // "my slot for you holds chunk k"
    for (const auto& [peer, chunks] : recvs) {
      if (k < chunks.size()) {
        CFX_TRY(dev.copyAsync(chunks[k].buffer, scratch.block(peer) + me * slot, chunks[k].bytes));
      }
    }
    CFX_TRY(dev.waitCopies());
    CFX_TRY(tokens(recvs, sends, k));  // "I have read chunk k from your slot"
  }
  return Status();
}

}  // namespace cfx::core
