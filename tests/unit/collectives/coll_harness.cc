// SPDX-License-Identifier: Apache-2.0
// Buffer layouts, closed-form expectations and verification for one collective case (test support).
#include "coll_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/float_types.h"
#include "loopback.h"

namespace cfx::testing {

namespace {

using coll::Collective;

constexpr size_t kGuardBytes = 64;
constexpr unsigned char kPoison = 0xA5;
constexpr double kPreMulScalar = 3;
constexpr int kMaxReports = 3;

// The value helpers below run on every element of every case, and the thread sanitizer's checks of their one-element
// loads and stores were about 40 % of the collective unit tests' time under it: they are left uninstrumented. The
// results are still checked: expectElements reads each one once, whole, before it looks at its elements.
#define CFX_ELEMENTWISE __attribute__((no_sanitize("thread")))

// A user buffer `misalign` bytes past a 64-byte boundary, with poisoned guard bytes on both sides.
class Buffer {
 public:
  Buffer(size_t bytes, size_t misalign)
      : bytes_(bytes), offset_(kGuardBytes + misalign), mem_(new unsigned char[offset_ + bytes + kGuardBytes + 64]) {
    base_ = mem_.get() + (64 - reinterpret_cast<uintptr_t>(mem_.get()) % 64) % 64;
    std::memset(base_, kPoison, offset_ + bytes + kGuardBytes);
  }
  unsigned char* data() { return base_ + offset_; }
  bool guardsIntact() const {
    for (size_t i = 0; i < offset_; ++i) {
      if (base_[i] != kPoison) return false;
    }
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (base_[offset_ + bytes_ + i] != kPoison) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  size_t offset_;
  std::unique_ptr<unsigned char[]> mem_;
  unsigned char* base_;
};

CFX_ELEMENTWISE void encode(DataType t, double v, void* p) {
  switch (t) {
    case DataType::Float32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, sizeof f);
      return;
    }
    case DataType::Int32: {
      const int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, sizeof i);
      return;
    }
    case DataType::Float16: {
      const uint16_t h = fp::floatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, sizeof h);
      return;
    }
    case DataType::Int8: {
      const int8_t i = static_cast<int8_t>(v);
      std::memcpy(p, &i, sizeof i);
      return;
    }
    default: ADD_FAILURE() << "the harness has no encoding for " << dataTypeName(t);
  }
}

CFX_ELEMENTWISE double decode(DataType t, const void* p) {
  switch (t) {
    case DataType::Float32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    case DataType::Int32: {
      int32_t i;
      std::memcpy(&i, p, sizeof i);
      return i;
    }
    case DataType::Float16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return fp::halfToFloat(h);
    }
    case DataType::Int8: {
      int8_t i;
      std::memcpy(&i, p, sizeof i);
      return i;
    }
    default: return 0;
  }
}

// An element's bits, read with one fixed-size load: a memcmp of a variable size per element is a call, which the
// sanitizers intercept, and the verification loops spent most of their time under TSan there.
CFX_ELEMENTWISE uint64_t elementBits(const unsigned char* p, size_t elt) {
  uint8_t b1;
  uint16_t b2;
  uint32_t b4;
  uint64_t b8;
  switch (elt) {
    case 1: std::memcpy(&b1, p, 1); return b1;
    case 2: std::memcpy(&b2, p, 2); return b2;
    case 4: std::memcpy(&b4, p, 4); return b4;
    default: std::memcpy(&b8, p, 8); return b8;
  }
}

