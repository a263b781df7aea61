// SPDX-License-Identifier: Apache-2.0
// moe_perf: one MoE layer's communication, dispatch then combine, in nccl-tests' table and flags (perf/README.md).
//
//   --mode fused    cfxMoeExchangeCounts + cfxMoeDispatch, then cfxMoeCombine (conflux.h): rows go straight from the
//                   token tensor into the transport and from it to their expert-major positions, and back into
//                   per-token fp32 sums.
//   --mode unfused  what a framework does on a library without them, built on ours: permute the (token, k) rows into
//                   a buffer grouped by expert, ncclAlltoAll of the per-expert counts, ncclAllToAllv of the rows,
//                   unpack them into expert-major order; for the combine the reverse, then the weighted sum per token.
// Both count the routing every iteration (the fused exchange, the unfused count all-to-all), as a training step must.
//
// Columns: size is one rank's token data, tokens x hidden x element bytes (--tokens fixes it, or -b/-e sweep it in
// whole tokens); count is tokens x hidden; type is --dtype; redop "none"; time is one dispatch + combine. algbw is the
// token data over that time; busbw = algbw x 2 topk (n - 1) / n, the bytes a rank would put on its link if every
// (token, expert) pair travelled separately out and back under uniform routing, so a fused run that sends a token
// once per rank shows above the link's rate. Each row is followed by '#' lines with the dispatch and combine times
// apart and their GB/s of token data. In place, the combine writes over the tokens.
//
// -c 1 makes the "experts" multiply their rows by 1 + (e mod 8) / 8 and compares every token of the combine's output
// with a sequential reference: tokens are small integers and the weights powers of two, so the fp32 sums are exact
// and the output is the reference rounded once, bit for bit. Experts are dealt to ranks in contiguous blocks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/datatypes.h"
#include "common/harness.h"
#include "common/options.h"
#include "common/verify.h"
#include "conflux_nccl_ext.h"
#include "moe_pipeline.h"

namespace {

using namespace cfx::perf;
using Clock = std::chrono::steady_clock;

#define MOE_TRY(call)                        \
  do {                                       \
    const ncclResult_t moeRes = (call);      \
    if (moeRes != ncclSuccess) return moeRes; \
  } while (0)

// A buffer from ncclMemAlloc (memory the library can share between processes, as the harness's own), grown on need.
class Buffer {
 public:
  ~Buffer() {
    if (p_ != nullptr) ncclMemFree(p_);
  }
  char* get(size_t bytes) {
    if (bytes > bytes_) {
      if (p_ != nullptr) ncclMemFree(p_);
      p_ = nullptr;
      bytes_ = 0;
      if (ncclMemAlloc(reinterpret_cast<void**>(&p_), bytes) != ncclSuccess) return nullptr;
      std::memset(p_, 0, bytes);
      bytes_ = bytes;
    }
    return p_;
  }

