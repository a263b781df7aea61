// SPDX-License-Identifier: Apache-2.0
// What an algorithm is given, and the table of algorithms (collectives layer).
//
// Every algorithm is a coroutine over prims::Prims verbs in its own file, `<collective>_<algorithm>.cc`,
// opening with its explanation and cost. It runs identically on every rank and must give every rank
// bit-identical results: each element is reduced in one fixed order, and ranks that do not compute an
// element receive the computed bytes rather than recomputing them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "compress/codec.h"
#include "primitives/prims.h"
#include "primitives/coro.h"

namespace cfx::coll {

using prims::Coro;

enum class Collective : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  BroadcastDelta,  // cfxBroadcastDelta: a broadcast that sends what changed since the last one (Broadcast's counts)
  Scan,            // cfxScan / cfxExScan: the prefix over ranks, inclusive or exclusive (CollArgs::exclusive)
  AllToAllv,       // ncclAllToAllv / cfxAllToAllv: counts and displacements per peer (CollArgs::alltoallv)
  MoeDispatch,     // cfxMoeExchangeCounts / cfxMoeDispatch: tokens to their experts' ranks (CollArgs::moe, moe.h)
  MoeCombine,      // cfxMoeCombine: the experts' outputs back to their tokens, weighted and summed (CollArgs::moe)
};
inline constexpr int kNumCollectives = 13;
const char* collectiveName(Collective c);  // "AllReduce", ... as NCCL prints them

// A compressed op (conflux.h cfxCodec): the codec it asked for and what the compressed algorithms need beside it.
struct CompressArgs {
  explicit CompressArgs(const compress::Codec& c) : codec(c) {}
  compress::Codec codec;
  // Where the wire carries the codec: on the links where the planner's model says it pays (Auto), on every link
  // (Always), or nowhere (Never: the op runs plain).
  enum class Mode : uint8_t { Auto, Always, Never };
  Mode mode = Mode::Auto;
  // Error feedback: fp32 values aligned with the op's send buffer (all-reduce, all-gather and broadcast: count;
  // reduce-scatter: nRanks * count), read and updated by every encoding of this rank's data; null: none.
  float* residual = nullptr;
  bool average = false;  // avg: the sum divided by nRanks (in fp32, before the result is encoded)
  bool measureError = false;  // core also runs the op plain and records the relative L2 error (not the algorithms)
};

// A delta broadcast's state on this rank (cfxBroadcastDelta): the last state it broadcast or received, kept by core
// per buffer, and what the op did.
struct DeltaArgs {
  char* previous = nullptr;      // count elements: the state of the last delta broadcast of this buffer
  bool hasPrevious = false;      // false: no earlier state here (first call, or after a reset or a failure)
  uint64_t previousHash[2] = {};  // XXH3-128 of `previous`, when hasPrevious
  // Set by the algorithm: the encoding used, the changed elements, and the payload bytes.
  int mode = 0;  // compress::DeltaMode
  uint64_t changed = 0;
  uint64_t payloadBytes = 0;
};

// An all-to-all-v (ncclAllToAllv) in bytes: per peer, what this rank sends and where it starts in sendbuff, and what
// it receives and where it lands in recvbuff. Receive regions do not overlap (the api checks). inPlace: sendbuff is
// recvbuff with the same counts and offsets (MPI_IN_PLACE's meaning), so the algorithm sends from a copy.
struct AlltoallvArgs {
  std::vector<size_t> sendBytes, sendOffset, recvBytes, recvOffset;
  size_t sendExtent = 0;  // bytes of sendbuff and recvbuff the op touches: what core stages for device buffers
  size_t recvExtent = 0;
  bool inPlace = false;
  bool recvGaps = false;  // recvbuff has bytes within its extent that no block writes (staging must keep them)
};

struct MoeArgs;  // moe.h