bool isReducing(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

// Rank `rank`'s input element `idx` (index into its send buffer). Small integers, chosen per operator so that
// every partial result over up to 8 ranks is exact in int8 and float16.
CFX_ELEMENTWISE double inputValue(const CollCase& c, int rank, size_t idx) {
  const auto r = static_cast<size_t>(rank);
  if (!isReducing(c.coll)) return static_cast<double>((r * 131 + idx * 7) % 97) - 48;
  switch (c.op) {
    case RedOpKind::Max:
    case RedOpKind::Min: return static_cast<double>((r * 5 + idx * 3) % 11) - 5;
    case RedOpKind::Prod: return (r + idx) % 4 == 0 ? 2 : ((r * 3 + idx) % 2 ? -1 : 1);
    default: return static_cast<double>((r * 7 + idx * 3) % 9) - 4;
  }
}

struct Expected {
  double value;
  double tolerance;  // 0: the bits must match the encoding of value
};

Expected reduced(const CollCase& c, size_t idx) {
  const int n = c.nRanks;
  double acc = inputValue(c, 0, idx);
  for (int r = 1; r < n; ++r) {
    const double v = inputValue(c, r, idx);
    switch (c.op) {
      case RedOpKind::Prod: acc *= v; break;
      case RedOpKind::Max: acc = std::max(acc, v); break;
      case RedOpKind::Min: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (c.op == RedOpKind::PreMulSum) return {acc * kPreMulScalar, 0};
  if (c.op != RedOpKind::Avg) return {acc, 0};
  if (!isFloating(c.type)) return {static_cast<double>(static_cast<int64_t>(acc) / n), 0};  // truncates to zero
  if (std::has_single_bit(static_cast<unsigned>(n))) return {acc / n, 0};  // 1/n and every product exact
  const double eps = c.type == DataType::Float16 ? 0x1p-10 : 0x1p-23;
  return {acc / n, 16 * n * eps};
}

// Element counts of each rank's send and receive buffers (NCCL's count conventions).
struct Extent {
  size_t send;
  size_t recv;
};

Extent extent(const CollCase& c) {
  const size_t all = c.count * static_cast<size_t>(c.nRanks);
  switch (c.coll) {
    case Collective::AllGather:
    case Collective::Gather: return {c.count, all};
    case Collective::ReduceScatter:
    case Collective::Scatter: return {all, c.count};
    case Collective::AlltoAll: return {all, all};
    default: return {c.count, c.count};
  }
}

// One rank's buffers as NCCL's in-place rules lay them out; null where the collective ignores them.
struct RankBuffers {
  std::unique_ptr<Buffer> send;  // absent in place
  std::unique_ptr<Buffer> recv;  // in place: the one buffer
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t sendElems = 0;  // what sendbuff holds (0 where it is ignored)
  std::vector<unsigned char> inputCopy;
};

RankBuffers layOut(const CollCase& c, int rank) {
  const size_t elt = dataTypeSize(c.type);
  const Extent e = extent(c);
  const bool isRoot = rank == c.root;
  RankBuffers b;
  const bool usesSend = !(c.coll == Collective::Scatter && !isRoot) && !(c.coll == Collective::Broadcast && !isRoot);
  const bool usesRecv = !(c.coll == Collective::Gather && !isRoot) && !(c.coll == Collective::Reduce && !isRoot);
  b.sendElems = usesSend ? e.send : 0;
  // In place, the send (or receive) block sits inside the other buffer at NCCL's offset.
  size_t inPlaceOffset = 0;
  bool inPlace = c.inPlace;
  switch (c.coll) {
    case Collective::ReduceScatter: inPlaceOffset = static_cast<size_t>(rank) * c.count; break;
    case Collective::AllGather: inPlaceOffset = static_cast<size_t>(rank) * c.count; break;
    case Collective::Gather:
    case Collective::Scatter:
      inPlace = inPlace && isRoot;
      inPlaceOffset = static_cast<size_t>(c.root) * c.count;
      break;
    default: break;
  }
  if (inPlace) {
    const size_t big = std::max(e.send, e.recv);
    b.recv = std::make_unique<Buffer>(big * elt, c.misalign);
    unsigned char* base = b.recv->data();
    const bool sendIsInner = c.coll == Collective::AllGather || c.coll == Collective::Gather;
    b.sendbuff = sendIsInner ? base + inPlaceOffset * elt : base;
    b.recvbuff = sendIsInner ? static_cast<void*>(base) : base + inPlaceOffset * elt;
  } else {
    if (usesSend) {
      b.send = std::make_unique<Buffer>(e.send * elt, c.misalign);
      b.sendbuff = b.send->data();
    }
    if (usesRecv) {
      b.recv = std::make_unique<Buffer>(e.recv * elt, c.misalign);
      b.recvbuff = b.recv->data();
    }
  }
  if (b.sendElems > 0) {
    auto* p = static_cast<unsigned char*>(const_cast<void*>(b.sendbuff));
    for (size_t i = 0; i < b.sendElems; ++i) encode(c.type, inputValue(c, rank, i), p + i * elt);
    b.inputCopy.assign(p, p + b.sendElems * elt);
  }
  return b;
}

// Compares `count` elements at `got` with expectation(i); reports the first few mismatches.
template <typename Fn>
void expectElements(const CollCase& c, int rank, const char* what, const void* got, size_t count, Fn expectation) {
  const size_t elt = dataTypeSize(c.type);
  const auto* whole = static_cast<const unsigned char*>(got);
  const std::vector<unsigned char> copy(whole, whole + count * elt);  // the one checked read (see CFX_ELEMENTWISE)
  const unsigned char* p = copy.data();
  int reported = 0;
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    const Expected want = expectation(i);
    unsigned char wantBits[8];
    encode(c.type, want.value, wantBits);
    const double have = decode(c.type, p + i * elt);
    const bool ok = want.tolerance == 0 ? elementBits(wantBits, elt) == elementBits(p + i * elt, elt)
                                        : std::fabs(have - want.value) <= want.tolerance;
    if (ok) continue;
    ++mismatches;
    if (reported++ < kMaxReports) {
      ADD_FAILURE() << "rank " << rank << " " << what << "[" << i << "] = " << have << ", expected " << want.value;
    }
  }
  if (mismatches > kMaxReports) ADD_FAILURE() << "rank " << rank << ": " << mismatches << " mismatches in all";
}

ReduceOp loweredOp(const CollCase& c) {
  if (c.op != RedOpKind::PreMulSum) return ReduceOp::builtin(c.type, c.op, c.nRanks);
  unsigned char scalar[8] = {};
  encode(c.type, kPreMulScalar, scalar);
  return ReduceOp::preMulSum(c.type, scalar);
}

void verify(const CollCase& c, std::vector<RankBuffers>& bufs) {
  const int n = c.nRanks;
  const size_t elt = dataTypeSize(c.type);
  const size_t count = c.count;
  auto exact = [](double v) { return Expected{v, 0}; };
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = bufs[static_cast<size_t>(r)];
    const bool isRoot = r == c.root;
    switch (c.coll) {
      case Collective::AllReduce:
        expectElements(c, r, "recvbuff", b.recvbuff, count, [&](size_t i) { return reduced(c, i); });
        if (r > 0 && std::memcmp(b.recvbuff, bufs[0].recvbuff, count * elt) != 0) {
          ADD_FAILURE() << "rank " << r << "'s AllReduce result differs in its bits from rank 0's";
        }
        break;
      case Collective::Reduce:
        if (isRoot) expectElements(c, r, "recvbuff", b.recvbuff, count, [&](size_t i) { return reduced(c, i); });
        break;
      case Collective::ReduceScatter:
        expectElements(c, r, "recvbuff", b.recvbuff, count,
                       [&](size_t j) { return reduced(c, static_cast<size_t>(r) * count + j); });
        break;
      case Collective::Scan:
      case Collective::AllToAllv:
      case Collective::MoeDispatch:
      case Collective::MoeCombine:
        break;  // tests of their own (scan_test.cc, alltoallv_test.cc, moe_test.cc)
      case Collective::Broadcast:
      case Collective::BroadcastDelta:
        expectElements(c, r, "recvbuff", b.recvbuff, count, [&](size_t i) { return exact(inputValue(c, c.root, i)); });
        break;
      case Collective::AllGather:
        expectElements(c, r, "recvbuff", b.recvbuff, n * count,
                       [&](size_t i) { return exact(inputValue(c, static_cast<int>(i / count), i % count)); });
        break;
      case Collective::AlltoAll:
        expectElements(c, r, "recvbuff", b.recvbuff, n * count, [&](size_t i) {
          return exact(inputValue(c, static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count));
        });
        break;
      case Collective::Gather:
        if (isRoot) {
          expectElements(c, r, "recvbuff", b.recvbuff, n * count,
                         [&](size_t i) { return exact(inputValue(c, static_cast<int>(i / count), i % count)); });
        }
        break;
      case Collective::Scatter:
        expectElements(c, r, "recvbuff", b.recvbuff, count,
                       [&](size_t j) { return exact(inputValue(c, c.root, static_cast<size_t>(r) * count + j)); });
        break;
    }
    // Inputs are const: an out-of-place send buffer, and an in-place Reduce buffer on a non-root, keep their bytes.
    const bool inputKept = !c.inPlace || (c.coll == Collective::Reduce && !isRoot) ||
                           ((c.coll == Collective::Gather || c.coll == Collective::Scatter) && !isRoot);
    if (inputKept && b.sendElems > 0 && std::memcmp(b.sendbuff, b.inputCopy.data(), b.inputCopy.size()) != 0) {
      ADD_FAILURE() << "rank " << r << "'s sendbuff was modified";
    }
    if ((b.send && !b.send->guardsIntact()) || (b.recv && !b.recv->guardsIntact())) {
      ADD_FAILURE() << "rank " << r << " wrote outside its buffers";
    }
  }
}

}  // namespace

