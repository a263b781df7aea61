// SPDX-License-Identifier: Apache-2.0
// Integration sweep through the public C API: collective x datatype x op x count x in-place x root x rank count.
// One forked job per (collective, nRanks) runs the whole inner sweep; results are checked bitwise against closed
// forms and, for collectives whose output is replicated, hashed and compared across ranks.
#include "integration/dtypes.h"
#include "integration/multiproc.h"
#include "integration/sweep_model.h"

#include <gtest/gtest.h>
#include <nccl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

namespace cfx::itest {
namespace {

constexpr size_t kSlotBytes = 131072;  // shm slot size: counts straddle it by one element
constexpr size_t kLargeBytes = 3u << 20;
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kSentinel = 0xa5;
constexpr int kMaxReportedCases = 12;

bool perRankCount(Coll coll) {
  return coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AlltoAll ||
         coll == Coll::Gather || coll == Coll::Scatter;
}

// The thread-sanitizer run looks for races, which neither the datatype nor the reduction changes: it keeps three
// element sizes and one op per lowering (plain Max, post-dividing Avg, pre-multiplying PreMulSum). The ASan run
// keeps the wider quick sweep, since type-specific code is where a memory error would hide.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

std::vector<const DtypeInfo*> sweepDtypes() {
  std::vector<const DtypeInfo*> out;
  static const std::set<ncclDataType_t> kQuick = {ncclInt8, ncclUint64, ncclFloat16, ncclFloat32, ncclBfloat16,
                                                  ncclFloat8e5m2};
  static const std::set<ncclDataType_t> kThreadSanitized = {ncclInt8, ncclFloat16, ncclFloat32};
  const std::set<ncclDataType_t>& keep = kThreadSanitizer ? kThreadSanitized : kQuick;
  for (const auto& d : allDtypes()) {
    if (!quickMode() || keep.count(d.type) != 0) out.push_back(&d);
  }
  return out;
}

std::vector<Op> sweepOps(Coll coll) {
  if (!isReduction(coll)) return {Op::Copy};
  if (kThreadSanitizer && quickMode()) return {Op::Max, Op::Avg, Op::PreMulSum};
  return {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum};
}

size_t largeCount(Coll coll, const DtypeInfo& dt, int nRanks) {
  return kLargeBytes / dt.size / (perRankCount(coll) ? nRanks : 1) + 7;
}

// Large counts cost real time on 2 cores: every datatype with sum/copy, every op with float32.
std::vector<size_t> sweepCounts(Coll coll, const DtypeInfo& dt, Op op, int nRanks) {
  const size_t slot = kSlotBytes / dt.size;
  const bool large = op == Op::Copy || op == Op::Sum || dt.type == ncclFloat32;
  if (quickMode()) {
    std::vector<size_t> counts = {0, 1, 1021, slot + 1};
    // The TSan sweep has no Sum: its Max carries the large (many-slot) case instead.
    const bool largeOp = op == Op::Sum || op == Op::Copy || (kThreadSanitizer && op == Op::Max);
    if (dt.type == ncclFloat32 && largeOp) counts.push_back(largeCount(coll, dt, nRanks));
    return counts;
  }
  std::vector<size_t> counts = {0, 1, 1021, slot - 1, slot + 1};
  if (large) counts.push_back(largeCount(coll, dt, nRanks));
  return counts;
}

std::vector<bool> sweepInPlace(Coll coll) {
  if (coll == Coll::Bcast) return {true};
  if (coll == Coll::AlltoAll) return {false};  // in-place is not defined for AlltoAll
  return {false, true};
}

std::vector<int> sweepRoots(Coll coll, int nRanks, bool largeCase) {
  if (!hasRoot(coll)) return {0};
  if (largeCase) return {nRanks / 2};
  std::vector<int> roots = {0, nRanks - 1, nRanks / 2};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

struct Case {
  Coll coll;
  const DtypeInfo* dt;
  Op op;
  size_t count;
  bool inPlace;
  int root;
  std::string describe() const {
    std::ostringstream s;
    s << collName(coll) << " " << dt->name << " " << opName(op) << " count=" << count
      << (inPlace ? " in-place" : " out-of-place");
    if (hasRoot(coll)) s << " root=" << root;
    return s.str();
  }
};

// A host buffer with a guard zone after it; everything starts as the sentinel. A non-zero shift moves the start off
// the allocator's 16-byte alignment (buffers only promise element alignment).
struct GuardedBuffer {
  GuardedBuffer(size_t bytes, size_t shift)
      : bytes_(bytes), storage_(new unsigned char[shift + bytes + kGuardBytes]), data_(storage_.get() + shift) {
    std::memset(data_, kSentinel, bytes + kGuardBytes);
  }
  unsigned char* at(size_t elt, size_t eltSize) { return data_ + elt * eltSize; }
  bool guardIntact() const {
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (data_[bytes_ + i] != kSentinel) return false;
    }
    return true;
  }
  bool allSentinel() const {
    for (size_t i = 0; i < bytes_; ++i) {
      if (data_[i] != kSentinel) return false;
    }
    return true;
  }
  size_t bytes_;
  std::unique_ptr<unsigned char[]> storage_;
  unsigned char* data_;
};

class SweepRank {
 public:
  SweepRank(RankContext& ctx, Coll coll, ncclComm_t comm) : ctx_(ctx), coll_(coll), comm_(comm) {}