// Arguments after validation, with NCCL's meaning of count for each collective (nccl.h):
//   AllReduce, Broadcast, Reduce: count elements in and out.
//   AllGather: count = sendcount per rank; recvbuff holds nRanks * count.
//   ReduceScatter: count = recvcount per rank; sendbuff holds nRanks * count.
//   AlltoAll: count per peer; both buffers hold nRanks * count.
//   Gather / Scatter: count per rank; the root's recv (send) buffer holds nRanks * count.
//   BroadcastDelta: as Broadcast.
//   Scan: count elements in and out on every rank; rank r receives x_0 (+) ... (+) x_r (inclusive) or
//         x_0 (+) ... (+) x_{r-1} (exclusive; rank 0: the op's identity, or its buffer untouched for User ops).
//   AllToAllv: count unused; the shape is in `alltoallv`.
//   MoeDispatch, MoeCombine: count unused; buffers and routing are in `moe` (sendbuff and recvbuff are null).
// In-place forms follow NCCL's pointer rules; algorithms must handle sendbuff == recvbuff (or the in-place
// offset) without reading data they have already overwritten.
struct CollArgs {
  Collective coll = Collective::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  DataType type = DataType::Float32;
  ReduceOp op;   // lowered (see common/types.h); meaningful for reducing collectives only
  int root = 0;  // rooted collectives only
  bool exclusive = false;  // Scan only
  // Compressed ops: the codec and its arguments (shared, so copies of the args stay cheap); null for plain ops.
  std::shared_ptr<const CompressArgs> compress;
  std::shared_ptr<DeltaArgs> delta;  // BroadcastDelta only
  // Ops of variable shape: the caller's arrays, copied at the call (an op may run after its call returned).
  std::shared_ptr<const AlltoallvArgs> alltoallv;  // AllToAllv only
  std::shared_ptr<MoeArgs> moe;                    // MoeDispatch and MoeCombine only
};

enum class Algorithm : uint8_t {
  Ring,          // bandwidth-optimal ring (AllReduce, AllGather, ReduceScatter)
  Chain,         // pipelined chain from or to the root (Broadcast, Reduce)
  Direct,        // every rank talks to every peer at once (AlltoAll, Gather, Scatter; AllReduce, AllGather,
                 // ReduceScatter and Broadcast on one host, where receivers read senders' buffers in place)
  RecDouble,     // recursive doubling: log2(n) steps, for small AllReduce / AllGather
  Exchange,      // pairwise exchange, both ranks combine: log2(n) message latencies, small AllReduce on 2^k ranks
  BiRing,        // two rings at once, one each way, on half the buffer each (AllReduce, AllGather, ReduceScatter)
  Hier,          // 2 levels: within each host, then across hosts among ranks of one local index (AllReduce, AllGather,
                 // ReduceScatter, Broadcast)
  Rabenseifner,  // recursive halving then doubling: the ring's bandwidth at log2(n) latency (AllReduce)
  Tree,          // double binary tree, half the buffer up and down each (AllReduce; NCCL_ALGO=Tree)
  Hier3,         // 3 levels: within each device, across the devices of a host, across hosts (AllReduce, AllGather,
                 // ReduceScatter)
  QuantOnce,     // compressed: each rank's data encoded once, each chunk summed in fp32 by its owner and encoded once
                 // for everyone (AllReduce, ReduceScatter, AllGather)
  SparseGather,  // compressed top-k: every rank's sparse contribution to everyone, summed in rank order (AllReduce)
  Blelloch,      // work-efficient up-sweep/down-sweep over a tree of ranks (Scan); Scan also has Chain (pipelined),
                 // RecDouble (Hillis-Steele) and Hier (chains within hosts, doubling across them)
  // Device programs (device_program.h): device buffers GPU to GPU between the ranks of one host, not staged.
  IpcScratch,    // through every rank's CUDA IPC scratch, window by window (every collective)
  IpcZeroCopy,   // read where they lie, in symmetric windows (AllReduce, AllGather, ReduceScatter, AlltoAll)
  IpcOneShot,    // small AllReduce: one copy, a device-side barrier, one kernel, no host step
};
inline constexpr int kNumAlgorithms = 16;
const char* algorithmName(Algorithm a);  // what NCCL_ALGO accepts and INFO/TUNING prints

