// SPDX-License-Identifier: Apache-2.0
// One collective case end to end over LoopbackWorld: lay out NCCL's buffers (in place or not, at an unaligned
// address, with guard bytes), fill inputs with small integers, run the algorithm on every rank, and compare
// each rank's output with the closed-form result, bit for bit (test support).
//
// Inputs are small integers chosen per operator so that every partial result is exact in every tested type;
// then any order of reduction gives the same bits and the expected value can be computed directly. The one
// exception is floating average on a rank count that is not a power of two (1/n is inexact): it is checked
// against a tolerance, and for AllReduce still for bit-identity across ranks.
#pragma once

#include <string>
#include <vector>

#include "collectives/collective.h"
#include "transport/transport.h"

namespace cfx::testing {

struct CollCase {
  coll::Collective coll = coll::Collective::AllReduce;
  coll::Algorithm algorithm = coll::Algorithm::Ring;
  int nRanks = 1;
  size_t count = 0;
  DataType type = DataType::Float32;
  RedOpKind op = RedOpKind::Sum;
  bool inPlace = false;
  int root = 0;
  size_t misalign = 0;  // bytes added to every user buffer's address
  transport::FifoGeometry geometry{256, 2};
  size_t directThreshold = 0;  // LoopbackWorld's direct (single-copy) threshold; 0: slices only
  std::vector<uint64_t> hosts;  // the host of every rank, for the plan's layout (Hier); empty: all on one host
  std::vector<int64_t> devices;  // the device of every rank on its host (Hier3); empty: one device per host
  int ringChunkSlices = 1;      // Prims::ringChunkSlices(), at most geometry.nSlots - 1

  std::string describe() const;
  std::string hostsText() const;
};

struct CaseStats {
  size_t directReads = 0;  // direct (single-copy) reads the transports served
};

// Runs the case and reports mismatches through gtest (EXPECT/ADD_FAILURE), at most a few per case.
CaseStats runCase(const CollCase& c);

// The counts every sweep covers for n ranks: 0, 1, 2, n - 1, a prime, one slice of elements -1/0/+1, and
// three ring loops plus 7 (the ring's loop is two slices per rank).
std::vector<size_t> sweepCounts(int nRanks, DataType type, size_t sliceBytes);

// Whether a sweep case is left out of the sanitizer runs (CFX_TEST_QUICK), which look for races and memory errors
// rather than arithmetic (the full run checks every combination): they keep one type per element size that moves
// data differently (4 bytes, and 1 for odd offsets) and one op per lowering (plain Max, post-dividing Avg,
// pre-multiplying PreMulSum); the thread sanitizer run keeps Float32 with Max and PreMulSum.
bool skippedInQuickRuns(DataType type, RedOpKind op);
// Whether the quick runs (CFX_TEST_QUICK: the sanitizer builds) leave out this placement of the sweep's `k`-th count:
// they take one per count, alternating, so both still run for every rank count, type and op (placement changes which
// buffers alias, not how a count is cut).
bool placementSkippedInQuickRuns(size_t k, bool inPlace);

inline constexpr int kSweepRanks[] = {1, 2, 3, 4, 5, 7, 8};
inline constexpr DataType kSweepTypes[] = {DataType::Float32, DataType::Int32, DataType::Float16, DataType::Int8};
inline constexpr RedOpKind kSweepOps[] = {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max,
                                          RedOpKind::Min, RedOpKind::Avg,  RedOpKind::PreMulSum};

// Runs `algorithm` on host layouts of several shapes (2x2, 2x3, 3x2, 2x4, 4x2, hosts interleaved in rank order,
// uneven hosts, one rank per host) for every sweep type, the given ops (none for data collectives: {Sum}), the
// sweep counts plus `bigCounts` for Float32 and Int8 (enough for pipelined segments), in and out of place. Stops
// at the first failing case. `types`, where not empty, narrows the sweep types to those listed.
void sweepHostLayouts(coll::Collective coll, coll::Algorithm algorithm, const std::vector<RedOpKind>& ops,
                      const std::vector<size_t>& bigCounts, bool everyRoot = false,
                      const std::vector<DataType>& types = {});

// The same for the 3-level layouts (Hier3): 2 hosts x 2 devices x 2 ranks in rank order and interleaved, 3 x 2 x 2
// (all but CFX_TEST_QUICK runs), and the shapes where it falls back to Hier (one rank per device, uneven devices,
// one host).
void sweepDeviceLayouts(coll::Collective coll, coll::Algorithm algorithm, const std::vector<RedOpKind>& ops,
                        const std::vector<size_t>& bigCounts, bool everyRoot = false);

// The roots a rooted sweep covers for n ranks: 0, n - 1 and the middle, without repeats.
std::vector<int> sweepRoots(int nRanks);

}  // namespace cfx::testing
