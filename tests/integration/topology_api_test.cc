// SPDX-License-Identifier: Apache-2.0
// cfxCommGetTopology and cfxCommGetPlan through the public API: what the planner knows of where ranks run, and
// what it would choose, on one host and on "hosts" made with NCCL_HOSTID (shared memory within, tcp between).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "conflux.h"
#include "integration/multiproc.h"
#include "nccl.h"

namespace cfx::itest {
namespace {

constexpr size_t k64MiBFloats = size_t{16} << 20;

std::string planOf(ncclComm_t comm, int coll, size_t count) {
  cfxPlanInfo plan{};
  if (cfxCommGetPlan(comm, coll, count, ncclFloat, &plan) != ncclSuccess) return "error";
  return plan.algorithm;
}

TEST(TopologyApi, TwoHostsOfTwoRanksPlanHierarchicalAllReduce) {
  const RunResult result = runRanks(4, [](RankContext& ctx) {
    ::setenv("NCCL_HOSTID", ("topo-host-" + std::to_string(ctx.rank() / 2)).c_str(), 1);
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cfxTopologyInfo info{};
    ASSERT_EQ(cfxCommGetTopology(comm, &info), ncclSuccess);
    EXPECT_EQ(info.nRanks, 4);
    EXPECT_EQ(info.nHosts, 2);
    EXPECT_EQ(info.host, ctx.rank() / 2);
    EXPECT_EQ(info.localRank, ctx.rank() % 2);
    EXPECT_EQ(info.localRanks, 2);
    EXPECT_EQ(info.uniform, 1);
    EXPECT_EQ(info.priced, 1);
    cfxTopologyLevels levels{};
    ASSERT_EQ(cfxCommGetTopologyLevels(comm, &levels), ncclSuccess);
    EXPECT_EQ(levels.threeLevel, 0);  // nothing places ranks below hosts: each host is one device
    EXPECT_EQ(levels.devices, 1);
    EXPECT_EQ(levels.deviceRanks, 2);
    EXPECT_EQ(levels.deviceRank, ctx.rank() % 2);
    EXPECT_EQ(levels.midGbps, 0);
    EXPECT_EQ(cfxCommGetTopologyLevels(comm, nullptr), ncclInvalidArgument);
    // Two ranks of a host share its network link in the cross-host step.
    EXPECT_GT(info.crossGbps, 0);
    EXPECT_NEAR(info.crossGbps * 2, info.ringGbps, 1e-9);

    EXPECT_EQ(planOf(comm, cfxCollAllReduce, k64MiBFloats), "Hier");
    EXPECT_EQ(planOf(comm, cfxCollAllReduce, 16), "Exchange");
    EXPECT_EQ(planOf(comm, cfxCollBroadcast, k64MiBFloats), "Hier");  // leaders across hosts, then within each
    cfxPlanInfo plan{};
    ASSERT_EQ(cfxCommGetPlan(comm, cfxCollAllGather, 1000, ncclFloat, &plan), ncclSuccess);
    EXPECT_EQ(plan.bytes, 4u * 1000u * 4u);  // count is per rank: the gathered buffer is what moves
    ASSERT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, k64MiBFloats, ncclFloat, &plan), ncclSuccess);
    EXPECT_GT(plan.estimateUs, 0);
    EXPECT_NE(std::string(plan.text).find("model: Ring"), std::string::npos) << plan.text;

    // The plan is what runs: a hierarchical all-reduce gives every rank the sum.
    std::vector<float> v(k64MiBFloats / 64 + 3, static_cast<float>(ctx.rank() + 1));
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    for (float x : v) ASSERT_EQ(x, 10.0f);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_TRUE(result.ok());
}

TEST(TopologyApi, OneHostKeepsTheRingAndNcclAlgoIsHonoured) {
  RunOptions options;
  options.env = {{"NCCL_ALGO", "allreduce:biring;allgather:ring"}};
  const RunResult result = runRanks(3, options, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cfxTopologyInfo info{};
    ASSERT_EQ(cfxCommGetTopology(comm, &info), ncclSuccess);
    EXPECT_EQ(info.nHosts, 1);
    EXPECT_EQ(info.localRanks, 3);
    EXPECT_EQ(info.crossGbps, 0);
    EXPECT_EQ(planOf(comm, cfxCollAllReduce, k64MiBFloats), "BiRing");
    EXPECT_EQ(planOf(comm, cfxCollAllGather, k64MiBFloats), "Ring");
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_TRUE(result.ok());
}

// NCCL_TOPO_FILE declares 2 hosts x 2 devices (NUMA nodes joined at 2 Gbit/s) x 2 ranks; the ranks run as pairs
// with their own NCCL_HOSTID (shared memory within a pair, tcp between). The layout follows the file, the planner
// takes the 3-level all-reduce for large buffers, and that all-reduce gives every rank the same, right result.
TEST(TopologyApi, ThreeLevelTopologyFilePlansAndRunsHier3) {
  const std::string file = "/tmp/cfx-topo-3level-" + std::to_string(::getpid()) + ".xml";
  {
    std::ofstream out(file);
    out << "<system version=\"1\">\n";
    for (int h = 0; h < 2; ++h) {
      out << "  <host id=\"" << h << "\"><numa id=\"0\"/><numa id=\"1\"/><nic name=\"e0\" speed=\"1000\" numa=\"0\"/>"
          << "<nic name=\"e1\" speed=\"1000\" numa=\"1\"/></host>\n"
          << "  <link a=\"h" << h << ":numa0\" b=\"h" << h << ":numa1\" class=\"smp\" bw=\"0.25\" lat=\"20\"/>\n";
    }
    for (int r = 0; r < 8; ++r)
      out << "  <rank id=\"" << r << "\" host=\"" << r / 4 << "\" numa=\"" << r % 4 / 2 << "\"/>\n";
    out << "</system>\n";
  }
  RunOptions options;
  // The gathering pair is forced (the planner's own pick at this size is BiRing, which this shape's per-device NICs
  // give twice the ring's bandwidth); the all-reduce runs the planner's pick.
  options.env = {
      {"NCCL_TOPO_FILE", file}, {"CFX_TIMEOUT_MS", "60000"}, {"NCCL_ALGO", "allgather:hier3;reducescatter:hier3"}};
  const RunResult result = runRanks(8, options, [](RankContext& ctx) {
    ::setenv("NCCL_HOSTID", ("topo-device-" + std::to_string(ctx.rank() / 2)).c_str(), 1);
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cfxTopologyInfo info{};
    ASSERT_EQ(cfxCommGetTopology(comm, &info), ncclSuccess);
    EXPECT_EQ(info.nHosts, 2);  // the file's hosts, not the four host ids
    EXPECT_EQ(info.localRanks, 4);
    cfxTopologyLevels levels{};
    ASSERT_EQ(cfxCommGetTopologyLevels(comm, &levels), ncclSuccess);
    EXPECT_EQ(levels.threeLevel, 1);
    EXPECT_EQ(levels.devices, 2);
    EXPECT_EQ(levels.device, ctx.rank() % 4 / 2);
    EXPECT_EQ(levels.deviceRank, ctx.rank() % 2);
    EXPECT_EQ(levels.deviceRanks, 2);
    // Each 1 Gbit/s NIC serves its device's two ranks; each 2 Gbit/s link between devices one flow each way, which
    // the two indices share.
    EXPECT_NEAR(levels.crossGbps, 0.125 / 2, 1e-9);
    EXPECT_NEAR(levels.midGbps, 0.25 / 2, 1e-9);
    EXPECT_GT(levels.deviceGbps, levels.midGbps);
    EXPECT_EQ(planOf(comm, cfxCollAllReduce, k64MiBFloats), "Hier3");
    // 4 MiB: two pipelined segments. Sum in place, average out of place.
    const size_t count = (size_t{1} << 20) + 5;
    std::vector<float> v(count, static_cast<float>(ctx.rank() + 1));
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), count, ncclFloat, ncclSum, comm, nullptr), ncclSuccess);
    for (float x : v) ASSERT_EQ(x, 36.0f);
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(8 * (i % 1000) + ctx.rank());
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclAvg, comm, nullptr), ncclSuccess);
    // (8 * 8k + 0 + 1 + ... + 7) / 8 = 8k + 3 (28 / 8 truncated)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(8 * (i % 1000) + 3)) << i;
    // The gathering pair: 512 KiB blocks (several pipelined segments), every rank's block in place.
    const size_t block = (size_t{1} << 17) + 3;
    std::vector<int32_t> all(8 * block);
    for (size_t i = 0; i < block; ++i)
      all[static_cast<size_t>(ctx.rank()) * block + i] = static_cast<int32_t>(ctx.rank() * 1000 + i % 777);
    ASSERT_EQ(ncclAllGather(all.data() + static_cast<size_t>(ctx.rank()) * block, all.data(), block, ncclInt32, comm,
                            nullptr),
              ncclSuccess);
    for (size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(all[i], static_cast<int32_t>(i / block * 1000 + i % block % 777)) << i;
    std::vector<int32_t> mine(block, -1);
    ASSERT_EQ(ncclReduceScatter(all.data(), mine.data(), block, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    // Every rank contributed the gathered buffer: 8 times its block.
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(mine[i], 8 * static_cast<int32_t>(ctx.rank() * 1000 + i % 777)) << i;
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  std::remove(file.c_str());
  EXPECT_TRUE(result.ok());
}

// Ranks that share a CPU wait for the scheduler at every step, and the model prices that: the same op on the same
// two "hosts" costs a step's overhead more once both ranks are pinned to one CPU.
TEST(TopologyApi, RanksPinnedToOneCpuArePricedForWaitingOnIt) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &original)) cpus.push_back(c);
  }
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to give each rank its own";
  const RunResult result = runRanks(2, [&](RankContext& ctx) {
    ::setenv("NCCL_HOSTID", ("pinned-host-" + std::to_string(ctx.rank())).c_str(), 1);
    auto estimateOn = [&](int cpu, const char* name) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      EXPECT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, 2, ctx.newUniqueId(), ctx.rank()), ncclSuccess);
      cfxPlanInfo plan{};
      EXPECT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, 16, ncclFloat, &plan), ncclSuccess);
      EXPECT_STREQ(plan.algorithm, "Exchange");  // two ranks, a few bytes: one round either way
      ctx.report(name, std::to_string(plan.estimateUs));
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      return plan.estimateUs;
    };
    const double own = estimateOn(cpus[static_cast<size_t>(ctx.rank())], "own");
    const double shared = estimateOn(cpus[0], "shared");
    EXPECT_EQ(sched_setaffinity(0, sizeof original, &original), 0);
    // One round of Exchange is one step: it now includes a wait for the scheduler.
    EXPECT_GT(shared - own, 10) << own << " against " << shared;
    EXPECT_LT(shared - own, 100) << own << " against " << shared;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.allReportsEqual("own"));
  EXPECT_TRUE(result.allReportsEqual("shared"));
}