std::string CollCase::describe() const {
  return std::string(coll::collectiveName(coll)) + "/" + coll::algorithmName(algorithm) +
         " n=" + std::to_string(nRanks) + " count=" + std::to_string(count) + " " + dataTypeName(type) +
         (isReducing(coll) ? std::string("/") + redOpName(op) : "") + (inPlace ? " in-place" : " out-of-place") +
         " root=" + std::to_string(root) + " misalign=" + std::to_string(misalign) +
         " fifo=" + std::to_string(geometry.slotBytes) + "x" + std::to_string(geometry.nSlots) +
         (directThreshold > 0 ? " direct>=" + std::to_string(directThreshold) : "") +
         (ringChunkSlices > 1 ? " chunk=" + std::to_string(ringChunkSlices) + "slices" : "") + hostsText();
}

std::string CollCase::hostsText() const {
  if (hosts.empty()) return "";
  std::string text = " hosts=";
  for (size_t r = 0; r < hosts.size(); ++r) text += (r ? "," : "") + std::to_string(hosts[r]);
  if (!devices.empty()) text += " devices=";
  for (size_t r = 0; r < devices.size(); ++r) text += (r ? "," : "") + std::to_string(devices[r]);
  return text;
}

CaseStats runCase(const CollCase& c) {
  SCOPED_TRACE(c.describe());
  const int n = c.nRanks;
  std::vector<RankBuffers> bufs;
  std::vector<coll::CollArgs> args(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    bufs.push_back(layOut(c, r));
    coll::CollArgs& a = args[static_cast<size_t>(r)];
    a.coll = c.coll;
    a.sendbuff = bufs.back().sendbuff;
    a.recvbuff = bufs.back().recvbuff;
    a.count = c.count;
    a.type = c.type;
    a.op = loweredOp(c);
    a.root = c.root;
  }
  LoopbackWorld world(n, c.geometry, c.directThreshold);
  world.setRingChunkSlices(c.ringChunkSlices);
  const coll::Layout layout =
      coll::Layout::fromPlaces(c.hosts.empty() ? std::vector<uint64_t>(static_cast<size_t>(n), 0) : c.hosts,
                               c.devices.empty() ? std::vector<int64_t>(static_cast<size_t>(n), 0) : c.devices);
  const coll::Plan plan{c.algorithm, &layout};
  const std::vector<Status> st = world.runRanks(
      [&](int rank, prims::Prims& prims) { return coll::runCollective(args[static_cast<size_t>(rank)], plan, prims); });
  bool allOk = true;
  for (int r = 0; r < n; ++r) {
    if (st[static_cast<size_t>(r)].ok()) continue;
    allOk = false;
    ADD_FAILURE() << "rank " << r << ": " << errcName(st[static_cast<size_t>(r)].code()) << ": "
                  << st[static_cast<size_t>(r)].message();
  }
  if (allOk) verify(c, bufs);
  return CaseStats{world.directReads()};
}

