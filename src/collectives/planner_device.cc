// SPDX-License-Identifier: Apache-2.0
// Choosing device programs (collectives layer): which ops run as IpcZeroCopy or IpcScratch and which stage, a pure
// function of the op's memory kind, size and windows (device_program.h), tested alone like the host planner.
#include "collectives/device_program.h"

#include <string>

namespace cfx::coll {

namespace {

struct DeviceEntry {
  Collective coll;
  Algorithm algorithm;
};

// Which collective has which device form (the files named in device_program.h).
constexpr DeviceEntry kDeviceTable[] = {
    {Collective::AllReduce, Algorithm::IpcScratch},     {Collective::Reduce, Algorithm::IpcScratch},
    {Collective::ReduceScatter, Algorithm::IpcScratch}, {Collective::AllGather, Algorithm::IpcScratch},
    {Collective::Gather, Algorithm::IpcScratch},        {Collective::Broadcast, Algorithm::IpcScratch},
    {Collective::AlltoAll, Algorithm::IpcScratch},      {Collective::Scatter, Algorithm::IpcScratch},
    {Collective::AllReduce, Algorithm::IpcZeroCopy},    {Collective::ReduceScatter, Algorithm::IpcZeroCopy},
    {Collective::AllGather, Algorithm::IpcZeroCopy},    {Collective::AlltoAll, Algorithm::IpcZeroCopy},
    {Collective::AllReduce, Algorithm::IpcOneShot},
};

}  // namespace

bool hasDeviceAlgorithm(Collective coll, Algorithm algorithm) {
  for (const DeviceEntry& e : kDeviceTable) {
    if (e.coll == coll && e.algorithm == algorithm) return true;
  }
  return false;
}

DevicePlan chooseDevicePlan(const DevicePlanRequest& req, const PlannerOptions& opts) {
  DevicePlan plan;
  plan.onDevice = req.onDevice;
  auto stage = [&plan](std::string why) {
    plan.why = std::move(why);
    return plan;
  };
  if (!req.onDevice) return stage("host memory on this rank");
  if (!req.ipc) return stage("no CUDA IPC between the ranks");
  if (req.captured) return stage("captured into a CUDA graph");
  if (req.checkCalls) return stage("CFX_CHECK_CALLS=1 checks each call on the host first");
  if (req.hostOnly) return stage("a codec, delta or ordered combine, or a scalar on the device: host only");
  if (!hasDeviceAlgorithm(req.coll, Algorithm::IpcScratch)) return stage("no device form");
  if (req.bytes == 0) return stage("no bytes");
  if (reducesOnDevice(req.coll) && (!req.kernels || req.nRanks > req.maxReduceSources)) {
    return stage(req.kernels ? strprintf("more than %d ranks for one reduce kernel", req.maxReduceSources)
                             : "no reduce kernel for its datatype in this build");
  }
  // Small all-reduces in one kernel after a device-side barrier: no host step, so no context switch per step either.
  if (req.deviceSync && req.bytes <= req.oneShotMaxBytes && hasDeviceAlgorithm(req.coll, Algorithm::IpcOneShot) &&
      opts.allows(req.coll, Algorithm::IpcOneShot)) {
    plan.algorithm = Algorithm::IpcOneShot;
    plan.why = strprintf("one kernel after a device-side barrier, up to %zu B", req.oneShotMaxBytes);
    return plan;
  }
  if (req.bytes < req.ipcMinBytes) {
    return stage(strprintf("below CFX_CUDA_IPC_MIN_BYTES, %zu B%s", req.ipcMinBytes,
                           req.sharedGpu ? " where ranks share a GPU" : ""));
  }
  if (req.zeroCopy && hasDeviceAlgorithm(req.coll, Algorithm::IpcZeroCopy) &&
      opts.allows(req.coll, Algorithm::IpcZeroCopy)) {
    plan.algorithm = Algorithm::IpcZeroCopy;
    plan.why = "buffers in symmetric windows, read where they lie";
    return plan;
  }
  if (!opts.allows(req.coll, Algorithm::IpcScratch)) return stage("NCCL_ALGO excludes IpcScratch");
  plan.algorithm = Algorithm::IpcScratch;
  plan.why = req.zeroCopy ? "through the IPC scratch (NCCL_ALGO excludes IpcZeroCopy)" : "through the IPC scratch";
  if (req.deviceSync) plan.why += ", device-side barriers";
  return plan;
}

std::string describeDevicePlan(const DevicePlanRequest& req, const DevicePlan& plan) {
  return strprintf("%s %zu B on %d ranks, device buffers: %s (%s)", collectiveName(req.coll), req.bytes, req.nRanks,
                   plan.algorithm ? algorithmName(*plan.algorithm) : "staged", plan.why.c_str());
}

bool deviceP2pApplies(const DeviceP2pRequest& req) {
  return req.ipc && !req.captured && req.onDevice && req.bytes > 0 && req.bytes >= req.ipcMinBytes;
}

}  // namespace cfx::coll
