// SPDX-License-Identifier: Apache-2.0
// All-Scan through the public API, one process per rank: cfxScan and cfxExScan with built-in, affine and user ops
// under every schedule NCCL_ALGO can force, over shared memory and TCP; and the bad inputs refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "conflux.h"
#include "multiproc.h"
#include "nccl.h"

namespace {

using cfx::itest::RankContext;
using cfx::itest::RunOptions;
using cfx::itest::runRanks;

// 2x2 matrices multiplied in rank order (in is the lower ranks' product).
void matmul(const void* in, void* inout, size_t count, ncclDataType_t, void*) {
  const auto* a = static_cast<const double*>(in);
  auto* b = static_cast<double*>(inout);
  for (size_t m = 0; m + 3 < count; m += 4) {
    const double r[4] = {a[m] * b[m] + a[m + 1] * b[m + 2], a[m] * b[m + 1] + a[m + 1] * b[m + 3],
                         a[m + 2] * b[m] + a[m + 3] * b[m + 2], a[m + 2] * b[m + 1] + a[m + 3] * b[m + 3]};
    std::memcpy(b + m, r, sizeof(r));
  }
}

double matValue(int rank, size_t i) { return static_cast<double>((rank * 3 + static_cast<int>(i)) % 3) - 1.0; }

void everyScan(int nRanks, const RunOptions& options) {
  const auto result = runRanks(nRanks, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    const int me = ctx.rank();
    const size_t count = 10007;
    // Built-in sum, inclusive, in place, on int32: rank r holds r + 1 + i % 5.
    std::vector<int32_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = me + 1 + static_cast<int32_t>(i % 5);
    ASSERT_EQ(cfxScan(v.data(), v.data(), count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(v[i], (me + 1) * (me + 2) / 2 + (me + 1) * static_cast<int32_t>(i % 5)) << i;
    }
    // Exclusive max on float: rank 0 gets -inf.
    std::vector<float> f(count, static_cast<float>((me * 7) % 5)), g(count);
    ASSERT_EQ(cfxExScan(f.data(), g.data(), count, ncclFloat, ncclMax, comm, nullptr), ncclSuccess);
    float want = -INFINITY;
    for (int r = 0; r < me; ++r) want = std::max(want, static_cast<float>((r * 7) % 5));
    EXPECT_EQ(g[0], want);
    EXPECT_EQ(g[count - 1], want);
    // Affine: decays of 0.5 and states of 1 give S = 1 + 0.5 + 0.25 + ... (inclusive, rank r: r + 1 terms).
    ncclRedOp_t affine;
    ASSERT_EQ(cfxRedOpCreateAffine(&affine, 2, 3, 0, ncclFloat, comm), ncclSuccess);
    std::vector<float> a(8 * 4), b(8 * 4);
    for (size_t i = 0; i < a.size(); ++i) a[i] = i % 8 < 2 ? 0.5f : 1.0f;
    ASSERT_EQ(cfxScan(a.data(), b.data(), a.size(), ncclFloat, affine, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    float geometric = 0, weight = 1;
    for (int r = 0; r <= me; ++r, weight *= 0.5f) geometric += weight;
    EXPECT_FLOAT_EQ(b[2], geometric);
    EXPECT_FLOAT_EQ(b[0], std::pow(0.5f, static_cast<float>(me + 1)));
    ASSERT_EQ(ncclRedOpDestroy(affine, comm), ncclSuccess);
    // A non-commutative user op.
    ncclRedOp_t mat;
    ASSERT_EQ(cfxRedOpCreateUser(&mat, matmul, nullptr, 4, 0, ncclFloat64, comm), ncclSuccess);
    std::vector<double> m(4 * 50), out(4 * 50);
    for (size_t i = 0; i < m.size(); ++i) m[i] = matValue(me, i);
    ASSERT_EQ(cfxScan(m.data(), out.data(), m.size(), ncclFloat64, mat, comm, nullptr), ncclSuccess);
    std::vector<double> acc(m.size());
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = matValue(0, i);
    for (int r = 1; r <= me; ++r) {
      std::vector<double> x(m.size());
      for (size_t i = 0; i < x.size(); ++i) x[i] = matValue(r, i);
      matmul(acc.data(), x.data(), x.size(), ncclFloat64, nullptr);
      acc = x;
    }
    EXPECT_EQ(out, acc) << "rank " << me;
    ASSERT_EQ(ncclRedOpDestroy(mat, comm), ncclSuccess);
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

TEST(Scan, EveryScheduleOverSharedMemory) {
  for (const char* algo : {"chain", "recdouble", "blelloch", "hier"}) {
    SCOPED_TRACE(algo);
    RunOptions o;
    o.env = {{"NCCL_ALGO", std::string("scan:") + algo}};
    everyScan(5, o);
  }
}

TEST(Scan, OverTcpWithThePlannersChoice) {
  RunOptions o;
  o.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_SOCKET_IFNAME", "lo"}};
  everyScan(3, o);
}

TEST(Scan, BadInputIsRefusedByName) {
  const auto result = runRanks(2, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    std::vector<float> f(100, 1.0f), g(100);
    auto refused = [&](ncclResult_t got, const char* word) {
      EXPECT_EQ(got, ncclInvalidArgument);
      EXPECT_NE(std::string(ncclGetLastError(comm)).find(word), std::string::npos) << ncclGetLastError(comm);
    };
    refused(cfxScan(f.data(), g.data(), 100, ncclFloat, ncclAvg, comm, nullptr), "ncclAvg");
    ncclRedOp_t pre;
    float two = 2.0f;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&pre, &two, ncclFloat, ncclScalarHostImmediate, comm), ncclSuccess);
    refused(cfxScan(f.data(), g.data(), 100, ncclFloat, pre, comm, nullptr), "PreMulSum");
    ncclRedOp_t affine;
    ASSERT_EQ(cfxRedOpCreateAffine(&affine, 3, 3, 0, ncclFloat, comm), ncclSuccess);
    refused(cfxScan(f.data(), g.data(), 100, ncclFloat, affine, comm, nullptr), "groups");  // 100 % 12 != 0
    refused(ncclAllReduce(f.data(), g.data(), 96, ncclFloat, affine, comm, nullptr), "cfxScan");
    refused(cfxRedOpCreateAffine(&affine, 0, 3, 0, ncclFloat, comm), "at least 1");
    refused(cfxRedOpCreateAffine(&affine, 2, 3, 0, ncclInt32, comm), "fp32");
    ncclRedOp_t user;
    refused(cfxRedOpCreateUser(&user, matmul, nullptr, 1u << 20, 0, ncclFloat64, comm), "fit");
    ASSERT_EQ(cfxRedOpCreateUser(&user, matmul, nullptr, 4, 0, ncclFloat64, comm), ncclSuccess);
    std::vector<double> d(10), e(10);
    refused(cfxScan(d.data(), e.data(), 10, ncclFloat64, user, comm, nullptr), "units");
    // The communicator still works.
    EXPECT_EQ(cfxScan(f.data(), g.data(), 100, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(g[0], static_cast<float>(ctx.rank() + 1));
    ncclCommDestroy(comm);
  });
  ASSERT_TRUE(result.ok());
}

TEST(Scan, RanksDisagreeingOnTheOpFailByNameWithoutAHang) {
  RunOptions o;
  o.env = {{"CFX_TIMEOUT_MS", "10000"}, {"NCCL_ALGO", "scan:chain"}};
  const auto result = runRanks(3, o, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    ncclRedOp_t affine;
    // Groups of 8 elements either way: 2 decays + 2 x 3, or 4 decays + 4 x 1.
    ASSERT_EQ(cfxRedOpCreateAffine(&affine, ctx.rank() == 1 ? 4 : 2, ctx.rank() == 1 ? 1 : 3, 0, ncclFloat, comm), ncclSuccess);
    std::vector<float> f(64, 1.0f), g(64);
    const ncclResult_t st = cfxScan(f.data(), g.data(), 64, ncclFloat, affine, comm, nullptr);
    const std::string why = ncclGetLastError(comm);
    if (ctx.rank() == 1) {  // the rank that receives a message of the other shape names the mismatch
      EXPECT_EQ(st, ncclInvalidUsage);
      EXPECT_NE(why.find("mismatched"), std::string::npos) << why;
    } else if (ctx.rank() == 2) {  // the chain's next rank waits for rank 1, which stopped: it names rank 1
      EXPECT_NE(st, ncclSuccess);
      EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
    }
    ncclCommAbort(comm);
  });
  ASSERT_TRUE(result.ok());
}

}  // namespace
