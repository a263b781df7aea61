// SPDX-License-Identifier: Apache-2.0
// hypercube_perf: an all-gather built from point-to-point steps. Step k (mask = 2^k) exchanges the 2^k blocks
// gathered so far with rank ^ mask, so log2(n) grouped send/recv pairs leave every rank with all n blocks.
// Needs a power-of-two number of ranks. busbw = algbw with algbw counting the n-1 blocks each rank receives.
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
  *algBw = static_cast<double>(count * eltSize * (n - 1)) / 1.0e9 / sec;
  *busBw = *algBw;
}

ncclResult_t run(const OpArgs& a) {
  const size_t blockBytes = a.count * typeInfo(a.type).size;
  char* recv = static_cast<char*>(a.recvbuff);
  const char* send = static_cast<const char*>(a.sendbuff);
  if (recv + a.rank * blockBytes != send) memcpy(recv + a.rank * blockBytes, send, blockBytes);
  for (int mask = 1; mask < a.nRanks; mask <<= 1) {
    int peer = a.rank ^ mask;
    int mine = a.rank & ~(mask - 1);  // first block of the run this rank holds
    int theirs = mine ^ mask;         // first block of the run the peer holds
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    ncclResult_t s = ncclSend(recv + mine * blockBytes, a.count * mask, a.type, peer, a.comm, nullptr);
    if (s == ncclSuccess) s = ncclRecv(recv + theirs * blockBytes, a.count * mask, a.type, peer, a.comm, nullptr);
    r = ncclGroupEnd();
    if (s != ncclSuccess) return s;
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

void prepare(const CheckArgs& c) {
  const size_t block = c.layout.sendCount;
  fillPattern(c.type, c.seed, c.rank, 0, block, c.input);
  char* expected = static_cast<char*>(c.expected);
  for (int r = 0; r < c.nRanks; ++r)
    fillPattern(c.type, c.seed, r, 0, block, expected + r * block * typeInfo(c.type).size);
}

const Collective kHypercube{OpColumn::Empty, false, false, true, true, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kHypercube); }
