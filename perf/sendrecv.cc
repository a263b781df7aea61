// SPDX-License-Identifier: Apache-2.0
// sendrecv_perf: a ring of point-to-point transfers in one group: every rank sends to rank+1 and receives from
// rank-1; busbw = algbw. It loops over -o like the reducing tests (the op only shows in the table), and its
// in-place column is not checked (N/A), as in nccl-tests.
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
  int sendPeer = (a.rank + 1) % a.nRanks;
  int recvPeer = (a.rank - 1 + a.nRanks) % a.nRanks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  ncclResult_t s = ncclSend(a.sendbuff, a.count, a.type, sendPeer, a.comm, nullptr);
  ncclResult_t v = s == ncclSuccess ? ncclRecv(a.recvbuff, a.count, a.type, recvPeer, a.comm, nullptr) : s;
  r = ncclGroupEnd();  // always close the group, even after a failed enqueue
  return v != ncclSuccess ? v : r;
}

void prepare(const CheckArgs& c) {
  fillPattern(c.type, c.seed, c.rank, 0, c.layout.sendCount, c.input);
  fillPattern(c.type, c.seed, (c.rank - 1 + c.nRanks) % c.nRanks, 0, c.layout.recvCount, c.expected);
}

const Collective kSendRecv{OpColumn::Reduction, false, false, false, false, layout, bandwidth, run, prepare};

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kSendRecv); }
