// SPDX-License-Identifier: Apache-2.0
// scatter_perf: ncclScatter from -r root (-1 = every root in turn); rank r receives block r of the root's send
// buffer; busbw = algbw * (n-1)/n.
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
  return ncclScatter(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  if (c.rank == c.root) fillPattern(c.type, c.seed, c.root, 0, c.layout.sendCount, c.input);
  fillPattern(c.type, c.seed, c.root, c.rank * c.layout.recvCount, c.layout.recvCount, c.expected);
}

const Collective kScatter{OpColumn::None, false, true, true, false, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kScatter); }
