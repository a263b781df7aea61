// SPDX-License-Identifier: Apache-2.0
// perf harness: one rank's benchmark loop. Mirrors nccl-tests' TimeTest/BenchTime so that the library sees the
// same call sequence: a barrier, warm-up ops for every power-of-two size, then per size and placement one
// untimed op, a barrier, the timed loop, the time combined across ranks (-a), a barrier and the -c checks.
// All cross-rank bookkeeping (barriers, times, wrong counts) goes through the benchmark communicator itself,
// outside the timed loop; with host buffers and a NULL stream every op has completed when its call returns.
#include "runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "datatypes.h"
#include "perf_env.h"
#include "verify.h"

namespace cfx::perf {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string memString(long long bytes) {
  double amount = static_cast<double>(bytes);
  const char* unit = " B";
  if (amount >= 1024.0 * 1024.0 * 1024.0) {
    unit = " GB", amount /= 1024.0 * 1024.0 * 1024.0;
  } else if (amount >= 1024.0 * 1024.0) {
    unit = " MB", amount /= 1024.0 * 1024.0;
  } else if (amount >= 1024.0) {
    unit = " KB", amount /= 1024.0;
  }
  int precision = amount < 10.0 ? 2 : (amount < 100.0 ? 1 : 0);
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f%s", precision, amount, unit);
  return buf;
}

class Rank {
 public:
  Rank(ProcessContext* ctx, int thread)
      : ctx_(ctx),
        o_(*ctx->options),
        coll_(*ctx->collective),
        thread_(thread),
        rank_(ctx->world->proc * ctx->world->nThreads + thread),
        nRanks_(ctx->world->nRanks),
        minBytes_(o_.minBytes),
        maxBytes_(o_.maxBytes) {}

  TestResult run(RankOutcome* outcome);