// CFX_TOPO_CALIBRATE: each rank times its own copies, so the ranks plan with the median; the dump (rank 0's) holds
// the same figure, marked measured.
TEST(TopologyApi, CalibratedRanksPlanWithOneAgreedFigure) {
  const std::string dump = "/tmp/cfx-topo-calibrated-" + std::to_string(::getpid()) + ".xml";
  RunOptions options;
  options.env = {{"CFX_TOPO_CALIBRATE", "1"}, {"NCCL_TOPO_DUMP_FILE", dump}};
  const RunResult result = runRanks(3, options, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cfxTopologyInfo info{};
    ASSERT_EQ(cfxCommGetTopology(comm, &info), ncclSuccess);
    EXPECT_EQ(info.priced, 1);
    EXPECT_GT(info.ringGbps, 0);
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", info.ringGbps);
    ctx.report("ring", text);
    cfxPlanInfo plan{};
    ASSERT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, 1 << 20, ncclFloat, &plan), ncclSuccess);
    ctx.report("plan", std::string(plan.algorithm) + " " + std::to_string(plan.estimateUs));
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.allReportsEqual("ring")) << result.report(0, "ring") << " / " << result.report(1, "ring")
                                              << " / " << result.report(2, "ring");
  EXPECT_TRUE(result.allReportsEqual("plan"));
  std::ifstream in(dump);
  ASSERT_TRUE(in.good()) << "no dump at " << dump;
  std::string line, memory;
  while (std::getline(in, line)) {
    if (line.find("name=\"memory\"") != std::string::npos) memory = line;
  }
  std::remove(dump.c_str());
  ASSERT_FALSE(memory.empty());
  EXPECT_NE(memory.find("measured=\"1\""), std::string::npos) << memory;
  // One host: the ring over all ranks moves at the memory class's figure.
  const size_t at = memory.find("bw=\"");
  ASSERT_NE(at, std::string::npos) << memory;
  EXPECT_NEAR(std::stod(memory.substr(at + 4)), std::stod(result.report(0, "ring")), 1e-6) << memory;
}

TEST(TopologyApi, BadArgumentsAreRefusedWithAReason) {
  const RunResult result = runRanks(1, [](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    cfxPlanInfo plan{};
    EXPECT_EQ(cfxCommGetTopology(comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxCommGetTopology(nullptr, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, 1, ncclFloat, nullptr), ncclInvalidArgument);
    EXPECT_EQ(cfxCommGetPlan(comm, 1000, 1, ncclFloat, &plan), ncclInvalidArgument);
    EXPECT_EQ(cfxCommGetPlan(comm, -1, 1, ncclFloat, &plan), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("not a cfxCollective"), std::string::npos);
    EXPECT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, 1, ncclNumTypes, &plan), ncclInvalidArgument);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  EXPECT_TRUE(result.ok());
}

}  // namespace
}  // namespace cfx::itest
