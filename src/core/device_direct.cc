// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer).
#include "core/device_direct.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include "common/cuda_driver.h"
#include "primitives/device/reduce_args.h"
#include "primitives/device_kernels.h"
#include "transport/cuda_ipc/ipc_scratch.h"
#include "transport/cuda_ipc/ipc_window.h"

namespace cfx::core {

namespace {

cuda::CUdeviceptr dptr(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

bool isDevice(const void* p) { return p != nullptr && cuda::classify(p).kind == cuda::MemKind::Device; }

// Whether the collective's device-direct form runs a reduce kernel.
bool reduces(coll::Collective c) {
  return c == coll::Collective::AllReduce || c == coll::Collective::Reduce || c == coll::Collective::ReduceScatter;
}

bool opApplies(Communicator* comm, const Op& op) {
  if (op.kind != Op::Kind::Coll) return false;
  const coll::CollArgs& a = op.args;
  if (a.count == 0) return false;
  // A codec runs on the host, and ordered combines have no device kernel: such ops stage.
  if (a.compress != nullptr || a.delta != nullptr || (reduces(a.coll) && a.op.ordered())) return false;
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
    case coll::Collective::BroadcastDelta:
    case coll::Collective::Scan:
    case coll::Collective::AllToAllv:
    case coll::Collective::MoeDispatch:
    case coll::Collective::MoeCombine:
      return false;  // no device form: they stage (the delta's state lives in host memory)
  }
  return false;
}

}  // namespace

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

// Appends to a program: device work gathers into the current segment until a host step ends it.
class Builder {
 public:
  explicit Builder(DirectProgram* program) : program_(program) {}
  void copy(cuda::CUdeviceptr dst, cuda::CUdeviceptr src, size_t bytes) {
    work_.push_back([=](cuda::CUstream s) {
      return cuda::check(cuda::driver()->memcpyDtoDAsync(dst, src, bytes, s), "cuMemcpyDtoDAsync (device-direct)");
    });
  }
  void work(std::function<Status(cuda::CUstream)> w) { work_.push_back(std::move(w)); }
  void host(std::function<Status()> step) {
    program_->segments.push_back([work = std::move(work_)](cuda::CUstream s) -> Status {
      for (const auto& w : work) CFX_TRY(w(s));
      return Status();
    });
    work_.clear();
    program_->hostSteps.push_back(std::move(step));
  }

 private:
  DirectProgram* program_;
  std::vector<std::function<Status(cuda::CUstream)>> work_;
};

// One collective on the device-direct path: its buffers, this rank's place, and the barrier every step ends with.
struct Direct {
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
};

// All-reduce and reduce (root >= 0), per window of W elements (half the scratch: inputs in the first half, results
// in the second): each rank copies its input window into its scratch; barrier; rank r reduces its 1/n of the window
// from every rank's scratch, in rank order, into its own result half (one kernel, no waiting inside it); barrier;
// every rank (reduce: the root) copies each owner's result slice into its output; barrier. Every element is reduced
// once, by its owner, in one fixed order, so all ranks get the same bits. Cost per window: 3 host barriers; per
// rank W bytes in, W bytes read from peers by the kernel (n slices of W/n), W/n written, W bytes copied out (reduce:
// the root only).
void reduceDirect(const Direct& d, const prims::DeviceKernels* kernels, int root, Builder& b) {
  const size_t half = d.scratch.bytes() / 2 / 256 * 256;
  const size_t windowElems = std::max<size_t>(1, half / d.es);
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    b.copy(d.block(d.me), d.send(first * d.es), len * d.es);
    b.host(d.barrier);
    const size_t lo = len * d.me / d.n;
    const size_t hi = len * (d.me + 1) / d.n;
    std::array<cuda::CUdeviceptr, prims::device::kMaxReduceSources> srcs{};
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, lo * d.es);
    b.work([kernels, op = d.a.op, dst = d.block(d.me, half + lo * d.es), srcs, n = d.n,
            count = hi - lo](cuda::CUstream s) {
      return kernels->reduceCopy(op, dst, srcs.data(), static_cast<int>(n), count, true, s);
    });
    b.host(d.barrier);
    if (root < 0 || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) {
        const size_t plo = len * p / d.n;
        const size_t phi = len * (p + 1) / d.n;
        b.copy(d.recv((first + plo) * d.es), d.block(p, half + plo * d.es), (phi - plo) * d.es);
      }
    }
    b.host(d.barrier);
  }
}

