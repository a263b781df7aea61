// SPDX-License-Identifier: Apache-2.0
// perf harness: the interface one benchmark (one perf/<name>.cc) implements, and the driver that runs it with
// nccl-tests' execution model: warm-up over power-of-two sizes, then per size an out-of-place and an in-place
// placement, each timed over -n iterations of -m aggregated ops and then checked -c times.
//
// Contract for implementers: every function is called on the rank's own thread; run() issues the op with a
// NULL stream, so it has completed when run() returns; prepare() only touches this rank's buffers.
#pragma once

#include <conflux.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cfx::perf {

struct Options;

// Element counts of one benchmark size (nccl-tests' GetCollByteCount).
struct Layout {
  size_t sendCount;          // elements each rank sends from
  size_t recvCount;          // elements each rank receives into, and compares
  size_t paramCount;         // the count argument given to NCCL
  size_t sendInPlaceOffset;  // in place: sendbuff = recvbuff + sendInPlaceOffset * rank (elements)
  size_t recvInPlaceOffset;  // in place: recvbuff = recvbuff + recvInPlaceOffset * rank (elements)
};

// One op as the driver issues it.
struct OpArgs {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nRanks;
  ncclComm_t comm;
  const cfxCodec* codec = nullptr;  // --codec: the op runs through runCompressed with it
  const struct Options* options = nullptr;  // the command line, for benchmarks with flags of their own
  bool checking = false;  // the op whose result a check compares (moe_perf then runs its experts' arithmetic)
  bool timed = false;     // the op is one of a placement's timed iterations
};

// One check iteration: prepare() writes this rank's input at `input` and the values expected at `result`
// after the op into `expected` (layout.recvCount elements). `result` already holds what the buffer contains
// before the op (zeros, or the input when in place), for collectives that must leave it untouched on some ranks.
struct CheckArgs {
  ncclDataType_t type;
  int opIndex;  // 0..4 = ncclSum..ncclAvg, 5 = mulsum
  int root;
  int rank;
  int nRanks;
  uint64_t seed;
  Layout layout;
  void* input;
  const void* result;
  void* expected;
  const struct Options* options = nullptr;
};

enum class OpColumn {
  Reduction,  // loops -o and prints the op name
  None,       // prints "none"
  Empty,      // prints "" (hypercube)
};

struct Collective {
  OpColumn opColumn;
  bool usesOp;           // the op reaches NCCL (false for sendrecv, which only prints it)
  bool rooted;           // loops -r (-1 = every root) and prints it; otherwise prints -1
  bool checkInPlace;     // false: the in-place column prints N/A (alltoall, sendrecv)
  bool needsPowerOfTwo;  // hypercube
  Layout (*layout)(size_t count, size_t eltSize, int nRanks);
  // algbw = bytes moved per rank-visible op / time (GB = 1e9), busbw = algbw * factor (PERFORMANCE.md).
  void (*bandwidth)(size_t paramCount, size_t eltSize, double seconds, int nRanks, double* algBw, double* busBw);
  ncclResult_t (*run)(const OpArgs& args);
  void (*prepare)(const CheckArgs& args);
  // The compressed form (cfx*Compressed with args.codec), or null where --codec does not apply.
  ncclResult_t (*runCompressed)(const OpArgs& args) = nullptr;
  // The results hold one encoding of each value (all-gather, broadcast) rather than a sum of encodings.
  bool movesData = false;
  // Bit i set: the benchmark takes -o table entry i (default: sum .. mulsum).
  uint32_t opMask = 0x3F;
  // Where results are not exact (scan_perf's affine op): the tolerance of a check, 0 for bit-exact.
  double (*tolerance)(const CheckArgs& args) = nullptr;
  // Elements of one indivisible unit of this op (scan_perf's affine groups): sizes are rounded down to whole units.
  size_t (*unitElems)(int opIndex, const struct Options& options) = nullptr;
  // Called on every rank after each placement's timed loop, outside it (it may use the communicator for its own
  // bookkeeping, as the harness does): '#' lines printed after the row, from rank 0's return (moe_perf's phase times).
  std::string (*placementNote)(ncclComm_t comm, int rank, int nRanks, bool inPlace) = nullptr;
};

// Per-rank count rounded down so each rank's block is a multiple of 16 bytes (nccl-tests' rule).
inline size_t perRankCount(size_t count, size_t eltSize, int nRanks) {
  return (count / static_cast<size_t>(nRanks)) & ~(16 / eltSize - 1);
}

// The whole program: parse flags, set up ranks, run, report. Returns the process exit status.
int runBenchmark(int argc, char** argv, const Collective& collective);

}  // namespace cfx::perf