// Where the ranks run, as far as algorithms care: which ranks share a host, and a device below it. The same on every
// rank (core/ builds it from the topology view every rank derives alike: the host hashes every rank exchanged at
// init, or NCCL_TOPO_FILE's placement; planner.h layoutOf), so every rank makes the same plan.
struct Layout {
  std::vector<int> hostOf;                  // per rank: its host, hosts numbered in order of their lowest rank
  std::vector<std::vector<int>> hostRanks;  // per host: its ranks, ascending
  std::vector<int> localIndex;              // per rank: its position in hostRanks[hostOf[rank]]

  int nHosts() const { return static_cast<int>(hostRanks.size()); }
  int nRanks() const { return static_cast<int>(hostOf.size()); }
  // Every host runs the same number of ranks, so local index i exists on every host.
  bool uniform() const;
  // The 2-level algorithms (Hier) have two levels to work with: several hosts, each with the same number (> 1) of
  // ranks. Otherwise they run the flat ring, which is what they reduce to.
  bool hierarchical() const { return nHosts() > 1 && hostRanks.front().size() > 1 && uniform(); }
  // The level below hosts: ranks of one host that share a device (a GPU, or a NUMA node for CPU ranks), where the
  // topology places them so (NCCL_TOPO_FILE). Empty when nothing is known below hosts.
  std::vector<int> deviceOf;                  // per rank: its device, devices numbered in order of their lowest rank
  std::vector<std::vector<int>> deviceRanks;  // per device: its ranks, ascending
  std::vector<std::vector<int>> hostDevices;  // per host: its devices, in order of their lowest rank
  std::vector<int> deviceIndex;               // per rank: its position in deviceRanks[deviceOf[rank]]

  // The 3-level algorithms (Hier3) have three levels to work with: hierarchical(), and every host holds the same
  // number (> 1) of devices, each running the same number (> 1) of ranks. Otherwise they run Hier.
  bool threeLevel() const;
  // From one host id per rank (any values; equal means same host).
  static Layout fromHostIds(const std::vector<uint64_t>& hostIds);
  // Also with one device id per rank (any values; equal on one host means same device).
  static Layout fromPlaces(const std::vector<uint64_t>& hostIds, const std::vector<int64_t>& deviceIds);
};

struct Plan {
  Algorithm algorithm = Algorithm::Ring;
  const Layout* layout = nullptr;  // the communicator's; required by Hier, which fails InvalidUsage without it
  // The codec the wire carries (the op's CompressArgs codec), or null for a plain plan. A compressed plan runs the
  // compressed form of `algorithm`: QuantOnce, SparseGather, Ring (re-encoding at every hop), Hier (plain within
  // hosts, QuantOnce across them), Chain (Broadcast: encoded once at the root, forwarded verbatim).
  const compress::Codec* codec = nullptr;
};

// True if `algorithm` implements `coll`, i.e. runCollective can run the pair. The planner only picks such pairs.
bool hasAlgorithm(Collective coll, Algorithm algorithm);
// True if `algorithm` has a compressed form for `coll` that carries `format` (top-k only SparseGather for AllReduce;
// the dense formats everything else).
bool hasCompressedAlgorithm(Collective coll, Algorithm algorithm, compress::Format format);

// Runs one collective with the given plan (its layout, if any, must outlive the Coro). A plan with a codec runs the
// compressed form and needs args.compress. The caller sets prims.setOpSeq() before. `args` and `prims` are
// held by reference and must outlive the Coro. A pair without an implementation yields InvalidUsage.
Coro runCollective(const CollArgs& args, Plan plan, prims::Prims& prims);