// Reduce-scatter, per window of W elements of each rank's n blocks (the scratch holds n windows): each rank copies
// the window of each of its n input blocks into its scratch; barrier; rank r reduces window r of every rank's
// scratch, in rank order, straight into its output (one kernel); barrier. Cost per window: 2 host barriers; per rank
// n*W elements copied in, n*W read by the kernel, W written.
void reduceScatterDirect(const Direct& d, const prims::DeviceKernels* kernels, Builder& b) {
  const size_t windowElems = std::max<size_t>(1, d.scratch.bytes() / d.n / d.es);
  for (size_t first = 0; first < d.a.count; first += windowElems) {
    const size_t len = std::min(windowElems, d.a.count - first);
    for (size_t p = 0; p < d.n; ++p) {
      b.copy(d.block(d.me, p * len * d.es), d.send((p * d.a.count + first) * d.es), len * d.es);
    }
    b.host(d.barrier);
    std::array<cuda::CUdeviceptr, prims::device::kMaxReduceSources> srcs{};
    for (size_t p = 0; p < d.n; ++p) srcs[p] = d.block(p, d.me * len * d.es);
    b.work([kernels, op = d.a.op, dst = d.recv(first * d.es), srcs, n = d.n, len](cuda::CUstream s) {
      return kernels->reduceCopy(op, dst, srcs.data(), static_cast<int>(n), len, true, s);
    });
    b.host(d.barrier);
  }
}

// All-gather, gather and broadcast, per window of W bytes of one block (the whole scratch): the ranks whose block is
// read (broadcast: the root; else all) copy its window into their scratch; barrier; each rank that receives (gather:
// the root) copies every rank's (broadcast: the root's) window into its output; barrier (no scratch is refilled
// while a peer still reads it). Cost per window: 2 host barriers; W bytes in per sender, W per block received out.
void gatherLikeDirect(const Direct& d, Builder& b) {
  const bool bcast = d.a.coll == coll::Collective::Broadcast;
  const bool gather = d.a.coll == coll::Collective::Gather;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = d.scratch.bytes();
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!bcast || d.isRoot()) b.copy(d.block(d.me), d.send(off), len);
    b.host(d.barrier);
    if (bcast) {
      b.copy(d.recv(off), d.block(static_cast<size_t>(d.a.root)), len);
    } else if (!gather || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.recv(p * blockBytes + off), d.block(p), len);
    }
    b.host(d.barrier);
  }
}

// All-to-all and scatter, per window of W bytes of each of the n blocks (the scratch holds n windows): each sender
// (scatter: the root) copies the window of each of its n blocks into its scratch; barrier; rank r copies window r of
// each sender's scratch into its output; barrier. Cost per window: 2 host barriers; n*W bytes in per sender, W per
// block received out.
void scatterLikeDirect(const Direct& d, Builder& b) {
  const bool scatter = d.a.coll == coll::Collective::Scatter;
  const size_t blockBytes = d.a.count * d.es;
  const size_t window = std::max<size_t>(1, d.scratch.bytes() / d.n);
  for (size_t off = 0; off < blockBytes; off += window) {
    const size_t len = std::min(window, blockBytes - off);
    if (!scatter || d.isRoot()) {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.block(d.me, p * len), d.send(p * blockBytes + off), len);
    }
    b.host(d.barrier);
    if (scatter) {
      b.copy(d.recv(off), d.block(static_cast<size_t>(d.a.root), d.me * len), len);
    } else {
      for (size_t p = 0; p < d.n; ++p) b.copy(d.recv(p * blockBytes + off), d.block(p, d.me * len), len);
    }
    b.host(d.barrier);
  }
}

