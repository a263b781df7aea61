// SPDX-License-Identifier: Apache-2.0
// gather_perf: ncclGather to -r root (-1 = every root in turn); block r of the root's receive buffer is rank
// r's send buffer and other ranks' receive buffers stay untouched; busbw = algbw * (n-1)/n.
#include <cstring>

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

ncclResult_t run(const OpArgs& a) {
  return ncclGather(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  const size_t block = c.layout.sendCount;
  const size_t elt = typeInfo(c.type).size;
  fillPattern(c.type, c.seed, c.rank, 0, block, c.input);
  if (c.rank != c.root) {
    memcpy(c.expected, c.result, c.layout.recvCount * elt);
    return;
  }
  char* expected = static_cast<char*>(c.expected);
  for (int r = 0; r < c.nRanks; ++r) fillPattern(c.type, c.seed, r, 0, block, expected + r * block * elt);
}

const Collective kGather{OpColumn::None, false, true, true, false, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kGather); }