// One function per (collective, algorithm), each defined in its own file.
Coro allReduceRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceRecDouble(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceExchange(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro broadcastChain(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceChain(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro alltoAllDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro gatherDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro scatterDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceBiRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherBiRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterBiRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceHier(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceRabenseifner(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherHier(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro broadcastDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceTree(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro broadcastHier(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterHier(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceHier3(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherHier3(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterHier3(const CollArgs& args, Plan plan, prims::Prims& prims);
// Compressed forms (plan.codec set; encoded.h has their building blocks).
Coro allReduceQuantOnce(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceRequantRing(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allReduceSparseGather(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro reduceScatterQuantOnce(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro allGatherQuantOnce(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro broadcastEncoded(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro broadcastDeltaChain(const CollArgs& args, Plan plan, prims::Prims& prims);
// All-Scan (scan.h has the building blocks).
Coro scanChain(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro scanRecDouble(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro scanBlelloch(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro scanHier(const CollArgs& args, Plan plan, prims::Prims& prims);
// Variable shapes: all-to-all-v, and MoE dispatch and combine (moe.h).
Coro allToAllvDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro moeDispatchDirect(const CollArgs& args, Plan plan, prims::Prims& prims);
Coro moeCombineDirect(const CollArgs& args, Plan plan, prims::Prims& prims);

// What every message of the op carries (prims/op_stamp.h): the collective, datatype and op as a kind, and a digest
// of the count, root, codec, scan mode and an ordered op's shape. Core stamps each op with it
// (Prims::setOpStamp), so ranks whose calls differ in any of these fail on the first slot, naming both kinds.
prims::OpStamp opStamp(const CollArgs& args);
// Broadcast, Reduce, Gather, Scatter and BroadcastDelta: the collectives whose root means something.
bool rootedCollective(Collective c);
// A kind of opStamp by name: "AllReduce(sum, float32)".
std::string stampKindName(uint32_t kind);
// This rank's call in full: "AllReduce(sum, float32, count 1000)", "Broadcast(float32, count 10, root 3)".
std::string describeCall(const CollArgs& args);
// The deeper of allReduceTree's two trees on `nRanks` ranks: the hops a segment climbs and then descends.
int treeDepth(int nRanks);

// Strands for prims::Parallel lists whose length is only known at run time: one verb, or one local copy
// (Prims::copy, streaming by opBytes) that runs when the strand starts, so the strands before it are under way.
Coro verbStrand(prims::TransferAwaiter verb);
Coro copyStrand(void* dst, const void* src, size_t bytes, size_t opBytes);
// The owner's side of a direct reduction: out = own (+) what ranks r + 1, r + 2, ..., r - 1 send it, in that fixed
// order, post-op on the last peer (recvReduceCopy, then recvCombineCopy). `op` must outlive the Coro.
Coro reduceFromPeers(const char* own, char* out, size_t count, const ReduceOp& op, prims::Prims& prims);
// How many pipelined segments Hier cuts an all-reduce of `bytes` into (the planner prices the overlap with it). The
// all-gather and reduce-scatter pass the bytes one rank moves across hosts (H blocks) and localRanks 1.
size_t hierSegments(size_t bytes, int localRanks, size_t sliceBytes);
// The segments every block of a hierarchical all-gather or reduce-scatter is cut into: hierSegments on the bytes
// one rank moves across `nHosts` hosts, at most one per element of a block of `count` elements of `eltBytes`.
size_t hierBlockSegments(size_t count, size_t eltBytes, int nHosts, size_t sliceBytes);

// Contiguous split of `count` elements into n nearly equal parts: part i is [begin(i), begin(i+1)).
struct EvenSplit {
  size_t count;
  int n;
  size_t begin(int i) const { return count / n * i + std::min<size_t>(i, count % n); }
  size_t size(int i) const { return begin(i + 1) - begin(i); }
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// Whether `c` takes its shape from an argument struct of its own (AllToAllv, MoE) rather than a count.
constexpr bool variableShape(Collective c) {
  return c == Collective::AllToAllv || c == Collective::MoeDispatch || c == Collective::MoeCombine;
}


}  // namespace cfx::coll
