// SPDX-License-Identifier: Apache-2.0
// Device programs on a communicator (core layer): facts for the planner, TUNING lines and host steps.
#include "core/device_direct.h"

#include <string>

#include "common/log.h"
#include "common/tsan.h"
#include "core/group_launch.h"
#include "primitives/device/reduce_args.h"
#include "primitives/device_kernels.h"
#include "transport/device_ipc.h"

namespace cfx::core {

namespace {

bool isDevice(const void* p) { return p != nullptr && cuda::classify(p).kind == cuda::MemKind::Device; }

// Whether every buffer this rank's part of the collective uses is device memory. Buffers a rank does not use (a
// non-root's receive buffer of reduce and gather, send buffer of broadcast and scatter) may be anything, as in NCCL.
bool buffersOnDevice(const coll::CollArgs& a, bool root) {
  switch (a.coll) {
    case coll::Collective::AllReduce:
    case coll::Collective::AllGather:
    case coll::Collective::ReduceScatter:
    case coll::Collective::AlltoAll:
      return isDevice(a.sendbuff) && isDevice(a.recvbuff);
    case coll::Collective::Broadcast:
    case coll::Collective::Scatter:
      return isDevice(a.recvbuff) && (!root || isDevice(a.sendbuff));
    case coll::Collective::Reduce:
    case coll::Collective::Gather:
      return isDevice(a.sendbuff) && (!root || isDevice(a.recvbuff));
    case coll::Collective::BroadcastDelta:
    case coll::Collective::Scan:
    case coll::Collective::AllToAllv:
    case coll::Collective::MoeDispatch:
    case coll::Collective::MoeCombine:
      return false;  // no device form: they stage (the delta's state lives in host memory)
  }
  return false;
}

// What device programs see of the communicator, without the host steps (planning) or with them (building).
coll::DeviceComm deviceCommOf(Communicator* comm) {
  coll::DeviceComm dc;
  dc.rank = comm->rank();
  dc.nRanks = comm->nRanks();
  dc.scratch = comm->ipcScratch();
  dc.board = comm->flagBoard();
  dc.oneShotBytes = comm->oneShotBytes();
  dc.oneShotCount = comm->oneShotCount();
  dc.findWindow = [comm](const void* p, size_t bytes) {
    const Communicator::WindowSpan span = comm->findWindow(p, bytes);
    return coll::WindowSpan{span.window, span.offset};
  };
  return dc;
}

// Ranks of one process pass a device-direct host step through shared memory that each maps at its own address, so a
// thread sanitizer cannot see that a rank's device work before the step happens before a peer's after it, though
// both touch one buffer at one address (a peer's scratch or window). The steps name the handoff: every rank releases
// a word of its communicator before the step and acquires it after (common/tsan.h). Nothing outside TSan builds.
class TsanStep {
 public:
  explicit TsanStep(const Communicator* comm) : key_(&keys_[comm->commHash() % kKeys]) { tsanRelease(key_); }
  ~TsanStep() { tsanAcquire(key_); }
  TsanStep(const TsanStep&) = delete;
  TsanStep& operator=(const TsanStep&) = delete;

