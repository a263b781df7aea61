// SPDX-License-Identifier: Apache-2.0
// all_gather_perf: ncclAllGather; block r of every receive buffer is rank r's send buffer;
// busbw = algbw * (n-1)/n with algbw counting all n blocks.
#include "common/datatypes.h"
#include "common/harness.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t eltSize, int n) {
  size_t base = perRankCount(count, eltSize, n);
  return {base, base * n, base, base, 0};
}

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize * n) / 1.0e9 / sec;
  *busBw = *algBw * (static_cast<double>(n - 1) / n);
}

ncclResult_t run(const OpArgs& a) { return ncclAllGather(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, nullptr); }

void prepare(const CheckArgs& c) {
  const size_t block = c.layout.sendCount;
  fillPattern(c.type, c.seed, c.rank, 0, block, c.input);
  char* expected = static_cast<char*>(c.expected);
  for (int r = 0; r < c.nRanks; ++r)
    fillPattern(c.type, c.seed, r, 0, block, expected + r * block * typeInfo(c.type).size);
}

ncclResult_t runCompressed(const OpArgs& a) {
  return cfxAllGatherCompressed(a.sendbuff, a.recvbuff, a.count, a.type, a.codec, a.comm, nullptr);
}

const Collective kAllGather{OpColumn::None, false,   false,   true,          false,
                           layout,          bandwidth, run, prepare, runCompressed, /*movesData=*/true};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kAllGather); }