// What the scratch forms' first barrier agrees on: a value no zero-copy op's fingerprint is expected to take.
constexpr uint64_t kScratchForm = 0x5c7a7c4f00000001ull;

// A zero-copy op's buffers as this rank addresses them: every rank's send buffer, and (all-reduce) every rank's
// receive buffer, through the windows they lie in. `fingerprint` names the windows and offsets: the op's first
// host step checks every rank computed the same one.
struct ZeroCopy {
  std::vector<cuda::CUdeviceptr> send;
  std::vector<cuda::CUdeviceptr> recv;
  uint64_t fingerprint = 0;
};

// Every rank's copy of [p, p + bytes), where p lies in a zero-copy window of this rank and the same offset fits in
// every peer's window (NCCL_WIN_COLL_SYMMETRIC: the offset is the same on every rank). Empty where not.
std::vector<cuda::CUdeviceptr> symmetricSpans(Communicator* comm, const void* p, size_t bytes, uint64_t* fingerprint) {
  const Communicator::WindowSpan span = comm->findWindow(p, bytes);
  if (span.window == nullptr) return {};
  std::vector<cuda::CUdeviceptr> all(static_cast<size_t>(comm->nRanks()));
  for (int r = 0; r < comm->nRanks(); ++r) {
    if (span.offset + bytes > span.window->bytes(r)) return {};
    all[static_cast<size_t>(r)] = span.window->base(r) + span.offset;
  }
  // Offsets and sizes, which every rank must share; not addresses, which differ between processes.
  *fingerprint = (*fingerprint * 1000003u) ^ (span.offset * 31u + span.window->bytes(0));
  return all;
}

std::optional<ZeroCopy> zeroCopyOf(Communicator* comm, const Op& op) {
  const coll::CollArgs& a = op.args;
  const size_t es = dataTypeSize(a.type);
  const size_t n = static_cast<size_t>(comm->nRanks());
  ZeroCopy z;
  switch (a.coll) {
    case coll::Collective::AllReduce:
      z.send = symmetricSpans(comm, a.sendbuff, a.count * es, &z.fingerprint);
      z.recv = symmetricSpans(comm, a.recvbuff, a.count * es, &z.fingerprint);
      if (z.send.empty() || z.recv.empty()) return std::nullopt;
      return z;
    case coll::Collective::AllGather:
      if (a.sendbuff == static_cast<const char*>(a.recvbuff) + static_cast<size_t>(comm->rank()) * a.count * es) {
        // In place, each rank's input is its block of its output, at a different offset on every rank: found
        // through the output's window. The mark makes a rank in place and one not fail the agreement.
        z.send = symmetricSpans(comm, a.recvbuff, a.count * es * n, &z.fingerprint);
        for (size_t p = 0; p < z.send.size(); ++p) z.send[p] += p * a.count * es;
        z.fingerprint ^= 0x9e3779b97f4a7c15ull;
      } else {
        z.send = symmetricSpans(comm, a.sendbuff, a.count * es, &z.fingerprint);
      }
      break;
    case coll::Collective::AlltoAll:
      // In place, a rank would overwrite blocks of its buffer that peers are still reading: the scratch path.
      if (a.sendbuff == a.recvbuff) return std::nullopt;
      [[fallthrough]];
    case coll::Collective::ReduceScatter:
      z.send = symmetricSpans(comm, a.sendbuff, a.count * es * n, &z.fingerprint);
      break;
    default:
      return std::nullopt;
  }
  if (z.send.empty()) return std::nullopt;
  return z;
}

