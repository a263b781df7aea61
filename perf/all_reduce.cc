// SPDX-License-Identifier: Apache-2.0
// all_reduce_perf: ncclAllReduce; busbw = algbw * 2(n-1)/n.
#include "common/harness.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize) / 1.0e9 / sec;
  *busBw = *algBw * (2.0 * (n - 1) / n);
}

ncclResult_t run(const OpArgs& a) {
  return ncclAllReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  ReductionData data(c.type, c.opIndex, c.nRanks, c.seed);
  fillReductionInput(data, c.rank, 0, c.layout.sendCount, c.input);
  fillReductionExpected(data, 0, c.layout.recvCount, c.expected);
}

ncclResult_t runCompressed(const OpArgs& a) {
  return cfxAllReduceCompressed(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.codec, a.comm, nullptr);
}

const Collective kAllReduce{OpColumn::Reduction, true, false, true, false, layout, bandwidth, run, prepare,
                            runCompressed};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kAllReduce); }