 private:
  char* p_ = nullptr;
  size_t bytes_ = 0;
};

// This rank's transport for the shared unfused pipeline: our ncclAlltoAll and ncclAllToAllv, and scratch from
// ncclMemAlloc, which the library can read across processes in place (the unfused path at its best).
struct NcclTransport {
  ncclComm_t comm = nullptr;
  ncclDataType_t type = ncclBfloat16;
  Buffer scratch[3];
  int countsAlltoall(const int32_t* send, int32_t* recv, size_t perPeer) {
    return ncclAlltoAll(send, recv, perPeer, ncclInt32, comm, nullptr);
  }
  int rowsAlltoallv(const void* send, const size_t* sendBytes, const size_t* sendAt, void* recv,
                    const size_t* recvBytes, const size_t* recvAt) {
    return ncclAllToAllv(send, sendBytes, sendAt, recv, recvBytes, recvAt, ncclUint8, comm, nullptr);
  }
  char* buffer(int which, size_t bytes) { return scratch[which].get(bytes); }
};

// One rank's routing and buffers, kept from op to op (the routing is drawn once per size).
struct RankState {
  size_t tokens = SIZE_MAX;
  cfxmoe::Shape shape;
  cfxmoe::Routing routing;
  cfxMoe_t moe = nullptr;
  ncclComm_t moeComm = nullptr;
  Buffer recv;
  NcclTransport transport;
  double dispatchSec = 0, combineSec = 0;
  int timedOps = 0;
  size_t tokenBytes = 0;  // one rank's token data: what the '#' lines' GB/s count
  ~RankState() { cfxMoeDestroy(moe); }
};
thread_local std::unique_ptr<RankState> tState;

RankState& state() {
  if (!tState) tState = std::make_unique<RankState>();
  return *tState;
}

void drawRouting(RankState& s, const Options& o, size_t tokens, int rank, int nRanks) {
  s.tokens = tokens;
  s.shape = cfxmoe::Shape{tokens, static_cast<size_t>(o.hidden), o.topk, o.experts, o.routing, rank, nRanks};
  s.routing = cfxmoe::drawRouting(s.shape);
}

float expertScale(int e) { return 1.0f + static_cast<float>(e % 8) / 8.0f; }

// The "experts" of -c: every row of local expert l (counts[l] rows, in order) times its expert's scale.
void runExperts(char* rows, const std::vector<long long>& counts, int first, size_t hidden, ncclDataType_t type) {
  const size_t elt = typeInfo(type).size;
  size_t row = 0;
  for (size_t l = 0; l < counts.size(); ++l) {
    const float scale = expertScale(first + static_cast<int>(l));
    for (long long i = 0; i < counts[l]; ++i, ++row) {
      for (size_t h = 0; h < hidden; ++h) {
        char* p = rows + (row * hidden + h) * elt;
        storeElement(type, loadElement(type, p) * scale, p);
      }
    }
  }
}

ncclResult_t runFused(RankState& s, const OpArgs& a, const Options& o) {
  const size_t hidden = static_cast<size_t>(o.hidden);
  const size_t rowBytes = hidden * typeInfo(a.type).size;
  if (s.moe == nullptr || s.moeComm != a.comm) {
    cfxMoeDestroy(s.moe);
    const cfxMoeConfig config = {o.experts, o.topk, hidden, a.type, a.type, ncclInt32, nullptr, cfxMoeNormal, 0};
    MOE_TRY(cfxMoeCreate(a.comm, &config, &s.moe));
    s.moeComm = a.comm;
  }
  const auto t0 = Clock::now();
  size_t rows = 0;
  MOE_TRY(cfxMoeExchangeCounts(s.moe, s.routing.ids.data(), s.tokens, &rows, nullptr));
  char* recv = s.recv.get(std::max<size_t>(rows, 1) * rowBytes);
  if (recv == nullptr) return ncclSystemError;
  MOE_TRY(cfxMoeDispatch(s.moe, a.sendbuff, nullptr, s.routing.ids.data(), s.routing.weights.data(), s.tokens, recv,
                         nullptr, nullptr, nullptr));
  const auto t1 = Clock::now();
  if (a.checking) {
    std::vector<long long> counts(static_cast<size_t>(o.experts));
    cfxMoeCounts c{};
    c.perLocalExpert = counts.data();
    MOE_TRY(cfxMoeGetCounts(s.moe, &c));
    counts.resize(static_cast<size_t>(c.numLocalExperts));
    runExperts(recv, counts, cfxmoe::firstExpert(a.rank, a.nRanks, o.experts), hidden, a.type);
  }
  const auto t2 = Clock::now();
  MOE_TRY(cfxMoeCombine(s.moe, recv, a.recvbuff, 0, nullptr));
  if (a.timed) {
    s.dispatchSec += std::chrono::duration<double>(t1 - t0).count();
    s.combineSec += std::chrono::duration<double>(Clock::now() - t2).count();
    ++s.timedOps;
  }
  return ncclSuccess;
}

ncclResult_t runUnfused(RankState& s, const OpArgs& a, const Options& o) {
  s.transport.comm = a.comm;
  cfxmoe::Unfused<NcclTransport> pipe(s.shape, typeInfo(a.type).size, a.type == ncclFloat16);
  const auto t0 = Clock::now();
  if (pipe.dispatch(s.transport, s.routing, static_cast<const char*>(a.sendbuff)) != 0) return ncclSystemError;
  const auto t1 = Clock::now();
  if (a.checking) {
    runExperts(pipe.expertMajor(), pipe.perLocal(), cfxmoe::firstExpert(a.rank, a.nRanks, o.experts),
               s.shape.hidden, a.type);
  }
  const auto t2 = Clock::now();
  if (pipe.combine(s.transport, s.routing, pipe.expertMajor(), static_cast<char*>(a.recvbuff)) != 0) {
    return ncclSystemError;
  }
  if (a.timed) {
    s.dispatchSec += std::chrono::duration<double>(t1 - t0).count();
    s.combineSec += std::chrono::duration<double>(Clock::now() - t2).count();
    ++s.timedOps;
  }
  return ncclSuccess;
}

int gTopk = 2;  // for bandwidth(), which the harness calls without the options

ncclResult_t run(const OpArgs& a) {
  const Options& o = *a.options;
  gTopk = o.topk;
  RankState& s = state();
  const size_t tokens = a.count / static_cast<size_t>(o.hidden);
  if (s.tokens != tokens) drawRouting(s, o, tokens, a.rank, a.nRanks);
  s.tokenBytes = a.count * typeInfo(a.type).size;
  return o.mode == "unfused" ? runUnfused(s, a, o) : runFused(s, a, o);
}

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize) / 1.0e9 / sec;
  *busBw = *algBw * 2.0 * gTopk * (n - 1) / n;
}