// Zero-copy forms. Each starts with an agreeing barrier: every rank's stream has reached the op, so its inputs are
// final and its outputs free, and every rank found the same windows and offsets. Each ends with a barrier, so that
// no rank's stream goes on (and its user overwrites a buffer) while a peer still reads it. Nothing is windowed: one
// pass whatever the size.
//
// All-reduce: rank r reduces its 1/n slice from every rank's send buffer, in rank order, into its own receive
// buffer (one kernel); barrier; each rank copies every other owner's slice out of the owner's receive buffer;
// barrier. In place is safe: a rank writes only its own slice in the first pass, which peers read only then, and
// the kernel reads every source of an element before writing it. Cost: 3 host steps; per rank N bytes read by the
// kernel (N/n from each rank), N/n written, N - N/n copied in from peers.
void allReduceZeroCopy(const Direct& d, const ZeroCopy& z, const prims::DeviceKernels* kernels, Builder& b) {
  const size_t lo = d.a.count * d.me / d.n;
  const size_t hi = d.a.count * (d.me + 1) / d.n;
  std::array<cuda::CUdeviceptr, prims::device::kMaxReduceSources> srcs{};
  for (size_t p = 0; p < d.n; ++p) srcs[p] = z.send[p] + lo * d.es;
  if (hi > lo) {
    b.work([kernels, op = d.a.op, dst = z.recv[d.me] + lo * d.es, srcs, n = d.n, count = hi - lo](cuda::CUstream s) {
      return kernels->reduceCopy(op, dst, srcs.data(), static_cast<int>(n), count, true, s);
    });
  }
  b.host(d.barrier);
  for (size_t p = 0; p < d.n; ++p) {
    const size_t plo = d.a.count * p / d.n;
    const size_t phi = d.a.count * (p + 1) / d.n;
    if (p != d.me && phi > plo) b.copy(z.recv[d.me] + plo * d.es, z.recv[p] + plo * d.es, (phi - plo) * d.es);
  }
  b.host(d.barrier);
}

// Reduce-scatter: rank r reduces block r of every rank's send buffer, in rank order, into its output (one kernel);
// barrier. Cost: 2 host steps; N/n read from each rank, N/n written.
void reduceScatterZeroCopy(const Direct& d, const ZeroCopy& z, const prims::DeviceKernels* kernels, Builder& b) {
  std::array<cuda::CUdeviceptr, prims::device::kMaxReduceSources> srcs{};
  const size_t blockBytes = d.a.count * d.es;
  for (size_t p = 0; p < d.n; ++p) srcs[p] = z.send[p] + d.me * blockBytes;
  b.work([kernels, op = d.a.op, dst = d.recv(0), srcs, n = d.n, count = d.a.count](cuda::CUstream s) {
    return kernels->reduceCopy(op, dst, srcs.data(), static_cast<int>(n), count, true, s);
  });
  b.host(d.barrier);
}

// All-gather: each rank copies every rank's send buffer into its block of the output (its own too, unless in
// place); barrier. All-to-all: each rank copies block r of every rank's send buffer into block p of its output;
// barrier. Cost: 2 host steps; the bytes cross once.
void gatherZeroCopy(const Direct& d, const ZeroCopy& z, Builder& b) {
  const size_t blockBytes = d.a.count * d.es;
  const bool a2a = d.a.coll == coll::Collective::AlltoAll;
  for (size_t p = 0; p < d.n; ++p) {
    const cuda::CUdeviceptr src = z.send[p] + (a2a ? d.me * blockBytes : 0);
    const cuda::CUdeviceptr dst = d.recv(p * blockBytes);
    if (src != dst) b.copy(dst, src, blockBytes);
  }
  b.host(d.barrier);
}

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

// What the host steps of one group's sends and receives share.
struct P2pState {
  std::map<int, std::vector<P2pChunk>> sends;  // by peer, chunks in call order
  std::map<int, std::vector<P2pChunk>> recvs;
  std::map<int, P2pToken> out;
  std::map<int, P2pToken> in;
};

