// SPDX-License-Identifier: Apache-2.0
// The device planner alone (collectives/device_program.h): which collectives on device buffers run as IpcZeroCopy or
// IpcScratch and which stage, and why; NCCL_ALGO's hold on them.
#include <gtest/gtest.h>

#include "collectives/device_program.h"

namespace cfx::coll {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A 4-rank op on one shared GPU with the IPC path on and the default size rule.
DevicePlanRequest onIpc(Collective coll, size_t bytes) {
  DevicePlanRequest req;
  req.coll = coll;
  req.bytes = bytes;
  req.nRanks = 4;
  req.onDevice = true;
  req.ipc = true;
  req.ipcMinBytes = 8 * kMiB;
  req.sharedGpu = true;
  req.kernels = true;
  req.maxReduceSources = 8;
  return req;
}

PlannerOptions parse(std::string_view spec) {
  Result<PlannerOptions> r = parseAlgoSpec(spec);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : PlannerOptions{};
}

TEST(DevicePlanner, LargeOpsOnDeviceBuffersTakeTheScratchAndSmallOnesStageNamingTheRule) {
  const DevicePlan big = chooseDevicePlan(onIpc(Collective::AllReduce, 16 * kMiB), {});
  ASSERT_TRUE(big.algorithm.has_value());
  EXPECT_EQ(*big.algorithm, Algorithm::IpcScratch);
  const DevicePlan small = chooseDevicePlan(onIpc(Collective::AllReduce, 8 * kMiB - 1), {});
  EXPECT_FALSE(small.algorithm.has_value());
  EXPECT_NE(small.why.find("CFX_CUDA_IPC_MIN_BYTES"), std::string::npos) << small.why;
  EXPECT_NE(describeDevicePlan(onIpc(Collective::AllReduce, 8), small).find("staged"), std::string::npos);
  for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::AlltoAll, Collective::Gather, Collective::Scatter}) {
    EXPECT_EQ(chooseDevicePlan(onIpc(c, 8 * kMiB), {}).algorithm, Algorithm::IpcScratch) << collectiveName(c);
  }
}

TEST(DevicePlanner, SymmetricWindowsGoZeroCopyWhereTheCollectiveHasTheForm) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll}) {
    DevicePlanRequest req = onIpc(c, 64 * kMiB);
    req.zeroCopy = true;
    EXPECT_EQ(chooseDevicePlan(req, {}).algorithm, Algorithm::IpcZeroCopy) << collectiveName(c);
  }
  DevicePlanRequest bcast = onIpc(Collective::Broadcast, 64 * kMiB);
  bcast.zeroCopy = true;
  EXPECT_EQ(chooseDevicePlan(bcast, {}).algorithm, Algorithm::IpcScratch);
}

TEST(DevicePlanner, WhatNoDeviceFormRunsStages) {
  auto stages = [](DevicePlanRequest req, const char* reason) {
    const DevicePlan plan = chooseDevicePlan(req, {});
    EXPECT_FALSE(plan.algorithm.has_value()) << reason;
    EXPECT_FALSE(plan.why.empty()) << reason;
  };
  DevicePlanRequest req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.onDevice = false;
  stages(req, "host memory");
  EXPECT_FALSE(chooseDevicePlan(req, {}).onDevice);
  req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.ipc = false;
  stages(req, "no IPC");
  req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.captured = true;
  stages(req, "captured");
  // CFX_CHECK_CALLS: the check runs on the host, before the op; a one-shot op, with no host step, would skip it.
  req = onIpc(Collective::AllReduce, 64);
  req.deviceSync = true;
  req.oneShotMaxBytes = 64 << 10;
  ASSERT_EQ(chooseDevicePlan(req, {}).algorithm, Algorithm::IpcOneShot);
  req.checkCalls = true;
  stages(req, "CFX_CHECK_CALLS, one-shot size");
  EXPECT_NE(chooseDevicePlan(req, {}).why.find("CFX_CHECK_CALLS"), std::string::npos);
  req = onIpc(Collective::AllGather, 64 * kMiB);
  req.checkCalls = true;
  stages(req, "CFX_CHECK_CALLS");
  req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.hostOnly = true;
  stages(req, "codec");
  req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.kernels = false;
  stages(req, "no kernels");
  req = onIpc(Collective::ReduceScatter, 64 * kMiB);
  req.nRanks = 9;
  stages(req, "more ranks than a kernel's sources");
  stages(onIpc(Collective::Scan, 64 * kMiB), "scan");
  stages(onIpc(Collective::BroadcastDelta, 64 * kMiB), "delta broadcast");
  stages(onIpc(Collective::AllGather, 0), "no bytes");
  // Without kernels the collectives that copy only still go device-direct.
  req = onIpc(Collective::AllGather, 64 * kMiB);
  req.kernels = false;
  EXPECT_EQ(chooseDevicePlan(req, {}).algorithm, Algorithm::IpcScratch);
}

