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
#include <string_view>

#include "common/types.h"
#include "primitives/prims.h"
#include "primitives/task.h"

namespace cfx::coll {

using prims::Task;

enum class Collective : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
};
inline constexpr int kNumCollectives = 8;
const char* collectiveName(Collective c);  // "AllReduce", ... as NCCL prints them

// Arguments after validation, with NCCL's meaning of count for each collective (nccl.h):
//   AllReduce, Broadcast, Reduce: count elements in and out.
//   AllGather: count = sendcount per rank; recvbuff holds nRanks * count.
//   ReduceScatter: count = recvcount per rank; sendbuff holds nRanks * count.
//   AlltoAll: count per peer; both buffers hold nRanks * count.
//   Gather / Scatter: count per rank; the root's recv (send) buffer holds nRanks * count.
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
};

enum class Algorithm : uint8_t {
  Ring,       // bandwidth-optimal ring (AllReduce, AllGather, ReduceScatter)
  Chain,      // pipelined chain from or to the root (Broadcast, Reduce)
  Direct,     // every rank talks to every peer (AlltoAll, Gather, Scatter)
  RecDouble,  // recursive doubling: log2(n) steps, for small AllReduce / AllGather
  Exchange,   // pairwise exchange, both ranks combine: log2(n) message latencies, small AllReduce on 2^k ranks
};
inline constexpr int kNumAlgorithms = 5;
const char* algorithmName(Algorithm a);  // what NCCL_ALGO accepts and INFO/TUNING prints

struct Plan {
  Algorithm algorithm = Algorithm::Ring;
};

// True if `algorithm` implements `coll`, i.e. runCollective can run the pair. The planner only picks such pairs.
bool hasAlgorithm(Collective coll, Algorithm algorithm);

// Runs one collective with the given plan. The caller sets prims.setOpSeq() before. `args` and `prims` are
// held by reference and must outlive the Task. A pair without an implementation yields InvalidUsage.
Task runCollective(const CollArgs& args, Plan plan, prims::Prims& prims);

// One function per (collective, algorithm), each defined in its own file.
Task allReduceRing(const CollArgs& args, prims::Prims& prims);
Task allReduceRecDouble(const CollArgs& args, prims::Prims& prims);
Task allReduceExchange(const CollArgs& args, prims::Prims& prims);
Task allGatherRing(const CollArgs& args, prims::Prims& prims);
Task reduceScatterRing(const CollArgs& args, prims::Prims& prims);
Task broadcastChain(const CollArgs& args, prims::Prims& prims);
Task reduceChain(const CollArgs& args, prims::Prims& prims);
Task alltoAllDirect(const CollArgs& args, prims::Prims& prims);
Task gatherDirect(const CollArgs& args, prims::Prims& prims);
Task scatterDirect(const CollArgs& args, prims::Prims& prims);

// Contiguous split of `count` elements into n nearly equal parts: part i is [begin(i), begin(i+1)).
struct EvenSplit {
  size_t count;
  int n;
  size_t begin(int i) const { return count / n * i + std::min<size_t>(i, count % n); }
  size_t size(int i) const { return begin(i + 1) - begin(i); }
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }


}  // namespace cfx::coll