  // Returns false when a call failed and the sweep must stop (peers may be stuck in a collective).
  bool runCase(const Case& c, const ValueModel& model, ncclRedOp_t op);
  std::string hash() const { return replicated_.digest(); }
  int badCases() const { return badCases_; }

 private:
  void mismatch(const Case& c, const std::string& what);
  ncclResult_t call(const Case& c, ncclRedOp_t op, void* send, void* recv, void* single);
  void checkOutput(const Case& c, const ValueModel& model, unsigned char* recv, size_t recvElts);

  RankContext& ctx_;
  Coll coll_;
  ncclComm_t comm_;
  Hash128 replicated_;
  int badCases_ = 0;
  int reportedInCase_ = 0;
};

void SweepRank::mismatch(const Case& c, const std::string& what) {
  if (reportedInCase_ == 0) ++badCases_;
  if (badCases_ > kMaxReportedCases || reportedInCase_ >= 3) return;
  ++reportedInCase_;
  ADD_FAILURE() << c.describe() << " rank=" << ctx_.rank() << " of " << ctx_.nRanks() << ": " << what;
}

ncclResult_t SweepRank::call(const Case& c, ncclRedOp_t op, void* send, void* recv, void* single) {
  const ncclDataType_t t = c.dt->type;
  switch (c.coll) {
    case Coll::AllReduce: return ncclAllReduce(send, recv, c.count, t, op, comm_, nullptr);
    case Coll::Broadcast: return ncclBroadcast(send, recv, c.count, t, c.root, comm_, nullptr);
    case Coll::Bcast: return ncclBcast(single, c.count, t, c.root, comm_, nullptr);
    case Coll::Reduce: return ncclReduce(send, recv, c.count, t, op, c.root, comm_, nullptr);
    case Coll::AllGather: return ncclAllGather(send, recv, c.count, t, comm_, nullptr);
    case Coll::ReduceScatter: return ncclReduceScatter(send, recv, c.count, t, op, comm_, nullptr);
    case Coll::AlltoAll: return ncclAlltoAll(send, recv, c.count, t, comm_, nullptr);
    case Coll::Gather: return ncclGather(send, recv, c.count, t, c.root, comm_, nullptr);
    case Coll::Scatter: return ncclScatter(send, recv, c.count, t, c.root, comm_, nullptr);
  }
  return ncclInternalError;
}

// A run of consecutive elements whose expected bytes come from a periodic table, starting at table index start.
struct Segment {
  const unsigned char* table;
  size_t start;
  size_t len;
};

void fillPeriodic(unsigned char* dst, const ValueModel& model, const Segment& seg, size_t elt) {
  const size_t period = model.period();
  for (size_t done = 0; done < seg.len;) {
    const size_t pos = (seg.start + done) % period;
    const size_t chunk = std::min(seg.len - done, period - pos);
    std::memcpy(dst + done * elt, seg.table + pos * elt, chunk * elt);
    done += chunk;
  }
}

// Index of the first element of got that differs from the segment, or seg.len.
size_t firstDifference(const unsigned char* got, const ValueModel& model, const Segment& seg, size_t elt) {
  const size_t period = model.period();
  for (size_t done = 0; done < seg.len;) {
    const size_t pos = (seg.start + done) % period;
    const size_t chunk = std::min(seg.len - done, period - pos);
    if (std::memcmp(got + done * elt, seg.table + pos * elt, chunk * elt) != 0) {
      for (size_t i = 0; i < chunk; ++i) {
        if (std::memcmp(got + (done + i) * elt, seg.table + (pos + i) * elt, elt) != 0) return done + i;
      }
    }
    done += chunk;
  }
  return seg.len;
}

// The expected output of this rank, as segments in output order.
std::vector<Segment> expectedOutput(const Case& c, const ValueModel& model, int me, int nRanks) {
  const size_t n = c.count;
  std::vector<Segment> segs;
  switch (c.coll) {
    case Coll::AllReduce: case Coll::Reduce: segs.push_back({model.reducedTable(), 0, n}); break;
    case Coll::ReduceScatter: segs.push_back({model.reducedTable(), me * n, n}); break;
    case Coll::Broadcast: case Coll::Bcast: segs.push_back({model.inputTable(c.root), 0, n}); break;
    case Coll::Scatter: segs.push_back({model.inputTable(c.root), me * n, n}); break;
    case Coll::AllGather: case Coll::Gather:
      for (int r = 0; r < nRanks; ++r) segs.push_back({model.inputTable(r), 0, n});
      break;
    case Coll::AlltoAll:
      for (int r = 0; r < nRanks; ++r) segs.push_back({model.inputTable(r), me * n, n});
      break;
  }
  return segs;
}

void SweepRank::checkOutput(const Case& c, const ValueModel& model, unsigned char* recv, size_t) {
  const size_t elt = c.dt->size;
  size_t outIndex = 0;
  for (const Segment& seg : expectedOutput(c, model, ctx_.rank(), ctx_.nRanks())) {
    unsigned char* got = recv + outIndex * elt;
    for (size_t j = 0; j < seg.len; ++j) {
      if (model.tolerant()) {
        if (model.matchesReduction(loadBits(got, j, elt), seg.start + j)) continue;
      } else {
        j += firstDifference(got + j * elt, model, {seg.table, seg.start + j, seg.len - j}, elt);
        if (j >= seg.len) break;
      }
      const uint64_t bits = loadBits(got, j, elt);
      std::ostringstream s;
      s << "index " << outIndex + j << ": got 0x" << std::hex << bits << std::dec << " (" << decodeValue(*c.dt, bits)
        << "), expected ";
      if (isReduction(c.coll)) {
        s << model.describeExpected(seg.start + j);
      } else {
        s << "0x" << std::hex << loadBits(seg.table, (seg.start + j) % model.period(), elt);
      }
      mismatch(c, s.str());
      if (reportedInCase_ >= 3) return;
    }
    outIndex += seg.len;
  }
}

bool SweepRank::runCase(const Case& c, const ValueModel& model, ncclRedOp_t op) {
  const int me = ctx_.rank();
  const int nRanks = ctx_.nRanks();
  const size_t elt = c.dt->size;
  const bool isRoot = me == c.root;
  size_t sendElts = c.count, recvElts = c.count;
  if (c.coll == Coll::AllGather || c.coll == Coll::Gather) recvElts *= nRanks;
  if (c.coll == Coll::ReduceScatter || c.coll == Coll::Scatter) sendElts *= nRanks;
  if (c.coll == Coll::AlltoAll) sendElts = recvElts = c.count * nRanks;
  const bool hasInput = !(c.coll == Coll::Scatter && !isRoot) && !(c.coll == Coll::Bcast && !isRoot);
  const bool hasOutput = !((c.coll == Coll::Reduce || c.coll == Coll::Gather) && !isRoot);
  // In-place layouts (nccl.h): the send region lives inside the receive buffer, or the reverse.
  bool sendInRecv = false, recvInSend = false;
  size_t offset = 0;
  if (c.inPlace) {
    switch (c.coll) {
      case Coll::AllReduce: case Coll::Broadcast: case Coll::Reduce: case Coll::Bcast: sendInRecv = true; break;
      case Coll::AllGather: sendInRecv = true; offset = me * c.count; break;
      case Coll::Gather: sendInRecv = isRoot; offset = c.root * c.count; break;
      case Coll::ReduceScatter: recvInSend = true; offset = me * c.count; break;
      case Coll::Scatter: recvInSend = isRoot; offset = c.root * c.count; break;
      case Coll::AlltoAll: break;
    }
  }
  GuardedBuffer a((sendInRecv ? recvElts : sendElts) * elt, 0);
  GuardedBuffer b((sendInRecv || recvInSend) ? 0 : recvElts * elt, elt);
  unsigned char* send = sendInRecv ? a.at(offset, elt) : a.at(0, elt);
  unsigned char* recv = sendInRecv ? a.at(0, elt) : recvInSend ? a.at(offset, elt) : b.at(0, elt);
  const Segment myInput{model.inputTable(me), 0, sendElts};
  if (hasInput) fillPeriodic(send, model, myInput, elt);
  ctx_.note(c.describe());
  reportedInCase_ = 0;
  const ncclResult_t rc = call(c, op, send, recv, a.at(0, elt));
  if (rc != ncclSuccess) {
    mismatch(c, std::string("returned ") + resultName(rc) + ": " + ncclGetLastError(comm_));
    return false;
  }
  if (hasOutput) checkOutput(c, model, c.coll == Coll::Bcast ? a.at(0, elt) : recv, recvElts);
  const bool separateSend = !sendInRecv && !recvInSend && c.coll != Coll::Bcast;
  if (separateSend && hasInput) {
    const size_t k = firstDifference(send, model, myInput, elt);
    if (k < sendElts) mismatch(c, "send buffer was modified at index " + std::to_string(k));
  }
  if (separateSend && !hasInput && !a.allSentinel()) mismatch(c, "unused send buffer on a non-root was written");
  if (!hasOutput && !sendInRecv && !recvInSend && !b.allSentinel()) {
    mismatch(c, "unused receive buffer on a non-root was written");
  }
  if (!a.guardIntact() || !b.guardIntact()) mismatch(c, "wrote past the end of a buffer");
  if (isReplicated(c.coll)) {
    replicated_.update(c.describe());
    replicated_.update(c.coll == Coll::Bcast ? a.at(0, elt) : recv, recvElts * elt);
  }
  return true;
}

void runSweep(RankContext& ctx, Coll coll) {
  ncclComm_t comm = ctx.initComm();
  if (comm == nullptr) return;
  const int nRanks = ctx.nRanks();
  SweepRank sweep(ctx, coll, comm);
  bool alive = true;
  for (const DtypeInfo* dt : sweepDtypes()) {
    for (Op op : sweepOps(coll)) {
      const ValueModel model(*dt, op, nRanks);
      ncclRedOp_t ncclOp = ncclSum;
      switch (op) {
        case Op::Copy: case Op::Sum: ncclOp = ncclSum; break;
        case Op::Prod: ncclOp = ncclProd; break;
        case Op::Max: ncclOp = ncclMax; break;
        case Op::Min: ncclOp = ncclMin; break;
        case Op::Avg: ncclOp = ncclAvg; break;
        case Op::PreMulSum: {
          uint64_t scalar = encodeValue(*dt, preMulScalar(*dt));  // little endian: the low bytes hold the element
          const ncclResult_t rc = ncclRedOpCreatePreMulSum(&ncclOp, &scalar, dt->type, ncclScalarHostImmediate, comm);
          if (rc != ncclSuccess) {
            ADD_FAILURE() << "ncclRedOpCreatePreMulSum(" << dt->name << ") returned " << resultName(rc);
            continue;
          }
          break;
        }
      }
      for (size_t count : sweepCounts(coll, *dt, op, nRanks)) {
        const bool largeCase = count > 2 * kSlotBytes;
        for (bool inPlace : sweepInPlace(coll)) {
          for (int root : sweepRoots(coll, nRanks, largeCase)) {
            if (alive) alive = sweep.runCase({coll, dt, op, count, inPlace, root}, model, ncclOp);
          }
        }
      }
      if (op == Op::PreMulSum) {
        EXPECT_EQ(ncclRedOpDestroy(ncclOp, comm), ncclSuccess);
      }
    }
  }
  if (sweep.badCases() > kMaxReportedCases) {
    ADD_FAILURE() << sweep.badCases() << " cases failed on rank " << ctx.rank() << " (first "
                  << kMaxReportedCases << " reported)";
  }
  ctx.report("replicated-hash", sweep.hash());
  ctx.note("ncclCommDestroy");
  if (alive) {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

// Transport and algorithm settings a sweep runs under; each reaches the library through its environment knobs.
enum class Variant {
  Shm,         // defaults: ranks on one host talk through shared memory
  Tcp,         // NCCL_SHM_DISABLE=1: the socket transport, with frames as large as the shm slots
  Tcp2,        // the same, every link striped over 2 sockets served by 2 proxy threads (NCCL_SOCKET_NTHREADS=2)
  Tcp4,        // over 4 sockets: a full slot is 4 stripes, odd sizes 1 to 4
  Tcp6,        // over IPv6 loopback (NCCL_SOCKET_FAMILY=AF_INET6), 4 sockets per link
  SmallSlots,  // 2 shm slots of 4 KiB: every message takes many steps and the sender keeps waiting on flow control
  Ring,        // NCCL_ALGO=allreduce:ring: ring all-reduce also for the small counts recdouble usually takes
  RecDouble,   // NCCL_ALGO=allreduce:recdouble,ring: recursive doubling where exchange usually takes small counts
  BiRing,      // NCCL_ALGO=...:biring: both ring directions at once, for all-reduce, all-gather and reduce-scatter
  Hier,        // NCCL_ALGO=...:hier (all-reduce, all-gather, reduce-scatter), ranks on 2-rank "hosts" (NCCL_HOSTID):
               // shm within, tcp between
  Hosts,       // ranks on 2-rank "hosts", the planner's own choices (hierarchical for the larger all-reduces)
  Rabenseifner,  // NCCL_ALGO=allreduce:rabenseifner: recursive halving and doubling, with folding off 2^k
  Tree,          // NCCL_ALGO=Tree: the double binary tree, as NCCL users spell it
  LongFat,       // tcp as if the path were a long fat one (a 10 Tbit/s plan over loopback's round trip): slots grow
                 // to 2 x 128 KiB in FIFOs of 4, and ring all-reduce chunks span 3 slices (communicator.cc)
};

const char* variantName(Variant v) {
  switch (v) {
    case Variant::Shm: return "shm";
    case Variant::Tcp: return "tcp";
    case Variant::Tcp2: return "tcp2socks";
    case Variant::Tcp4: return "tcp4socks";
    case Variant::Tcp6: return "tcp6";
    case Variant::SmallSlots: return "shm2x4k";
    case Variant::Ring: return "ring";
    case Variant::RecDouble: return "recdouble";
    case Variant::BiRing: return "biring";
    case Variant::Hier: return "hier";
    case Variant::Hosts: return "hosts";
    case Variant::Rabenseifner: return "rabenseifner";
    case Variant::Tree: return "tree";
    case Variant::LongFat: return "longfat";
  }
  return "?";
}

struct SweepParam {
  Coll coll;
  int nRanks;
  Variant variant;
  bool quick;  // also runs under CFX_TEST_QUICK=1
};

// ::1 can be bound (IPv6 may be disabled in a container).
bool ipv6LoopbackAvailable() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

std::vector<SweepParam> sweepParams() {
  const Coll kAll[] = {Coll::AllReduce, Coll::Broadcast, Coll::Bcast, Coll::Reduce,  Coll::AllGather,
                       Coll::ReduceScatter, Coll::AlltoAll, Coll::Gather, Coll::Scatter};
  std::vector<SweepParam> out;
  for (Coll c : kAll) {
    for (int n : {1, 2, 3, 4, 7, 8}) out.push_back({c, n, Variant::Shm, n == 1 || n == 3 || n == 8});
    for (int n : {2, 3, 8}) out.push_back({c, n, Variant::Tcp, n == 3});
    // Striping changes only how bytes cross a link, so fewer shapes: every collective over 4 sockets at 3 ranks
    // (odd, so rings and trees are uneven), 2 sockets on the collectives that move the most data.
    out.push_back({c, 3, Variant::Tcp4, c == Coll::AllReduce});
    if (c == Coll::AllReduce || c == Coll::AllGather || c == Coll::ReduceScatter) {
      out.push_back({c, 2, Variant::Tcp2, false});
    }
    for (int n : {2, 7}) out.push_back({c, n, Variant::SmallSlots, n == 2});
  }
  for (int n : {2, 3, 4, 7, 8}) out.push_back({Coll::AllReduce, n, Variant::Ring, n == 3});
  for (int n : {2, 4, 8}) out.push_back({Coll::AllReduce, n, Variant::RecDouble, n == 2});
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter}) {
    for (int n : {3, 4, 7}) out.push_back({c, n, Variant::BiRing, n == 3});
  }
  for (int n : {4, 6, 8}) out.push_back({Coll::AllReduce, n, Variant::Hier, n == 4});
  for (int n : {4, 6}) out.push_back({Coll::AllGather, n, Variant::Hier, n == 4});
  for (int n : {4, 6}) out.push_back({Coll::ReduceScatter, n, Variant::Hier, false});
  for (int n : {2, 3, 6, 8}) out.push_back({Coll::AllReduce, n, Variant::Rabenseifner, n == 6});
  for (int n : {5, 8}) out.push_back({Coll::AllReduce, n, Variant::Tree, n == 5});
  for (int n : {2, 3}) out.push_back({Coll::AllReduce, n, Variant::LongFat, n == 3});
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast}) {
    out.push_back({c, 4, Variant::Hosts, c == Coll::AllReduce});
  }
  if (ipv6LoopbackAvailable()) {
    out.push_back({Coll::AllReduce, 3, Variant::Tcp6, true});
    out.push_back({Coll::AlltoAll, 2, Variant::Tcp6, false});
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> variantEnv(Variant v) {
  // A stuck collective should fail inside the library (naming the peer) well before the launcher's timeout.
  std::vector<std::pair<std::string, std::string>> env = {{"CFX_TIMEOUT_MS", "30000"}};
  switch (v) {
    case Variant::Shm: break;
    case Variant::Tcp:
    case Variant::Tcp2:
    case Variant::Tcp4:
    case Variant::Tcp6:
      env.emplace_back("NCCL_SHM_DISABLE", "1");
      env.emplace_back("CFX_TCP_SLOT_BYTES", std::to_string(kSlotBytes));
      if (v == Variant::Tcp2) env.emplace_back("NCCL_SOCKET_NTHREADS", "2");
      if (v == Variant::Tcp4 || v == Variant::Tcp6) env.emplace_back("CFX_TCP_NSOCKS", "4");
      if (v == Variant::Tcp6) env.emplace_back("NCCL_SOCKET_FAMILY", "AF_INET6");
      break;
    case Variant::SmallSlots:
      env.emplace_back("CFX_SHM_SLOTS", "2");
      env.emplace_back("CFX_SHM_SLOT_BYTES", "4096");
      break;
    case Variant::Ring: env.emplace_back("NCCL_ALGO", "allreduce:ring"); break;
    case Variant::RecDouble: env.emplace_back("NCCL_ALGO", "allreduce:recdouble,ring"); break;
    case Variant::BiRing: env.emplace_back("NCCL_ALGO", "allreduce:biring;allgather:biring;reducescatter:biring"); break;
    case Variant::Hier: env.emplace_back("NCCL_ALGO", "allreduce:hier;allgather:hier;reducescatter:hier"); break;
    case Variant::Hosts: break;
    case Variant::Rabenseifner: env.emplace_back("NCCL_ALGO", "allreduce:rabenseifner"); break;
    case Variant::Tree: env.emplace_back("NCCL_ALGO", "Tree"); break;
    case Variant::LongFat:
      env.emplace_back("NCCL_SHM_DISABLE", "1");
      env.emplace_back("NCCL_ALGO", "allreduce:ring");
      env.emplace_back("CFX_TCP_SLOT_BYTES", std::to_string(kSlotBytes));
      env.emplace_back("CFX_TCP_SLOTS", "4");
      env.emplace_back("CFX_TCP_NSOCKS", "1");
      env.emplace_back("CFX_TCP_AUTOTUNE_MBITS", "10000000");
      env.emplace_back("CFX_TCP_FIFO_MAX_BYTES", std::to_string(8 * kSlotBytes));
      break;
  }
  return env;
}

// gtest prints test parameters through this (found by argument-dependent lookup).
void PrintTo(const SweepParam& p, std::ostream* os) {
  *os << collName(p.coll) << " " << p.nRanks << " ranks " << variantName(p.variant);
}

class CollectiveSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CollectiveSweep, EveryRankGetsTheClosedFormResultBitIdentically) {
  const SweepParam p = GetParam();
  if (quickMode() && !p.quick) GTEST_SKIP() << "not part of the CFX_TEST_QUICK=1 sweep";
  RunOptions options;
  options.timeout = 240s;
  options.env = variantEnv(p.variant);
  const bool fakeHosts = p.variant == Variant::Hier || p.variant == Variant::Hosts;
  const RunResult result = runRanks(p.nRanks, options, [coll = p.coll, fakeHosts](RankContext& ctx) {
    // Ranks 2h and 2h + 1 make host h: NCCL_HOSTID is the host identity the library groups ranks by.
    if (fakeHosts) ::setenv("NCCL_HOSTID", ("sweep-host-" + std::to_string(ctx.rank() / 2)).c_str(), 1);
    runSweep(ctx, coll);
  });
  if (result.ok()) {
    std::ostringstream hashes;
    for (int r = 0; r < p.nRanks; ++r) hashes << "\n  rank " << r << ": " << result.report(r, "replicated-hash");
    EXPECT_TRUE(result.allReportsEqual("replicated-hash")) << "results differ across ranks:" << hashes.str();
  }
}

std::string sweepName(const ::testing::TestParamInfo<SweepParam>& info) {
  return std::string(collName(info.param.coll)) + "_" + std::to_string(info.param.nRanks) + "Ranks_" +
         variantName(info.param.variant);
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectiveSweep, ::testing::ValuesIn(sweepParams()), sweepName);

}  // namespace
}  // namespace cfx::itest