// Round k's tokens: one to each peer of `to` that has a chunk k, one from each peer of `from` that has one, as one
// host group; each token received is checked against this rank's count for the pair.
Status exchangeTokens(P2pState& st, bool ready, size_t k,
                      const std::function<Status(const std::vector<Op>&)>& exchange) {
  const auto& to = ready ? st.sends : st.recvs;
  const auto& from = ready ? st.recvs : st.sends;
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
    st.out[peer] = {static_cast<uint32_t>(k), static_cast<uint32_t>(chunks.size())};
    token(Op::Kind::Send, peer, &st.out[peer]);
  }
  for (const auto& [peer, chunks] : from) {
    if (k < chunks.size()) token(Op::Kind::Recv, peer, &st.in[peer]);
  }
  if (t.empty()) return Status();
  CFX_TRY(exchange(t));
  for (const auto& [peer, chunks] : from) {
    if (k >= chunks.size()) continue;
    const P2pToken& got = st.in[peer];
    if (got.round != k || got.rounds != chunks.size()) {
      return Status::error(
          Errc::InvalidUsage,
          strprintf("device-direct send/recv with rank %d: it is at chunk %u of %u, this rank at chunk %zu of %zu "
                    "(the messages between the two differ in number or size, or CFX_CUDA_IPC_BYTES differs)",
                    peer, got.round, got.rounds, k, chunks.size()));
    }
  }
  return Status();
}

