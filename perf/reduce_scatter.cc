// SPDX-License-Identifier: Apache-2.0
// reduce_scatter_perf: ncclReduceScatter; rank r receives block r of the reduced n*recvcount elements;
// busbw = algbw * (n-1)/n with algbw counting all n blocks.
#include "common/harness.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t eltSize, int n) {
  size_t base = perRankCount(count, eltSize, n);
  return {base * n, base, base, 0, base};
}

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize * n) / 1.0e9 / sec;
  *busBw = *algBw * (static_cast<double>(n - 1) / n);
}

ncclResult_t run(const OpArgs& a) {
  return ncclReduceScatter(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  ReductionData data(c.type, c.opIndex, c.nRanks, c.seed);
  fillReductionInput(data, c.rank, 0, c.layout.sendCount, c.input);
  fillReductionExpected(data, c.rank * c.layout.recvCount, c.layout.recvCount, c.expected);
}

ncclResult_t runCompressed(const OpArgs& a) {
  return cfxReduceScatterCompressed(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.codec, a.comm, nullptr);
}

const Collective kReduceScatter{OpColumn::Reduction, true, false, true, false, layout, bandwidth, run, prepare,
                                runCompressed};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kReduceScatter); }
