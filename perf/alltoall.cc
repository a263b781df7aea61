// SPDX-License-Identifier: Apache-2.0
// alltoall_perf: ncclAlltoAll; block j of rank i's send buffer lands in block i of rank j's receive buffer;
// busbw = algbw * (n-1)/n with algbw counting all n blocks. The in-place column runs with sendbuff ==
// recvbuff and is not checked (N/A), as in nccl-tests: NCCL does not define in-place all-to-all.
#include "common/datatypes.h"
#include "common/harness.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t eltSize, int n) {
  size_t base = perRankCount(count, eltSize, n);
  return {base * n, base * n, base, 0, 0};
}

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize * n) / 1.0e9 / sec;
  *busBw = *algBw * (static_cast<double>(n - 1) / n);
}

ncclResult_t run(const OpArgs& a) { return ncclAlltoAll(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, nullptr); }

void prepare(const CheckArgs& c) {
  const size_t block = c.layout.paramCount;
  fillPattern(c.type, c.seed, c.rank, 0, c.layout.sendCount, c.input);
  char* expected = static_cast<char*>(c.expected);
  for (int r = 0; r < c.nRanks; ++r) {
    fillPattern(c.type, c.seed, r, c.rank * block, block, expected + r * block * typeInfo(c.type).size);
  }
}

const Collective kAlltoAll{OpColumn::None, false, false, false, false, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kAlltoAll); }
