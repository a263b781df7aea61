// SPDX-License-Identifier: Apache-2.0
// reduce_perf: ncclReduce to -r root (-1 = every root in turn); busbw = algbw. Non-root receive buffers must
// come back untouched.
#include <cstring>

#include "common/datatypes.h"
#include "common/harness.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

void bandwidth(size_t count, size_t eltSize, double sec, int, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize) / 1.0e9 / sec;
  *busBw = *algBw;
}

ncclResult_t run(const OpArgs& a) {
  return ncclReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.root, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  ReductionData data(c.type, c.opIndex, c.nRanks, c.seed);
  fillReductionInput(data, c.rank, 0, c.layout.sendCount, c.input);
  if (c.rank == c.root) {
    fillReductionExpected(data, 0, c.layout.recvCount, c.expected);
  } else {
    memcpy(c.expected, c.result, c.layout.recvCount * typeInfo(c.type).size);
  }
}

const Collective kReduce{OpColumn::Reduction, true, true, true, false, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kReduce); }