 private:
  TestResult setUp();
  TestResult allocateBuffers();
  TestResult tearDown();
  TestResult runAll();
  TestResult timeTest(ncclDataType_t type, int opIndex, int root);
  TestResult benchTime(bool inPlace);
  TestResult startColl(bool inPlace, int iter);
  TestResult checkOnce(bool inPlace, int64_t* wrongLocal);
  TestResult setUpCodec();
  TestResult codecTolerance(const CheckArgs& c);
  TestResult readCodecStats(bool measure);
  void setupSize(size_t bytes);
  void beat() {
    // A count, not a timestamp: the watchdog times how long it stays still. Reading the clock here cost a small
    // op a tenth of its time (three clock reads per iteration against mpi_bench's one). Relaxed: nothing else is
    // published through it; only this thread writes it.
    std::atomic<int64_t>& p = (*ctx_->progress)[thread_];
    p.store(p.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  const char* opColumnName() const;

  ProcessContext* ctx_;
  const Options& o_;
  const Collective& coll_;
  int thread_;
  int rank_;
  int nRanks_;
  size_t minBytes_;
  size_t maxBytes_;
  ncclComm_t comm_ = nullptr;
  char* send_ = nullptr;  // allocation bases
  char* recv_ = nullptr;
  char* expected_ = nullptr;
  void* sendHandle_ = nullptr;
  void* recvHandle_ = nullptr;
  char* sendBase_ = nullptr;  // bases after the -u shift of the current type
  char* recvBase_ = nullptr;
  long long rssAfterInit_ = 0;
  long long bufferBytes_ = 0;

  // Current test.
  ncclDataType_t type_ = ncclFloat32;
  size_t elt_ = 4;
  int opIndex_ = 0;
  ncclRedOp_t op_ = ncclSum;
  int root_ = 0;
  Layout layout_{};
  uint64_t rep_ = 0;

  // --codec: the codec every op carries, and what the row's comment line reports.
  bool compressed_ = false;
  cfxCodec codec_{};
  double tolerance_ = 0;       // of the current check (verify.h codecUnit)
  double relL2_ = -1;          // of the out-of-place check, or of a measured op with -c 0
  unsigned long long wireBytes_ = 0;

  bool checking_ = false;  // the op in flight is a check's (OpArgs::checking)
  bool timed_ = false;     // ... or a timed iteration's (OpArgs::timed)
  std::string notes_;      // the current row's placementNote lines

  // Results: failing checks of this rank, and the busbw sum of the printed entries.
  int failedChecks_ = 0;
  double bwSum_ = 0;
  int bwCount_ = 0;
};

const char* Rank::opColumnName() const {
  switch (coll_.opColumn) {
    case OpColumn::Reduction:
      return opName(opIndex_);
    case OpColumn::None:
      return "none";
    default:
      return "";
  }
}

TestResult Rank::setUp() {
  const World& w = *ctx_->world;
  if (o_.parallelInit) CFX_PERF_TRY(initComms(o_, w, ctx_->id, thread_, 1, &ctx_->comms[thread_]));
  comm_ = ctx_->comms[thread_];
  rssAfterInit_ = residentBytes();
  beat();

  // "# Using devices": one line per rank, gathered to rank 0 in rank order.
  int device = w.localProc * w.nThreads + thread_;
  std::string line = deviceLine(rank_, 0, static_cast<int>(getpid()), w.hostname, device, hostDeviceName());
  std::vector<std::string> lines;
  CFX_PERF_TRY(gatherLines(comm_, nRanks_, line, &lines));
  if (rank_ == 0) {
    ctx_->report->banner(ctx_->programName, NCCL_VERSION_CODE, ctx_->ncclVersion, nRanks_, w.nProcs);
    ctx_->report->devices(lines);
  }

  // Host memory plays the role of GPU memory: every rank of this host needs send, recv and (with -c) expected.
  double perRank = static_cast<double>(availableMemoryBytes()) / (w.localProcs * w.nThreads);
  double limit = perRank > 0 ? (perRank * 0.8) / (o_.check ? 3 : 2) : 1e30;
  CFX_PERF_TRY(combineTime(comm_, rank_, nRanks_, 2, &limit));
  if (static_cast<double>(maxBytes_) > limit) {
    maxBytes_ = static_cast<size_t>(limit);
    minBytes_ = std::min(minBytes_, maxBytes_);
    if (rank_ == 0)
      ctx_->report->note("#\n# Reducing maxBytes to %ld due to memory limitation\n", static_cast<long>(maxBytes_));
  }

  CFX_PERF_TRY(setUpCodec());
  CFX_PERF_TRY(allocateBuffers());
  if (rank_ == 0) ctx_->report->tableHeader();
  return TestResult::Success;
}

TestResult Rank::setUpCodec() {
  if (o_.codec.empty()) return TestResult::Success;
  if (coll_.runCompressed == nullptr) {
    if (rank_ == 0) fprintf(stderr, "%s: --codec applies to all_reduce, reduce_scatter, all_gather and broadcast\n", ctx_->programName);
    return TestResult::InvalidUsage;
  }
  CFX_PERF_NCCL(cfxCodecParse(o_.codec.c_str(), &codec_));
  codec_.mode = o_.codecMode == "auto" ? cfxCompressAuto : o_.codecMode == "never" ? cfxCompressNever : cfxCompressAlways;
  compressed_ = codec_.format != cfxCodecNone;
  if (rank_ == 0) ctx_->report->note("# Codec %s, mode %s\n", o_.codec.c_str(), o_.codecMode.c_str());
  return TestResult::Success;
}

// The tolerance of this check (verify.h): every rank's largest input, and the largest exact result.
TestResult Rank::codecTolerance(const CheckArgs& c) {
  std::vector<double> extent = {maxAbs(type_, c.input, layout_.sendCount), maxAbs(type_, expected_, layout_.recvCount)};
  std::vector<double> largest = extent;
  CFX_PERF_TRY(maxAcrossRanks(comm_, &largest));
  const double unit = codecUnit(codec_.format, codec_.rounding == cfxRoundStochastic);
  // Data collectives hold one encoding of each value; reductions a sum of nRanks encodings and one of the result.
  tolerance_ = coll_.movesData ? unit * largest[0] : unit * (nRanks_ * largest[0] + largest[1]);
  return TestResult::Success;
}

// What the last op sent (cfxCommGetCompressStats); with `measure`, one more op measures the relative L2 error.
TestResult Rank::readCodecStats(bool measure) {
  if (measure) {
    cfxCodec measured = codec_;
    measured.measureError = 1;
    const cfxCodec keep = codec_;
    codec_ = measured;
    CFX_PERF_TRY(startColl(false, 0));
    codec_ = keep;
  }
  cfxCompressStats stats;
  CFX_PERF_NCCL(cfxCommGetCompressStats(comm_, &stats));
  wireBytes_ = stats.wireBytes;
  if (measure) relL2_ = stats.relL2Error;
  return TestResult::Success;
}

TestResult Rank::allocateBuffers() {
  size_t allocBytes = maxBytes_ + 8 * static_cast<size_t>(o_.unalign);
  if (allocBytes == 0) allocBytes = 8;  // keep the pointers valid for zero-byte runs
  void* p = nullptr;
  CFX_PERF_NCCL(ncclMemAlloc(&p, allocBytes));
  send_ = static_cast<char*>(p);
  CFX_PERF_NCCL(ncclMemAlloc(&p, allocBytes));
  recv_ = static_cast<char*>(p);
  if (o_.check) {
    CFX_PERF_NCCL(ncclMemAlloc(&p, allocBytes));
    expected_ = static_cast<char*>(p);
  }
  // Touch the pages now so that first-touch faults do not land in the first timed size.
  memset(send_, 0, allocBytes);
  memset(recv_, 0, allocBytes);
  if (expected_) memset(expected_, 0, allocBytes);
  bufferBytes_ = static_cast<long long>(allocBytes) * (o_.check ? 3 : 2);

  if (o_.localRegister == 1) {
    CFX_PERF_NCCL(ncclGroupStart());
    CFX_PERF_NCCL(ncclCommRegister(comm_, send_, maxBytes_, &sendHandle_));
    CFX_PERF_NCCL(ncclCommRegister(comm_, recv_, maxBytes_, &recvHandle_));
    CFX_PERF_NCCL(ncclGroupEnd());
  } else if (o_.localRegister == 2) {
    ncclWindow_t sw = nullptr, rw = nullptr;
    CFX_PERF_NCCL(ncclGroupStart());
    CFX_PERF_NCCL(ncclCommWindowRegister(comm_, send_, maxBytes_, &sw, NCCL_WIN_COLL_SYMMETRIC));
    CFX_PERF_NCCL(ncclCommWindowRegister(comm_, recv_, maxBytes_, &rw, NCCL_WIN_COLL_SYMMETRIC));
    CFX_PERF_NCCL(ncclGroupEnd());
    sendHandle_ = sw;
    recvHandle_ = rw;
  }
  return TestResult::Success;
}

TestResult Rank::tearDown() {
  if (o_.localRegister == 1) {
    CFX_PERF_NCCL(ncclCommDeregister(comm_, sendHandle_));
    CFX_PERF_NCCL(ncclCommDeregister(comm_, recvHandle_));
  } else if (o_.localRegister == 2) {
    CFX_PERF_NCCL(ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(sendHandle_)));
    CFX_PERF_NCCL(ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(recvHandle_)));
  }
  CFX_PERF_NCCL(ncclCommDestroy(comm_));
  ctx_->comms[thread_] = nullptr;
  CFX_PERF_NCCL(ncclMemFree(send_));
  CFX_PERF_NCCL(ncclMemFree(recv_));
  if (expected_) CFX_PERF_NCCL(ncclMemFree(expected_));
  return TestResult::Success;
}

TestResult Rank::run(RankOutcome* outcome) {
  CFX_PERF_TRY(setUp());
  CFX_PERF_TRY(runAll());
  long long rssAfterRun = residentBytes();

  int64_t failed = failedChecks_;
  CFX_PERF_TRY(sumAcrossRanks(comm_, &failed));
  CFX_PERF_TRY(tearDown());

  // Every rank saw the same combined times, so every rank computes the same average and the same verdict.
  const char* minBwEnv = getenv(kMinBwVariable);
  double minBw = minBwEnv ? atof(minBwEnv) : -1;
  double avgBw = bwCount_ ? bwSum_ / bwCount_ : 0;
  outcome->outOfBounds = static_cast<int>(failed);
  outcome->bandwidthFailed = minBw >= 0 && avgBw < minBw * 0.9;
  if (rank_ == 0) {
    std::string memLine;
    if (o_.memoryReport) {
      long long init = rssAfterInit_ - ctx_->rssAtStart;
      long long coll = std::max(0LL, rssAfterRun - rssAfterInit_ - bufferBytes_);
      memLine = "Initialization " + memString(init) + " | User-Allocated " + memString(bufferBytes_) +
                " | Collective " + memString(coll) + " | Total  " + memString(init + bufferBytes_ + coll);
    }
    ctx_->report->footer(ctx_->programName, outcome->outOfBounds, avgBw, minBw, memLine);
  }
  return TestResult::Success;
}

TestResult Rank::runAll() {
  const int firstType = o_.type == kAll ? 0 : o_.type;
  const int lastType = o_.type == kAll ? kNumTypes - 1 : o_.type;
  const bool loopOps = coll_.opColumn == OpColumn::Reduction;
  const int firstOp = !loopOps ? 0 : (o_.op == kAll ? 0 : o_.op);
  const int lastOp = !loopOps ? 0 : (o_.op == kAll ? kNumTestOps - 1 : o_.op);
  const int firstRoot = !coll_.rooted ? -1 : (o_.root == kAll ? 0 : o_.root);
  const int lastRoot = !coll_.rooted ? -1 : (o_.root == kAll ? nRanks_ - 1 : o_.root);
  for (int t = firstType; t <= lastType; ++t) {
    // A codec carries fp32, bf16 and fp16 values, summed or averaged: "-d all -o all" runs what it can carry.
    const auto type = static_cast<ncclDataType_t>(t);
    if (compressed_ && type != ncclFloat32 && type != ncclFloat16 && type != ncclBfloat16) continue;
    for (int op = firstOp; op <= lastOp; ++op) {
      if (compressed_ && loopOps && op != ncclSum && op != ncclAvg) continue;
      if (loopOps && (coll_.opMask & (1u << op)) == 0) {
        if (o_.op != kAll && rank_ == 0) fprintf(stderr, "%s: op %s does not apply here\n", ctx_->programName, opName(op));
        if (o_.op != kAll) return TestResult::InvalidUsage;
        continue;
      }
      for (int root = firstRoot; root <= lastRoot; ++root) {
        CFX_PERF_TRY(timeTest(static_cast<ncclDataType_t>(t), op, root));
      }
    }
  }
  return TestResult::Success;
}

void Rank::setupSize(size_t bytes) {
  size_t count = bytes / elt_;
  if (coll_.unitElems != nullptr) {
    // Whole units only (an affine op's groups): at least one, so every size runs something.
    const size_t unit = std::max<size_t>(1, coll_.unitElems(opIndex_, o_));
    count = std::max(unit, count / unit * unit);
  }
  layout_ = coll_.layout(count, elt_, nRanks_);
}

TestResult Rank::startColl(bool inPlace, int iter) {
  size_t totalBytes = std::max(layout_.sendCount, layout_.recvCount) * elt_;
  // As nccl-tests: each iteration moves on through the buffers, so an op finds its data out of the caches unless
  // the whole sweep fits there. CFX_PERF_ROTATE=0 keeps every iteration at the start, as MPI and Gloo benchmarks
  // (and perf/compare's) do, so a comparison times every library on the same, equally warm memory.
  static const bool rotate = [] {
    const char* v = getenv(kRotateVariable);
    return v == nullptr || std::string(v) != "0";
  }();
  size_t steps = totalBytes && rotate ? maxBytes_ / totalBytes : 1;
  size_t shift = totalBytes * (static_cast<size_t>(iter) % std::max<size_t>(steps, 1));
  char* recv = recvBase_ + shift;
  char* send = sendBase_ + shift;
  OpArgs a;
  a.sendbuff = inPlace ? recv + layout_.sendInPlaceOffset * rank_ * elt_ : send;
  a.recvbuff = inPlace ? recv + layout_.recvInPlaceOffset * rank_ * elt_ : recv;
  a.count = layout_.paramCount;
  a.type = type_;
  a.op = op_;
  a.root = root_;
  a.rank = rank_;
  a.nRanks = nRanks_;
  a.comm = comm_;
  a.options = &o_;
  a.checking = checking_;
  a.timed = timed_;
  if (compressed_) {
    a.codec = &codec_;
    CFX_PERF_NCCL(coll_.runCompressed(a));
  } else {
    CFX_PERF_NCCL(coll_.run(a));
  }
  beat();
  // -z 1: barrier after each op. Inside a -m group the ops only run at ncclGroupEnd, and a barrier (itself a
  // collective) must not join the group, so benchTime places it after the group instead.
  if (o_.blocking == 1 && o_.aggIters == 1) CFX_PERF_TRY(barrier(comm_));
  return TestResult::Success;
}

TestResult Rank::timeTest(ncclDataType_t type, int opIndex, int root) {
  type_ = type;
  elt_ = typeInfo(type).size;
  opIndex_ = opIndex;
  root_ = root;
  op_ = static_cast<ncclRedOp_t>(opIndex < kMulSum ? opIndex : ncclSum);
  CFX_PERF_TRY(barrier(comm_));

  // mulsum: one ncclRedOpCreatePreMulSum op per (comm, type) for the whole test, destroyed at its end; affine
  // (scan_perf) likewise from --rows and --cols.
  bool preMul = coll_.usesOp && opIndex == kMulSum;
  if (preMul) {
    alignas(8) unsigned char scalar[8];
    storePreMulScalar(type, rank_, scalar);
    CFX_PERF_NCCL(ncclRedOpCreatePreMulSum(&op_, scalar, type, ncclScalarHostImmediate, comm_));
  }
  const bool affine = coll_.usesOp && opIndex == kAffine;
  if (affine) CFX_PERF_NCCL(cfxRedOpCreateAffine(&op_, o_.rows, o_.cols, 0, type, comm_));
  sendBase_ = send_ + static_cast<size_t>(o_.unalign) * elt_;
  recvBase_ = recv_ + static_cast<size_t>(o_.unalign) * elt_;

  for (size_t size = minBytes_; size <= maxBytes_; size = size ? size * 2 : 1) {
    setupSize(size);
    for (int iter = 0; iter < o_.warmupIters; ++iter) CFX_PERF_TRY(startColl(false, iter));
  }

  long repeat = o_.runCycles;
  do {
    for (size_t size = minBytes_; size <= maxBytes_;) {
      setupSize(size);
      if (rank_ == 0) {
        ctx_->report->rowStart(std::max(layout_.sendCount, layout_.recvCount) * elt_, layout_.paramCount,
                               typeInfo(type).name, opColumnName(), root);
      }
      notes_.clear();
      CFX_PERF_TRY(benchTime(false));
      CFX_PERF_TRY(benchTime(true));
      if (rank_ == 0) ctx_->report->rowEnd();
      if (rank_ == 0 && !notes_.empty()) ctx_->report->note("%s", notes_.c_str());
      if (compressed_ && rank_ == 0) {
        ctx_->report->note("# codec %s wire_bytes_per_rank %llu rel_l2 %.3e\n", o_.codec.c_str(), wireBytes_, relL2_);
      }
      size_t next = o_.stepFactor > 1 ? (size ? size * o_.stepFactor : 1) : size + o_.stepBytes;
      if (next <= size) break;  // -i 0, or overflow
      size = next;
    }
  } while (--repeat);

  if (preMul || affine) CFX_PERF_NCCL(ncclRedOpDestroy(op_, comm_));
  return TestResult::Success;
}

TestResult Rank::checkOnce(bool inPlace, int64_t* wrongLocal) {
  size_t clearBytes = std::max(layout_.sendCount, layout_.recvCount) * elt_;
  memset(recvBase_, 0, clearBytes);
  CheckArgs c;
  c.type = type_;
  c.opIndex = opIndex_;
  c.root = root_;
  c.rank = rank_;
  c.nRanks = nRanks_;
  c.seed = 0x9e3779b97f4a7c15ull * (++rep_) + 0x1234567;  // every rank counts reps identically
  c.layout = layout_;
  c.input = inPlace ? recvBase_ + layout_.sendInPlaceOffset * rank_ * elt_ : sendBase_;
  char* result = inPlace ? recvBase_ + layout_.recvInPlaceOffset * rank_ * elt_ : recvBase_;
  c.result = result;
  c.expected = expected_;
  c.options = &o_;
  coll_.prepare(c);
  beat();
  if (compressed_) CFX_PERF_TRY(codecTolerance(c));
  const double tolerance = coll_.tolerance != nullptr ? coll_.tolerance(c) : 0;
  checking_ = true;
  const TestResult ran = startColl(inPlace, 0);
  checking_ = false;
  CFX_PERF_TRY(ran);
  if (compressed_ || tolerance > 0) {
    double relL2 = 0;
    *wrongLocal = countWrongWithin(type_, result, expected_, layout_.recvCount, compressed_ ? tolerance_ : tolerance,
                                   &relL2);
    if (!inPlace) relL2_ = relL2;
  } else {
    bool ulp = opIndex_ == ncclAvg && typeInfo(type_).isFloat;
    *wrongLocal = countWrong(type_, result, expected_, layout_.recvCount, ulp);
  }
  beat();
  return TestResult::Success;
}

TestResult Rank::benchTime(bool inPlace) {
  const bool reportErrors = o_.check > 0 && (!inPlace || coll_.checkInPlace);
  if (o_.check) {
    int64_t ignored = 0;
    CFX_PERF_TRY(checkOnce(inPlace, &ignored));  // fills the buffers and doubles as the untimed op
  } else {
    CFX_PERF_TRY(startColl(inPlace, 0));
  }
  CFX_PERF_TRY(barrier(comm_));

  std::vector<double> iterSec(o_.perIterTiming ? o_.iters : 0);
  double collOnlySec = 0;
  // The clock is read per iteration only where a per-iteration time is asked for (-J, -z 3).
  const bool timeEach = o_.perIterTiming || o_.blocking == 3;
  timed_ = true;
  Clock::time_point start = Clock::now();
  for (int iter = 0; iter < o_.iters; ++iter) {
    Clock::time_point t0 = timeEach ? Clock::now() : start;
    if (o_.aggIters > 1) CFX_PERF_NCCL(ncclGroupStart());
    for (int a = 0; a < o_.aggIters; ++a) CFX_PERF_TRY(startColl(inPlace, iter * o_.aggIters + a));
    if (o_.aggIters > 1) CFX_PERF_NCCL(ncclGroupEnd());
    if (o_.aggIters > 1 && o_.blocking == 1) CFX_PERF_TRY(barrier(comm_));
    const double iterTime = timeEach ? secondsSince(t0) : 0.0;
    if (o_.perIterTiming) iterSec[iter] = iterTime / o_.aggIters;
    if (o_.blocking == 3) {
      collOnlySec += iterTime;
      CFX_PERF_TRY(barrier(comm_));
    }
  }
  double elapsed = o_.blocking == 3 ? collOnlySec : secondsSince(start);
  timed_ = false;
  if (coll_.placementNote != nullptr) notes_ += coll_.placementNote(comm_, rank_, nRanks_, inPlace);
  ncclResult_t asyncError = ncclSuccess;
  CFX_PERF_NCCL(ncclCommGetAsyncError(comm_, &asyncError));
  CFX_PERF_NCCL(asyncError);

  // The wire bytes of the timed ops, before anything else runs; and without -c, the error of one more op.
  if (compressed_ && !inPlace) CFX_PERF_TRY(readCodecStats(o_.check == 0));
  double deltaSec = elapsed / (static_cast<double>(o_.iters) * o_.aggIters);
  CFX_PERF_TRY(combineTime(comm_, rank_, nRanks_, o_.average, &deltaSec));
  double algBw = 0, busBw = 0;
  coll_.bandwidth(layout_.paramCount, elt_, deltaSec, nRanks_, &algBw, &busBw);
  CFX_PERF_TRY(barrier(comm_));

  int64_t wrong = 0;
  if (reportErrors) {
    for (int c = 0; c < o_.check; ++c) {
      int64_t local = 0;
      CFX_PERF_TRY(checkOnce(inPlace, &local));
      if (local) ++failedChecks_;
      wrong = local;
      CFX_PERF_TRY(sumAcrossRanks(comm_, &wrong));
      if (wrong) break;
    }
  }
  if (o_.perIterTiming) CFX_PERF_TRY(maxAcrossRanks(comm_, &iterSec));

  if (rank_ == 0) {
    ctx_->report->rowPlacement(deltaSec * 1e6, algBw, busBw, reportErrors, wrong, !inPlace);
    if (o_.perIterTiming) ctx_->report->rowPerIter(iterSec, !inPlace);
  }
  bwSum_ += busBw;
  ++bwCount_;
  return TestResult::Success;
}

}  // namespace

TestResult runRank(ProcessContext* ctx, int thread, RankOutcome* outcome) {
  Rank rank(ctx, thread);
  return rank.run(outcome);
}

}  // namespace cfx::perf