// Point-to-point, per round: rank r's scratch holds one slot of W = scratch/n bytes per peer, for what r sends it.
// Each message to a peer is cut into chunks of at most W in call order (a pair's messages match in call order, as
// in NCCL), and round k moves the k-th chunk of every pair: the sender copies it into its slot for the receiver
// and, once the copy is done, sends the receiver a token over the host transport; the receiver, with the token,
// copies from the sender's slot into its buffer and, once that is done, sends a token back, after which the sender
// may refill the slot. Both tokens of a round go as one host group, so ranks that send to each other do not wait in
// a cycle; a pair's rounds are counted alike on both sides, so a rank waits only on partners that are in the same
// round. Sends to self, paired with their receives by the caller, are one copy each. Cost per round: two token
// exchanges (shared memory, ~10-50 us) and two waits for the device; the bytes cross once into the slot and once
// out, at device-memory or NVLink speed.
void p2pDirect(Communicator* comm, const std::vector<Op>& ops, const DirectHost& host, Builder& b) {
  const transport::cuda_ipc::IpcScratch& scratch = *comm->ipcScratch();
  const size_t n = static_cast<size_t>(comm->nRanks());
  const size_t me = static_cast<size_t>(comm->rank());
  const size_t slot = std::max<size_t>(1, scratch.bytes() / n);
  auto st = std::make_shared<P2pState>();
  std::vector<const Op*> selfSends;
  std::vector<const Op*> selfRecvs;
  for (const Op& op : ops) {
    const bool send = op.kind == Op::Kind::Send;
    if (op.peer == static_cast<int>(me)) {
      (send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    const cuda::CUdeviceptr base = dptr(send ? op.sendbuff : op.recvbuff);
    std::vector<P2pChunk>& chunks = (send ? st->sends : st->recvs)[op.peer];
    for (size_t off = 0; off < op.bytes; off += slot) chunks.push_back({base + off, std::min(slot, op.bytes - off)});
  }
  for (size_t i = 0; i < selfSends.size() && i < selfRecvs.size(); ++i) {
    b.copy(dptr(selfRecvs[i]->recvbuff), dptr(selfSends[i]->sendbuff), selfSends[i]->bytes);
  }
  size_t rounds = 0;
  for (const auto& [peer, chunks] : st->sends) rounds = std::max(rounds, chunks.size());
  for (const auto& [peer, chunks] : st->recvs) rounds = std::max(rounds, chunks.size());
  const auto exchange = host.exchange;
  for (size_t k = 0; k < rounds; ++k) {
    for (const auto& [peer, chunks] : st->sends) {
      if (k < chunks.size()) {
        b.copy(scratch.block(static_cast<int>(me)) + static_cast<size_t>(peer) * slot, chunks[k].buffer,
               chunks[k].bytes);
      }
    }
    b.host([st, k, exchange] { return exchangeTokens(*st, true, k, exchange); });  // "my slot holds chunk k"
    for (const auto& [peer, chunks] : st->recvs) {
      if (k < chunks.size()) b.copy(chunks[k].buffer, scratch.block(peer) + me * slot, chunks[k].bytes);
    }
    b.host([st, k, exchange] { return exchangeTokens(*st, false, k, exchange); });  // "I have read chunk k"
  }
  if (rounds == 0) b.host([] { return Status(); });  // sends to self only: their copies end the program
}

}  // namespace

Result<DirectProgram> buildDirectProgram(Communicator* comm, cuda::CUcontext ctx, const std::vector<Op>& colls,
                                         const std::vector<Op>& p2p, const DirectHost& host) {
  DirectProgram program;
  Builder b(&program);
  // An empty first step: the stream has reached the op, but its device work waits for the progress thread, which
  // starts the op only after the communicator's earlier ones. The scratch is one per communicator, and an earlier
  // op's last segment on another stream may still be reading it until that op's last barrier.
  b.host([] { return Status(); });
  if (!p2p.empty()) p2pDirect(comm, p2p, host, b);
  const prims::DeviceKernels* kernels = nullptr;
  for (const Op& op : colls) {
    const coll::CollArgs& a = op.args;
    if (reduces(a.coll) && kernels == nullptr) {
      // A module: loaded here, on the caller's thread, like every CUDA object (see DeviceState::prepare).
      CFX_TRY_ASSIGN(kernels, prims::DeviceKernels::get(ctx));
    }
    const std::optional<ZeroCopy> z = zeroCopyOf(comm, op);
    // Each rank picks the form from its own buffers, so a rank whose buffer is outside every window while a peer's
    // is inside one takes the scratch form where the peer takes the zero-copy one: the scratch form's first barrier
    // agrees too, on a value no zero-copy op has, so that shows on every rank as the broken symmetric promise it is
    // rather than as two different operations.
    std::function<Status()> scratchBarrier;
    if (!z) {
      scratchBarrier = [agreed = std::make_shared<bool>(false), agree = host.agree, barrier = host.barrier]() {
        if (*agreed) return barrier();
        *agreed = true;  // the op's host steps run one after another on the progress thread
        return agree(kScratchForm);
      };
    }
    const Direct d{*comm->ipcScratch(),
                   a,
                   z ? host.barrier : scratchBarrier,
                   dataTypeSize(a.type),
                   static_cast<size_t>(comm->nRanks()),
                   static_cast<size_t>(comm->rank())};
    if (z) {
      b.host([agree = host.agree, v = z->fingerprint] { return agree(v); });
      if (a.coll == coll::Collective::AllReduce) {
        allReduceZeroCopy(d, *z, kernels, b);
      } else if (a.coll == coll::Collective::ReduceScatter) {
        reduceScatterZeroCopy(d, *z, kernels, b);
      } else {
        gatherZeroCopy(d, *z, b);
      }
      continue;
    }
    switch (a.coll) {
      case coll::Collective::AllReduce:
        reduceDirect(d, kernels, -1, b);
        break;
      case coll::Collective::Reduce:
        reduceDirect(d, kernels, a.root, b);
        break;
      case coll::Collective::ReduceScatter:
        reduceScatterDirect(d, kernels, b);
        break;
      case coll::Collective::AllGather:
      case coll::Collective::Gather:
      case coll::Collective::Broadcast:
        gatherLikeDirect(d, b);
        break;
      case coll::Collective::AlltoAll:
      case coll::Collective::Scatter:
        scatterLikeDirect(d, b);
        break;
      case coll::Collective::BroadcastDelta:
      case coll::Collective::Scan:
      case coll::Collective::AllToAllv:
      case coll::Collective::MoeDispatch:
      case coll::Collective::MoeCombine:
        break;  // never device-direct (opApplies says so)
    }
  }
  return program;
}

}  // namespace cfx::core
