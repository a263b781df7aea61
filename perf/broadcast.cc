// SPDX-License-Identifier: Apache-2.0
// broadcast_perf: ncclBroadcast from -r root (-1 = every root in turn); busbw = algbw.
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
  return ncclBroadcast(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, nullptr);
}

void prepare(const CheckArgs& c) {
  if (c.rank == c.root) fillPattern(c.type, c.seed, c.root, 0, c.layout.sendCount, c.input);
  fillPattern(c.type, c.seed, c.root, 0, c.layout.recvCount, c.expected);
}

ncclResult_t runCompressed(const OpArgs& a) {
  return cfxBroadcastCompressed(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.codec, a.comm, nullptr);
}

const Collective kBroadcast{OpColumn::None, false,   true,          true, false,
                           layout,          bandwidth, run, prepare, runCompressed, /*movesData=*/true};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kBroadcast); }
