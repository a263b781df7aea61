// SPDX-License-Identifier: Apache-2.0
// Device programs on a communicator (core layer): the glue between the device algorithms of collectives/ (IpcScratch,
// IpcZeroCopy and the p2p slots, chosen by coll::chooseDevicePlan; collectives/device_program.h) and this
// communicator: the facts the choice needs (memory kinds, the IPC scratch, windows, kernels), the INFO/TUNING line of
// every device op, and the host steps (barriers, tokens) the programs run on the progress thread. The stream side is
// core/device_stream.h, the launch core/group_device.cc.
#pragma once

#include <string>
#include <vector>

#include "collectives/device_program.h"
#include "common/cuda_driver.h"
#include "core/communicator.h"
#include "core/group.h"

namespace cfx::core {

// The plan of one communicator's group of collectives on device buffers.
struct DeviceGroupPlan {
  // Every collective of the group has a device algorithm (then they run one after another, in call order, as one
  // program); otherwise the whole group stages.
  bool direct = false;
  std::vector<coll::DeviceStep> steps;  // when direct: one per op, in call order
};

// Plans the group's ops (`captured`: its streams are being captured into a CUDA graph) and logs one INFO/TUNING line
// per collective. A group with a send or receive is not direct: its messages may move device-direct on their own
// (p2pDirectApplies), and its collectives stage.
DeviceGroupPlan planDeviceGroup(Communicator* comm, const std::vector<const Op*>& ops, bool captured);
// What a collective on these buffers would run on this rank: the device plan, or none (it stages; then the host
// planner's plan applies), with its INFO/TUNING text when `text` is given. `scalarOnDevice`: a PreMulSum whose
// scalar is in device memory. cfxCommGetPlanForBuffers and planDeviceGroup use it.
coll::DevicePlan planDeviceOp(Communicator* comm, const coll::CollArgs& args, bool scalarOnDevice, bool captured,
                              std::string* text);
// Whether a send or receive of the group moves device-direct (coll::deviceP2pApplies).
bool p2pDirectApplies(Communicator* comm, const Op& op, bool captured);
// Whether a send to self and the receive it matches (in call order) are one device copy.
bool selfDirectApplies(Communicator* comm, const Op& send, const Op& recv, bool captured);
// The buffer of a device-direct op that is device memory on every rank (a non-root's receive buffer of reduce and
// gather need not be): the op's context is its context.
const void* deviceBufferOf(const Op& op);

// Builds the program of a group's device-direct part at the call (on the caller's thread: the kernels are looked up
// in `ctx`, loaded there at init): its sends and receives (`p2p`, sends to self paired with their receives in call
// order), then its collectives (`colls`). Its host steps run on the progress thread. With `oneStream` (the group's
// ops are on one stream) and device-side barriers only, the program has no host step (hostSteps empty): the caller
// enqueues it as it is (DeviceState::enqueueDeviceOnly).
Result<coll::DeviceProgram> buildDirectProgram(Communicator* comm, cuda::CUcontext ctx,
                                               const std::vector<coll::DeviceStep>& colls, const std::vector<Op>& p2p,
                                               bool oneStream);

}  // namespace cfx::core