TEST(DevicePlanner, NcclAlgoExcludesDeviceAlgorithmsOnlyWhenItNamesThem) {
  DevicePlanRequest req = onIpc(Collective::AllReduce, 64 * kMiB);
  req.zeroCopy = true;
  // A list of host algorithms leaves the device programs as they are: they replace staging, not the ring.
  EXPECT_EQ(chooseDevicePlan(req, parse("ring")).algorithm, Algorithm::IpcZeroCopy);
  EXPECT_EQ(chooseDevicePlan(req, parse("allreduce:tree")).algorithm, Algorithm::IpcZeroCopy);
  EXPECT_EQ(chooseDevicePlan(req, parse("^IpcZeroCopy")).algorithm, Algorithm::IpcScratch);
  EXPECT_EQ(chooseDevicePlan(req, parse("allreduce:ring,ipcscratch")).algorithm, Algorithm::IpcScratch);
  const DevicePlan none = chooseDevicePlan(req, parse("^ipcscratch,ipczerocopy"));
  EXPECT_FALSE(none.algorithm.has_value());
  EXPECT_NE(none.why.find("NCCL_ALGO"), std::string::npos) << none.why;
  // A device algorithm a collective has no form of is refused by name.
  EXPECT_FALSE(parseAlgoSpec("broadcast:ipczerocopy").ok());
  EXPECT_TRUE(parseAlgoSpec("broadcast:ipcscratch").ok());
}

TEST(DevicePlanner, WithDeviceSideBarriersSmallAllReducesRunAsOneKernel) {
  DevicePlanRequest req = onIpc(Collective::AllReduce, 64 * 1024);
  req.deviceSync = true;
  req.oneShotMaxBytes = 64 * 1024;
  EXPECT_EQ(chooseDevicePlan(req, {}).algorithm, Algorithm::IpcOneShot);
  req.bytes = 8;
  EXPECT_EQ(chooseDevicePlan(req, {}).algorithm, Algorithm::IpcOneShot) << "below the 8 MiB rule: no host step";
  req.bytes = 64 * 1024 + 1;
  EXPECT_FALSE(chooseDevicePlan(req, {}).algorithm.has_value()) << "above the slot and below the rule: staged";
  req.bytes = 8;
  EXPECT_FALSE(chooseDevicePlan(req, parse("^ipconeshot")).algorithm.has_value());
  req.deviceSync = false;
  EXPECT_FALSE(chooseDevicePlan(req, {}).algorithm.has_value()) << "no flag board";
  DevicePlanRequest gather = onIpc(Collective::AllGather, 8);
  gather.deviceSync = true;
  gather.oneShotMaxBytes = 64 * 1024;
  EXPECT_FALSE(chooseDevicePlan(gather, {}).algorithm.has_value()) << "one-shot is all-reduce only";
  DevicePlanRequest big = onIpc(Collective::AllReduce, 64 * kMiB);
  big.deviceSync = true;
  const DevicePlan scratch = chooseDevicePlan(big, {});
  EXPECT_EQ(scratch.algorithm, Algorithm::IpcScratch);
  EXPECT_NE(scratch.why.find("device-side barriers"), std::string::npos) << scratch.why;
}

TEST(DevicePlanner, SendsAndReceivesMoveDirectFromTheSizeRuleOn) {
  DeviceP2pRequest req;
  req.ipc = true;
  req.ipcMinBytes = 8 * kMiB;
  req.bytes = 8 * kMiB;
  req.onDevice = true;
  EXPECT_TRUE(deviceP2pApplies(req));
  req.bytes = 8 * kMiB - 1;
  EXPECT_FALSE(deviceP2pApplies(req));
  req.ipcMinBytes = 0;
  req.bytes = 0;
  EXPECT_FALSE(deviceP2pApplies(req)) << "a zero-byte buffer may be NULL on one side";
  req.bytes = 1;
  req.captured = true;
  EXPECT_FALSE(deviceP2pApplies(req));
}

// The scans, the delta and the MoE family (all-to-all-v, dispatch, combine) stage through host memory.
TEST(DevicePlanner, TheTableHasAFormForEveryCollectiveButTheScansTheDeltaAndMoe) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    const bool none = coll == Collective::Scan || coll == Collective::BroadcastDelta ||
                      coll == Collective::AllToAllv || coll == Collective::MoeDispatch ||
                      coll == Collective::MoeCombine;
    EXPECT_EQ(hasDeviceAlgorithm(coll, Algorithm::IpcScratch), !none) << collectiveName(coll);
    EXPECT_FALSE(hasAlgorithm(coll, Algorithm::IpcScratch)) << "a device program in the host table";
  }
}

}  // namespace
}  // namespace cfx::coll