size_t unitElems(int, const Options& o) { return static_cast<size_t>(o.hidden); }

double tokenValue(uint64_t seed, int rank, size_t i) {
  uint64_t z = seed + (static_cast<uint64_t>(rank) << 40) + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<double>((z ^ (z >> 31)) % 7) - 3.0;
}

// Tokens of small integers; expected: every token's sum over k of 2^-(k+1) x scale(expert) x token, exact.
void prepare(const CheckArgs& c) {
  const Options& o = *c.options;
  const size_t hidden = static_cast<size_t>(o.hidden);
  const size_t tokens = c.layout.recvCount / hidden;
  const auto k = static_cast<size_t>(o.topk);
  RankState& s = state();
  if (s.tokens != tokens) drawRouting(s, o, tokens, c.rank, c.nRanks);
  const size_t elt = typeInfo(c.type).size;
  auto* in = static_cast<char*>(c.input);
  auto* want = static_cast<char*>(c.expected);
  for (size_t t = 0; t < tokens; ++t) {
    double factor = 0;
    for (size_t j = 0; j < k; ++j) factor += s.routing.weights[t * k + j] * expertScale(s.routing.ids[t * k + j]);
    for (size_t h = 0; h < hidden; ++h) {
      const double x = tokenValue(c.seed, c.rank, t * hidden + h);
      storeElement(c.type, x, in + (t * hidden + h) * elt);
      storeElement(c.type, x * factor, want + (t * hidden + h) * elt);
    }
  }
}

std::string placementNote(ncclComm_t comm, int rank, int nRanks, bool inPlace) {
  RankState& s = state();
  double sec[2] = {s.timedOps ? s.dispatchSec / s.timedOps : 0, s.timedOps ? s.combineSec / s.timedOps : 0};
  s.dispatchSec = s.combineSec = 0;
  s.timedOps = 0;
  if (ncclAllReduce(sec, sec, 2, ncclFloat64, ncclSum, comm, nullptr) != ncclSuccess || rank != 0) return "";
  const double dispatch = sec[0] / nRanks;
  const double combine = sec[1] / nRanks;
  auto gbs = [&](double t) { return t > 0 ? static_cast<double>(s.tokenBytes) / 1e9 / t : 0.0; };
  char line[256];
  snprintf(line, sizeof line, "#  moe %-12s dispatch %10.1f us %7.2f GB/s   combine %10.1f us %7.2f GB/s\n",
           inPlace ? "in-place" : "out-of-place", 1e6 * dispatch, gbs(dispatch), 1e6 * combine, gbs(combine));
  return line;
}

const Collective kMoe = [] {
  Collective c{OpColumn::None, false, false, true, false, layout, bandwidth, run, prepare};
  c.unitElems = unitElems;
  c.placementNote = placementNote;
  return c;
}();

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kMoe); }