 private:
  static constexpr size_t kKeys = 64;
  static inline char keys_[kKeys] = {};
  const void* key_;
};

// A host all-reduce of `count` values with `kind` on the progress thread: the programs' barriers. Its tag also checks
// that every rank is in the same operation.
template <typename T>
Status hostAllReduce(Communicator* comm, const T* mine, T* all, size_t count, DataType type, RedOpKind kind) {
  const TsanStep handoff(comm);
  Op op;
  op.kind = Op::Kind::Coll;
  op.comm = comm;
  op.args.coll = coll::Collective::AllReduce;
  op.args.sendbuff = mine;
  op.args.recvbuff = all;
  op.args.count = count;
  op.args.type = type;
  op.args.op = ReduceOp::builtin(type, kind, comm->nRanks());
  return runOnThisThread(comm, {&op});
}

// A barrier among the communicator's ranks: a 4-byte host all-reduce.
Status hostBarrier(Communicator* comm) {
  const int32_t one = 1;
  int32_t sum = 0;
  return hostAllReduce(comm, &one, &sum, 1, DataType::Int32, RedOpKind::Sum);
}

// hostBarrier that also checks every rank passed the same `value`: one host all-reduce of (value, ~value) with
// Max, whose results differ from the rank's own unless the minimum and maximum over the ranks are equal.
Status hostAgree(Communicator* comm, uint64_t value) {
  const uint64_t mine[2] = {value, ~value};
  uint64_t all[2] = {0, 0};
  CFX_TRY(hostAllReduce(comm, mine, all, 2, DataType::Uint64, RedOpKind::Max));
  if (all[0] != value || ~all[1] != value) {
    return Status::error(Errc::InvalidUsage,
                         "zero-copy collective: the ranks' buffers are not at the same offsets of their symmetric "
                         "windows (NCCL_WIN_COLL_SYMMETRIC promises they are), or not in matching windows");
  }
  return Status();
}

// A group of small host sends and receives on the progress thread (the device-direct p2p tokens).
Status hostP2p(Communicator* comm, const std::vector<coll::HostMessage>& messages) {
  const TsanStep handoff(comm);
  std::vector<Op> own;
  for (const coll::HostMessage& m : messages) {
    Op op;
    op.kind = m.send ? Op::Kind::Send : Op::Kind::Recv;
    op.comm = comm;
    op.sendbuff = m.buffer;
    op.recvbuff = m.buffer;
    op.bytes = m.bytes;
    op.peer = m.peer;
    own.push_back(op);
  }
  std::vector<const Op*> raw;
  for (const Op& op : own) raw.push_back(&op);
  return runOnThisThread(comm, raw);
}

}  // namespace

coll::DevicePlan planDeviceOp(Communicator* comm, const coll::CollArgs& a, bool scalarOnDevice, bool captured,
                              std::string* text) {
  const transport::cuda_ipc::IpcScratch* scratch = comm->ipcScratch();
  const bool perRank = a.coll != coll::Collective::AllReduce && a.coll != coll::Collective::Broadcast &&
                       a.coll != coll::Collective::Reduce;
  coll::DevicePlanRequest req;
  req.coll = a.coll;
  req.nRanks = comm->nRanks();
  // Every rank computes the same size from the same call, so all take the same path: the op's largest buffer.
  req.bytes = a.count * dataTypeSize(a.type) * (perRank ? static_cast<size_t>(comm->nRanks()) : 1);
  req.onDevice = buffersOnDevice(a, comm->rank() == a.root);
  req.ipc = scratch != nullptr;
  req.ipcMinBytes = comm->ipcMinBytes();
  req.sharedGpu = scratch != nullptr && comm->deviceIpc()->ranksShareDevice();
  req.kernels = prims::DeviceKernels::covers(a.type);
  req.maxReduceSources = prims::device::kMaxReduceSources;
  req.hostOnly = a.compress != nullptr || a.delta != nullptr ||
                 (coll::reducesOnDevice(a.coll) && (a.op.ordered() || scalarOnDevice));
  req.captured = captured;
  req.checkCalls = comm->options().checkCalls;
  req.zeroCopy = req.ipc && req.onDevice && coll::zeroCopySpans(deviceCommOf(comm), a).has_value();
  req.deviceSync = comm->flagBoard() != nullptr;
  req.oneShotMaxBytes = comm->oneShotBytes();
  coll::DevicePlan plan = coll::chooseDevicePlan(req, comm->options().planner);
  if (text != nullptr) *text = coll::describeDevicePlan(req, plan);
  return plan;
}

DeviceGroupPlan planDeviceGroup(Communicator* comm, const std::vector<const Op*>& ops, bool captured) {
  DeviceGroupPlan group;
  group.direct = !ops.empty();
  for (const Op* op : ops) {
    if (op->kind != Op::Kind::Coll) {
      group.direct = false;
      continue;
    }
    std::string text;
    const bool logged = log::enabled(log::Level::Info, log::Sys::Tuning);
    coll::DevicePlan plan =
        planDeviceOp(comm, op->args, op->deviceScalar != nullptr, captured, logged ? &text : nullptr);
    if (!text.empty()) CFX_INFO(log::Sys::Tuning, "%s", text.c_str());
    if (!plan.algorithm) {
      group.direct = false;
      continue;
    }
    group.steps.push_back({op->args, *plan.algorithm});
  }
  if (!group.direct) group.steps.clear();
  return group;
}

const void* deviceBufferOf(const Op& op) {
  const coll::Collective c = op.args.coll;
  const bool sendSide = c == coll::Collective::Reduce || c == coll::Collective::Gather;
  return sendSide ? op.args.sendbuff : op.args.recvbuff;
}

bool p2pDirectApplies(Communicator* comm, const Op& op, bool captured) {
  if (op.kind == Op::Kind::Coll || op.peer == comm->rank()) return false;
  coll::DeviceP2pRequest req;
  req.ipc = comm->ipcScratch() != nullptr;
  req.ipcMinBytes = comm->ipcMinBytes();
  req.bytes = op.bytes;
  req.captured = captured;
  req.onDevice = req.ipc && isDevice(op.kind == Op::Kind::Send ? op.sendbuff : op.recvbuff);
  return coll::deviceP2pApplies(req);
}

bool selfDirectApplies(Communicator* comm, const Op& send, const Op& recv, bool captured) {
  coll::DeviceP2pRequest req;
  req.ipc = comm->ipcScratch() != nullptr;
  req.ipcMinBytes = comm->ipcMinBytes();
  req.bytes = send.bytes == recv.bytes ? send.bytes : 0;
  req.toSelf = true;
  req.captured = captured;
  req.onDevice = req.ipc && isDevice(send.sendbuff) && isDevice(recv.recvbuff);
  return coll::deviceP2pApplies(req);
}

Result<coll::DeviceProgram> buildDirectProgram(Communicator* comm, cuda::CUcontext ctx,
                                               const std::vector<coll::DeviceStep>& colls, const std::vector<Op>& p2p,
                                               bool oneStream) {
  coll::DeviceComm dc = deviceCommOf(comm);
  dc.deviceOnly = oneStream;
  dc.host = {[comm] { return hostBarrier(comm); }, [comm](uint64_t v) { return hostAgree(comm, v); },
             [comm](const std::vector<coll::HostMessage>& m) { return hostP2p(comm, m); }};
  bool reduces = false;
  for (const coll::DeviceStep& s : colls) reduces = reduces || coll::reducesOnDevice(s.args.coll);
  if (reduces) {
    // Loaded into this context at init (Communicator::setupDeviceDirect): a lookup here, unless the buffers belong
    // to a context other than the device's primary one.
    CFX_TRY_ASSIGN(dc.kernels, prims::DeviceKernels::get(ctx));
  }
  std::vector<coll::DeviceMessage> messages;
  for (const Op& op : p2p) {
    const bool send = op.kind == Op::Kind::Send;
    messages.push_back({send, op.peer, reinterpret_cast<cuda::CUdeviceptr>(send ? op.sendbuff : op.recvbuff),
                        op.bytes});
  }
  return coll::buildDeviceProgram(dc, colls, messages);
}

}  // namespace cfx::core