bool skippedInQuickRuns(DataType type, RedOpKind op) {
  static const bool quick = std::getenv("CFX_TEST_QUICK") != nullptr;
  if (!quick) return false;
#if defined(__SANITIZE_THREAD__)
  // Which thread touches which bytes when does not depend on the element size or on whether the result is divided
  // afterwards, so the thread sanitizer run keeps one type and two lowerings (plain and pre-multiplying).
  const bool keptType = type == DataType::Float32;
  const bool keptOp = op == RedOpKind::Max || op == RedOpKind::PreMulSum;
#else
  const bool keptType = type == DataType::Float32 || type == DataType::Int8;
  const bool keptOp = op == RedOpKind::Max || op == RedOpKind::Avg || op == RedOpKind::PreMulSum;
#endif
  return !keptType || !keptOp;
}

bool placementSkippedInQuickRuns(size_t k, bool inPlace) {
  static const bool quick = std::getenv("CFX_TEST_QUICK") != nullptr;
  return quick && inPlace != (k % 2 == 1);
}

std::vector<size_t> sweepCounts(int nRanks, DataType type, size_t sliceBytes) {
  const size_t sliceElems = sliceBytes / dataTypeSize(type);
  const size_t loop = 2 * sliceElems * static_cast<size_t>(nRanks);
  std::vector<size_t> counts = {
      0, 1, 2, static_cast<size_t>(nRanks - 1), 13, sliceElems - 1, sliceElems, sliceElems + 1, 3 * loop + 7};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::vector<int> sweepRoots(int nRanks) {
  std::vector<int> roots = {0, nRanks - 1, nRanks / 2};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

namespace {

struct Placement {
  std::vector<uint64_t> hosts;
  std::vector<int64_t> devices;  // empty: one device per host
};

void sweepLayouts(const std::vector<Placement>& layouts, coll::Collective coll, coll::Algorithm algorithm,
                  const std::vector<RedOpKind>& ops, const std::vector<size_t>& bigCounts, bool everyRoot,
                  const std::vector<DataType>& types) {
  constexpr size_t kMisalign[] = {0, 1, 4, 3};
  size_t index = 0;
  for (const auto& [hosts, devices] : layouts) {
    const int n = static_cast<int>(hosts.size());
    for (DataType type : kSweepTypes) {
      // Rooted sweeps are the data-moving ones, where a type is only its size: 4 bytes and 1 (odd sizes) suffice.
      if (everyRoot && type != DataType::Float32 && type != DataType::Int8) continue;
      if (!types.empty() && std::find(types.begin(), types.end(), type) == types.end()) continue;
      // Data collectives (one op) keep the sanitizer runs' types too.
      if (ops.size() == 1 && skippedInQuickRuns(type, RedOpKind::Max)) continue;
      std::vector<size_t> counts = sweepCounts(n, type, 256);
      if (type == DataType::Float32 || type == DataType::Int8) counts.insert(counts.end(), bigCounts.begin(), bigCounts.end());
      for (RedOpKind op : ops) {
        // Data collectives pass {Sum} only: their one op is kept.
        if (ops.size() > 1 && skippedInQuickRuns(type, op)) continue;
        for (size_t k = 0; k < counts.size(); ++k) {
          const size_t count = counts[k];
          for (bool inPlace : {false, true}) {
            if (placementSkippedInQuickRuns(k, inPlace)) continue;
            for (int root : everyRoot ? sweepRoots(n) : std::vector<int>{0}) {
              CollCase c;
              c.coll = coll;
              c.algorithm = algorithm;
              c.nRanks = n;
              c.count = count;
              c.type = type;
              c.op = op;
              c.inPlace = inPlace;
              c.root = root;
              c.hosts = hosts;
              c.devices = devices;
              c.misalign = kMisalign[index++ % std::size(kMisalign)];
              runCase(c);
              if (::testing::Test::HasFailure()) return;
            }
          }
        }
      }
    }
  }
}

}  // namespace

void sweepHostLayouts(coll::Collective coll, coll::Algorithm algorithm, const std::vector<RedOpKind>& ops,
                      const std::vector<size_t>& bigCounts, bool everyRoot, const std::vector<DataType>& types) {
  const std::vector<Placement> layouts = {
      {{0, 0, 1, 1}, {}},
      {{0, 0, 0, 1, 1, 1}, {}},
      {{0, 0, 1, 1, 2, 2}, {}},
      {{0, 0, 0, 0, 1, 1, 1, 1}, {}},
      {{0, 0, 1, 1, 2, 2, 3, 3}, {}},
      {{5, 9, 5, 9, 5, 9}, {}},
      {{0, 0, 0, 1, 1}, {}},
      {{0, 1, 2}, {}},
  };
  sweepLayouts(layouts, coll, algorithm, ops, bigCounts, everyRoot, types);
}

void sweepDeviceLayouts(coll::Collective coll, coll::Algorithm algorithm, const std::vector<RedOpKind>& ops,
                        const std::vector<size_t>& bigCounts, bool everyRoot) {
  std::vector<Placement> layouts = {
      {{0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 1, 1}},  // 2 x 2 x 2 in rank order
      {{0, 1, 0, 1, 0, 1, 0, 1}, {7, 7, 3, 3, 3, 3, 7, 7}},  // hosts and devices interleaved, device ids reused
      {{0, 0, 1, 1}, {0, 1, 0, 1}},                          // one rank per device: Hier
      {{0, 0, 0, 1, 1, 1}, {0, 0, 1, 0, 0, 1}},              // devices of 2 and 1 ranks: Hier
      {{0, 0, 0, 0}, {0, 0, 1, 1}},                          // one host: Hier, which is the ring there
  };
  if (!std::getenv("CFX_TEST_QUICK")) {
    layouts.push_back({{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}});  // 3 x 2 x 2
  }
  sweepLayouts(layouts, coll, algorithm, ops, bigCounts, everyRoot, {});
}

}  // namespace cfx::testing
