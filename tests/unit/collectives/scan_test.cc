// SPDX-License-Identifier: Apache-2.0
// All-Scan over ranks as threads: every algorithm (Chain, RecDouble, Blelloch, Hier on several host layouts) against
// the sequential prefix, inclusive and exclusive, in and out of place, 1 to 8 ranks, counts of 0, 1, odd and several
// slices; every built-in combine on integers and floats (exact by construction), ZeCO's affine combine against a
// sequential fold, and a non-commutative user op (2x2 matrix products) whose result any reordering would change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "collectives/scan.h"
#include "common/float_types.h"
#include "loopback.h"

namespace cfx::testing {
namespace {

using coll::Algorithm;
using coll::Collective;

constexpr Algorithm kAlgorithms[] = {Algorithm::Chain, Algorithm::RecDouble, Algorithm::Blelloch, Algorithm::Hier};

// Hosts of the Hier runs: contiguous hosts, one host, and interleaved (which falls back to the flat scan).
std::vector<uint64_t> hostsFor(int n, int shape) {
  std::vector<uint64_t> h(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    h[static_cast<size_t>(r)] = shape == 0 ? static_cast<uint64_t>(r / 2) : shape == 1 ? 0 : static_cast<uint64_t>(r % 2);
  }
  return h;
}

struct ScanRun {
  std::vector<std::vector<char>> in;   // per rank
  std::vector<std::vector<char>> out;  // per rank, after the scan
  std::vector<Status> status;
};

// One scan of `count` elements on n ranks with `algorithm`; `fill(rank, buffer)` writes each rank's input.
template <typename Fill>
ScanRun runScan(int n, Algorithm algorithm, size_t count, const ReduceOp& op, bool exclusive, bool inPlace, Fill fill,
            int hostShape = 0, size_t slot = 256) {
  const size_t bytes = count * dataTypeSize(op.type);
  ScanRun run;
  run.in.assign(static_cast<size_t>(n), std::vector<char>(bytes + 1));
  run.out.assign(static_cast<size_t>(n), std::vector<char>(bytes + 1, 0x5a));
  std::vector<coll::CollArgs> args(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    fill(r, run.in[static_cast<size_t>(r)].data());
    if (inPlace) run.out[static_cast<size_t>(r)] = run.in[static_cast<size_t>(r)];
    coll::CollArgs& a = args[static_cast<size_t>(r)];
    a.coll = Collective::Scan;
    a.count = count;
    a.type = op.type;
    a.op = op;
    a.exclusive = exclusive;
    a.sendbuff = inPlace ? run.out[static_cast<size_t>(r)].data() : run.in[static_cast<size_t>(r)].data();
    a.recvbuff = run.out[static_cast<size_t>(r)].data();
  }
  LoopbackWorld world(n, {slot, 2});
  const coll::Layout layout = coll::Layout::fromHostIds(hostsFor(n, hostShape));
  const coll::Plan plan{algorithm, &layout};
  run.status = world.runRanks([&](int r, prims::Prims& p) {
    // What core does for every op: the op's signature on its messages, and a User op's units kept whole.
    p.setOpStamp(coll::opStamp(args[static_cast<size_t>(r)]), nullptr);
    p.setSliceUnit(op.combine == ReduceOp::Combine::User ? op.unitElems * dataTypeSize(op.type) : 1);
    return coll::runCollective(args[static_cast<size_t>(r)], plan, p);
  });
  return run;
}

// Small integers, so every partial result of every combine is exact in every tested type and any order of
// combination gives the same bits: then the sequential prefix is the exact expectation.
double smallValue(RedOpKind kind, int rank, size_t i) {
  const unsigned h = static_cast<unsigned>(rank * 7919 + static_cast<int>(i) * 104729) % 5;
  switch (kind) {
    case RedOpKind::Prod: return h == 0 ? -1.0 : (h == 1 ? 2.0 : 1.0);
    default: return static_cast<double>(h) - 2.0;
  }
}

void store(DataType t, char* p, size_t i, double v) {
  switch (t) {
    case DataType::Int32: { const auto x = static_cast<int32_t>(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case DataType::Int8: { const auto x = static_cast<int8_t>(v); std::memcpy(p + i, &x, 1); break; }
    case DataType::Uint64: { const auto x = static_cast<uint64_t>(static_cast<int64_t>(v)); std::memcpy(p + 8 * i, &x, 8); break; }
    case DataType::Float32: { const auto x = static_cast<float>(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case DataType::Float64: std::memcpy(p + 8 * i, &v, 8); break;
    case DataType::Float16: { const uint16_t x = fp::floatToHalf(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    case DataType::Bfloat16: { const uint16_t x = fp::floatToBf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    default: FAIL() << "type not used here";
  }
}

TEST(Scan, EveryAlgorithmOpAndTypeGivesTheSequentialPrefix) {
  const bool quick = std::getenv("CFX_TEST_QUICK") != nullptr;
  for (Algorithm algorithm : kAlgorithms) {
    for (DataType type : {DataType::Int32, DataType::Float32, DataType::Float16, DataType::Int8, DataType::Uint64}) {
      for (RedOpKind kind : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min}) {
        if (quick && type != DataType::Float32 && kind != RedOpKind::Max) continue;
        const ReduceOp op = ReduceOp::builtin(type, kind, 1);
        const size_t elt = dataTypeSize(type);
        for (int n : {1, 2, 3, 4, 5, 7, 8}) {
          if (quick && (n == 4 || n == 7)) continue;  // 16 s under TSan with all seven; the main build runs them
          for (size_t count : {size_t{0}, size_t{1}, size_t{37}, 700 / elt + 3}) {
            for (int variant = 0; variant < 2; ++variant) {
              const bool exclusive = variant == 1;
              const bool inPlace = (count + static_cast<size_t>(n)) % 2 == 0;
              ScanRun run = runScan(n, algorithm, count, op, exclusive, inPlace, [&](int r, char* p) {
                for (size_t i = 0; i < count; ++i) store(type, p, i, smallValue(kind, r, i));
              }, /*hostShape=*/n % 3);
              for (int r = 0; r < n; ++r) {
                ASSERT_TRUE(run.status[static_cast<size_t>(r)].ok()) << run.status[static_cast<size_t>(r)].message();
              }
              // The expectation: a sequential fold in rank order (the identity at an exclusive rank 0).
              std::vector<char> acc(count * elt + 1);
              ASSERT_TRUE(coll::writeScanIdentity(op, acc.data(), count).ok());
              for (int r = 0; r < n; ++r) {
                std::vector<char> want = acc;
                const char* mine = run.in[static_cast<size_t>(r)].data();
                std::vector<char> next = acc;
                coll::combineLocal(op, next.data(), acc.data(), mine, count);
                if (!exclusive) want = next;
                ASSERT_EQ(0, std::memcmp(run.out[static_cast<size_t>(r)].data(), want.data(), count * elt))
                    << coll::algorithmName(algorithm) << " " << dataTypeName(type) << " " << redOpName(kind) << " n=" << n
                    << " count=" << count << (exclusive ? " exclusive" : " inclusive") << (inPlace ? " in place" : "")
                    << " rank " << r;
                EXPECT_EQ(run.out[static_cast<size_t>(r)][count * elt], inPlace ? run.in[static_cast<size_t>(r)][count * elt] : 0x5a)
                    << "wrote past the end";
                acc = next;
              }
            }
          }
        }
      }
    }
  }
}

// ZeCO's combine on fp32 and bf16 states: every algorithm within fp32 rounding of a sequential fold in double.
TEST(Scan, AffineStatesMatchASequentialFold) {
  for (bool scalarDecay : {false, true}) {
    for (DataType type : {DataType::Float32, DataType::Bfloat16}) {
      ReduceOp op;
      op.type = type;
      op.combine = ReduceOp::Combine::Affine;
      op.rows = 4;
      op.cols = 9;
      op.scalarDecay = scalarDecay;
      const size_t group = op.groupElems();
      const size_t count = group * 3;
      const size_t decays = scalarDecay ? 1 : op.rows;
      for (Algorithm algorithm : kAlgorithms) {
        for (int n : {1, 2, 5, 8}) {
          for (bool exclusive : {false, true}) {
            std::vector<std::vector<double>> vals(static_cast<size_t>(n), std::vector<double>(count));
            std::mt19937 rng(static_cast<uint32_t>(n * 31 + exclusive));
            std::uniform_real_distribution<double> decay(0.8, 1.0), state(-1.0, 1.0);
            for (int r = 0; r < n; ++r) {
              for (size_t i = 0; i < count; ++i) {
                const double v = i % group < decays ? decay(rng) : state(rng);
                // Through the type, so the reference starts from exactly what the ranks hold.
                float f = static_cast<float>(v);
                if (type == DataType::Bfloat16) f = fp::bf16ToFloat(fp::floatToBf16(f));
                vals[static_cast<size_t>(r)][i] = f;
              }
            }
            const bool inPlace = n % 2 == 1;
            ScanRun run = runScan(n, algorithm, count, op, exclusive, inPlace, [&](int r, char* p) {
              for (size_t i = 0; i < count; ++i) store(type, p, i, vals[static_cast<size_t>(r)][i]);
            }, 0, 128);
            // Reference in double: (g, S) of ranks 0..r.
            std::vector<double> acc(count, 0.0);
            for (size_t i = 0; i < count; ++i) acc[i] = i % group < decays ? 1.0 : 0.0;
            for (int r = 0; r < n; ++r) {
              ASSERT_TRUE(run.status[static_cast<size_t>(r)].ok()) << run.status[static_cast<size_t>(r)].message();
              std::vector<double> next(count);
              const std::vector<double>& x = vals[static_cast<size_t>(r)];
              for (size_t g = 0; g < count / group; ++g) {
                for (size_t i = 0; i < group; ++i) {
                  const size_t e = g * group + i;
                  if (i < decays) next[e] = acc[e] * x[e];
                  else next[e] = x[g * group + (scalarDecay ? 0 : (i - decays) / op.cols)] * acc[e] + x[e];
                }
              }
              const std::vector<double>& want = exclusive ? acc : next;
              for (size_t i = 0; i < count; ++i) {
                float got;
                if (type == DataType::Float32) {
                  std::memcpy(&got, run.out[static_cast<size_t>(r)].data() + 4 * i, 4);
                } else {
                  uint16_t h;
                  std::memcpy(&h, run.out[static_cast<size_t>(r)].data() + 2 * i, 2);
                  got = fp::bf16ToFloat(h);
                }
                const double tol = (type == DataType::Float32 ? 1e-5 : 2e-2) * n * (1 + std::fabs(want[i]));
                ASSERT_NEAR(got, want[i], tol) << coll::algorithmName(algorithm) << " n=" << n << " rank " << r
                                               << " element " << i << (exclusive ? " exclusive" : "");
              }
              acc = next;
            }
          }
        }
      }
    }
  }
}

// 2x2 integer matrices multiplied in rank order: any reordering gives another product.
void matmul(const void* in, void* inout, size_t count, int, void*) {
  const auto* a = static_cast<const double*>(in);
  auto* b = static_cast<double*>(inout);
  ASSERT_EQ(count % 4, 0u) << "a unit split across slices";
  for (size_t m = 0; m < count; m += 4) {
    const double r[4] = {a[m] * b[m] + a[m + 1] * b[m + 2], a[m] * b[m + 1] + a[m + 1] * b[m + 3],
                         a[m + 2] * b[m] + a[m + 3] * b[m + 2], a[m + 2] * b[m + 1] + a[m + 3] * b[m + 3]};
    std::memcpy(b + m, r, sizeof(r));
  }
}

TEST(Scan, NonCommutativeUserOpsCombineInRankOrder) {
  ReduceOp op;
  op.type = DataType::Float64;
  op.combine = ReduceOp::Combine::User;
  op.userFn = matmul;
  op.unitElems = 4;
  const size_t count = 4 * 29;
  for (Algorithm algorithm : kAlgorithms) {
    for (int n : {1, 2, 3, 6, 8}) {
      for (bool exclusive : {false, true}) {
        auto value = [](int r, size_t i) { return static_cast<double>((r * 5 + static_cast<int>(i) * 3) % 4) - 1.0; };
        ScanRun run = runScan(n, algorithm, count, op, exclusive, n % 2 == 0, [&](int r, char* p) {
          for (size_t i = 0; i < count; ++i) store(DataType::Float64, p, i, value(r, i));
        }, 0, 200);  // 25 doubles a slice: units of 4 must never be split
        std::vector<double> acc(count);
        bool empty = true;
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(run.status[static_cast<size_t>(r)].ok()) << run.status[static_cast<size_t>(r)].message();
          std::vector<double> x(count);
          for (size_t i = 0; i < count; ++i) x[i] = value(r, i);
          std::vector<double> next = x;
          if (!empty) matmul(acc.data(), next.data(), count, 0, nullptr);
          const std::vector<double>& want = exclusive ? acc : next;
          if (!(exclusive && empty)) {  // an exclusive rank 0 keeps its buffer: a user op has no identity
            ASSERT_EQ(0, std::memcmp(run.out[static_cast<size_t>(r)].data(), want.data(), count * 8))
                << coll::algorithmName(algorithm) << " n=" << n << " rank " << r << (exclusive ? " exclusive" : "");
          }
          acc = next;
          empty = false;
        }
      }
    }
  }
}

TEST(Scan, RanksDisagreeingOnTheAffineShapeFailByName) {
  ReduceOp a;
  a.type = DataType::Float32;
  a.combine = ReduceOp::Combine::Affine;
  a.rows = 2;
  a.cols = 3;
  ReduceOp b = a;
  b.rows = 4;
  b.cols = 1;  // the same group size (8): only the signature tells them apart
  ASSERT_EQ(a.groupElems(), b.groupElems());
  LoopbackWorld world(2, {256, 2});
  std::vector<float> in(16, 1.0f), out0(16), out1(16);
  std::vector<coll::CollArgs> args(2);
  for (int r = 0; r < 2; ++r) {
    coll::CollArgs& x = args[static_cast<size_t>(r)];
    x.coll = Collective::Scan;
    x.count = 16;
    x.type = DataType::Float32;
    x.op = r == 0 ? a : b;
    x.sendbuff = in.data();
    x.recvbuff = r == 0 ? out0.data() : out1.data();
  }
  const coll::Plan plan{Algorithm::Chain};
  const auto st = world.runRanks([&](int r, prims::Prims& p) {
    p.setOpStamp(coll::opStamp(args[static_cast<size_t>(r)]), nullptr);
    return coll::runCollective(args[static_cast<size_t>(r)], plan, p);
  }, std::chrono::seconds(3));
  EXPECT_EQ(st[1].code(), Errc::InvalidUsage) << st[1].message();
  EXPECT_NE(st[1].message().find("mismatched"), std::string::npos) << st[1].message();
}

}  // namespace
}  // namespace cfx::testing
