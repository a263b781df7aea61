// SPDX-License-Identifier: Apache-2.0
// Launch of groups that touch device buffers (core layer): staging plans, device-direct programs, the progress
// thread's device jobs and CUDA graph capture. The stream protocol is core/device_stream.h; the group semantics
// core/group.h.
#include <algorithm>
#include <cstring>
#include <optional>

#include "common/cuda_driver.h"
#include "common/log.h"
#include "common/param.h"
#include "core/device_direct.h"
#include "core/device_stream.h"
#include "collectives/moe.h"
#include "core/group_launch.h"
#include "primitives/device_kernels.h"

namespace cfx::core {

CFX_PARAM(int, stageOnStreamParam, "CFX_CUDA_STAGE_ON_STREAM", 1,
          "1 puts the staging copies of device-buffer ops on the user's stream (see core/device_stream.h); 0 has the "
          "progress thread copy on a stream of its own, the earlier design, which can stall when that stream shares a "
          "hardware queue with a waiting one. Kept for comparison on GPU machines.",
          param::inRange(0, 1));

void opRanges(const Op& op, std::vector<OpRange>* ranges) {
  auto add = [&](const void* p, size_t bytes, bool in, bool out) {
    if (p != nullptr && bytes > 0) ranges->push_back({p, bytes, in, out});
  };
  if (op.deviceScalar != nullptr) add(op.deviceScalar, dataTypeSize(op.args.type), true, false);
  if (op.kind == Op::Kind::Send) return add(op.sendbuff, op.bytes, true, false);
  if (op.kind == Op::Kind::Recv) return add(op.recvbuff, op.bytes, false, true);
  const coll::CollArgs& a = op.args;
  const size_t n = static_cast<size_t>(op.comm->nRanks());
  const size_t b = a.count * dataTypeSize(a.type);
  const bool root = op.comm->rank() == a.root;
  using coll::Collective;
  switch (a.coll) {
    case Collective::AllReduce:
    case Collective::Scan:
      add(a.sendbuff, b, true, false);
      add(a.recvbuff, b, false, true);
      break;
    case Collective::Broadcast:
    case Collective::BroadcastDelta:
      if (root) add(a.sendbuff, b, true, false);
      add(a.recvbuff, b, false, true);
      break;
    case Collective::Reduce:
      add(a.sendbuff, b, true, false);
      if (root) add(a.recvbuff, b, false, true);
      break;
    case Collective::AllGather:
      add(a.sendbuff, b, true, false);
      add(a.recvbuff, b * n, false, true);
      break;
    case Collective::ReduceScatter:
      add(a.sendbuff, b * n, true, false);
      add(a.recvbuff, b, false, true);
      break;
    case Collective::AlltoAll:
      add(a.sendbuff, b * n, true, false);
      add(a.recvbuff, b * n, false, true);
      break;
    case Collective::Gather:
      add(a.sendbuff, b, true, false);
      if (root) add(a.recvbuff, b * n, false, true);
      break;
    case Collective::Scatter:
      if (root) add(a.sendbuff, b * n, true, false);
      add(a.recvbuff, b, false, true);
      break;
    case Collective::AllToAllv:
      add(a.sendbuff, a.alltoallv->sendExtent, true, false);
      add(a.recvbuff, a.alltoallv->recvExtent, a.alltoallv->recvGaps, true);  // gaps come back as they were
      break;
    case Collective::MoeDispatch:
    case Collective::MoeCombine:
      for (const coll::MoeArgs::Span& span : a.moe->buffers) add(span.p, span.bytes, span.in, span.out);
      break;
  }
}

namespace {

// One communicator's part of a device group: its ops rewritten onto one block of pinned staging.
struct DevicePlan {
  std::vector<Op> ops;
  std::vector<StagedRange> ranges;  // host pointers are offsets into staging until the job starts (rebase)
  std::vector<std::pair<size_t, const void*>> scalars;  // (op index, staged scalar) patched in after copy-in
  std::vector<unsigned> stagedFields;                   // per op: bits of the buffer fields that point into staging
  size_t stagingBytes = 0;
  cuda::CUcontext ctx = nullptr;
  std::vector<cuda::CUstream> streams;
  std::shared_ptr<ReadyGate> gate;
  uint64_t seq = 0;
  bool direct = false;        // device-direct (core/device_direct.h): no staging, no host algorithm
  std::vector<Op> directP2p;  // sends and receives that move device-direct, before the staged ops
  coll::DeviceProgram program;  // the device-direct ops' steps (core/device_direct.h); empty when all stages
  std::vector<coll::DeviceStep> steps;  // the collectives' device plans, when direct
  std::vector<std::shared_ptr<ReadyGate>> stepGates;  // one per step; the first is `gate`
  std::vector<uint64_t> stepSeqs;  // written after each step but the last (the op's own `seq` ends it)
  bool onStream = false;  // staging copies ride the user's streams (device_stream.h); else the progress thread's
  bool captured = false;  // put into a CUDA graph: runs at each replay (CapturedOp), never now
  std::vector<std::vector<size_t>> rangeStreams;  // per range: the streams (indices) whose ops name it
};

// The op's ordinal on its communicator (1, 2, ...) for the logs; 0 for a captured op, which has no number.
unsigned long long opNumber(const DevicePlan& plan) { return plan.seq == 0 ? 0 : plan.seq - kFirstSeq + 1; }

// stagedFields bits: 1, 2, 4, 8 for the Op's and its args' buffer pointers, then one per MoE buffer.
constexpr unsigned kMoeFieldBit = 16u;
static_assert(coll::MoeArgs::kBuffers + 4 <= 32, "every staged field needs a bit");

// Mirrors every device range of `ops` in staging. Overlapping ranges (in-place ops, an all-gather whose input is a
// slice of its output) share one staged range, so the host algorithm sees the same aliasing the user set up.
Status stagePlan(Communicator* comm, const std::vector<const Op*>& ops, DevicePlan* plan) {
  struct Dev {
    uintptr_t begin, end;
    bool in, out;
    size_t stream;  // index into plan->streams of the op that names the range
  };
  std::vector<Dev> devs;
  auto streamIndex = [plan](const Op* op) {
    const auto s = static_cast<cuda::CUstream>(op->stream);
    auto it = std::find(plan->streams.begin(), plan->streams.end(), s);
    if (it != plan->streams.end()) return static_cast<size_t>(it - plan->streams.begin());
    plan->streams.push_back(s);
    return plan->streams.size() - 1;
  };
  for (const Op* op : ops) {
    plan->ops.push_back(*op);
    streamIndex(op);
    std::vector<OpRange> ranges;
    opRanges(*op, &ranges);
    for (const OpRange& r : ranges) {
      const cuda::PointerInfo info = cuda::classify(r.p);
      if (info.kind == cuda::MemKind::Host) continue;
      if (plan->ctx == nullptr) plan->ctx = info.context;
      if (info.context != plan->ctx) {
        return Status::error(Errc::InvalidUsage,
                             strprintf("rank %d: one group's device buffers belong to different CUDA contexts "
                                       "(buffer %p is on device %d); a communicator drives one device",
                                       comm->rank(), r.p, info.device));
      }
      const auto begin = reinterpret_cast<uintptr_t>(r.p);
      devs.push_back({begin, begin + r.bytes, r.in, r.out, streamIndex(op)});
    }
  }
  std::sort(devs.begin(), devs.end(), [](const Dev& a, const Dev& b) { return a.begin < b.begin; });
  // A merged range is copied in on the stream of its first op and out on every stream that names it: ops of one
  // group on different streams rarely share memory, and when they do the user orders those streams.
  std::vector<Dev> merged;
  std::vector<std::vector<size_t>> rangeStreams;
  for (const Dev& d : devs) {
    if (!merged.empty() && d.begin < merged.back().end) {
      merged.back().end = std::max(merged.back().end, d.end);
      merged.back().in = merged.back().in || d.in;
      merged.back().out = merged.back().out || d.out;
      std::vector<size_t>& outs = rangeStreams.back();
      if (std::find(outs.begin(), outs.end(), d.stream) == outs.end()) outs.push_back(d.stream);
    } else {
      merged.push_back(d);
      rangeStreams.push_back({d.stream});
    }
  }
  // Each range keeps its offset modulo 256 in staging, so the host algorithm sees the user's alignment.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const Dev& d : merged) {
    total = (total + 255) / 256 * 256 + d.begin % 256;
    offsets.push_back(total);
    total += d.end - d.begin;
  }
  plan->stagingBytes = total;
  if (total > 0 && !plan->onStream) CFX_TRY(comm->device().reserveStaging(total));
  // Staged pointers hold offsets into staging for now: the block is only known once taken (on-stream staging, at
  // launch) or when the job starts (the progress thread's staging).
  for (size_t i = 0; i < merged.size(); ++i) {
    plan->ranges.push_back({static_cast<cuda::CUdeviceptr>(merged[i].begin), reinterpret_cast<void*>(offsets[i]),
                            merged[i].end - merged[i].begin, merged[i].in, merged[i].out});
  }
  plan->rangeStreams = std::move(rangeStreams);
  auto toStaged = [&](const void* p, unsigned bit, unsigned* mask) -> void* {
    const auto a = reinterpret_cast<uintptr_t>(p);
    for (const StagedRange& r : plan->ranges) {
      if (p != nullptr && a >= r.device && a < r.device + r.bytes) {
        *mask |= bit;
        return static_cast<unsigned char*>(r.host) + (a - r.device);
      }
    }
    return const_cast<void*>(p);  // host memory (or nothing): used as is
  };
  for (size_t i = 0; i < plan->ops.size(); ++i) {
    Op& op = plan->ops[i];
    unsigned mask = 0;
    op.sendbuff = toStaged(op.sendbuff, 1u, &mask);
    op.recvbuff = toStaged(op.recvbuff, 2u, &mask);
    op.args.sendbuff = toStaged(op.args.sendbuff, 4u, &mask);
    op.args.recvbuff = toStaged(op.args.recvbuff, 8u, &mask);
    if (op.args.moe != nullptr) {  // a copy of its own: the caller's op keeps its device pointers
      op.args.moe = std::make_shared<coll::MoeArgs>(*op.args.moe);
      for (size_t buffer = 0; buffer < coll::MoeArgs::kBuffers; ++buffer) {
        op.args.moe->buffers[buffer].p = toStaged(op.args.moe->buffers[buffer].p, kMoeFieldBit << buffer, &mask);
      }
    }
    plan->stagedFields.push_back(mask);
    if (op.deviceScalar != nullptr) {
      unsigned ignored = 0;
      plan->scalars.emplace_back(i, toStaged(op.deviceScalar, 1u, &ignored));
    }
  }
  return Status();
}

// Turns the plan's staging offsets into pointers into `base`. Runs once, when the job starts.
void rebase(DevicePlan* plan, void* base) {
  auto* b = static_cast<unsigned char*>(base);
  auto shift = [b](auto* field) {
    *field = reinterpret_cast<std::remove_reference_t<decltype(*field)>>(b + reinterpret_cast<uintptr_t>(*field));
  };
  for (StagedRange& r : plan->ranges) shift(&r.host);
  for (size_t i = 0; i < plan->ops.size(); ++i) {
    Op& op = plan->ops[i];
    const unsigned mask = plan->stagedFields[i];
    if (mask & 1u) shift(&op.sendbuff);
    if (mask & 2u) shift(&op.recvbuff);
    if (mask & 4u) shift(&op.args.sendbuff);
    if (mask & 8u) shift(&op.args.recvbuff);
    for (size_t buffer = 0; op.args.moe != nullptr && buffer < coll::MoeArgs::kBuffers; ++buffer) {
      if (mask & (kMoeFieldBit << buffer)) shift(&op.args.moe->buffers[buffer].p);
    }
  }
  for (auto& [index, staged] : plan->scalars) shift(&staged);
}

// Whether a group's streams are being captured into a CUDA graph: all of them, in one capture, or none.
struct Capture {
  bool active = false;
  cuda::CUgraph graph = nullptr;
};

Result<Capture> captureOf(const std::vector<cuda::CUstream>& streams, int rank) {
  Capture cap;
  unsigned long long captureId = 0;
  size_t capturing = 0;
  for (cuda::CUstream s : streams) {
    int status = cuda::kStreamCaptureNone;
    unsigned long long id = 0;
    cuda::CUgraph graph = nullptr;
    CFX_TRY(cuda::check(cuda::driver()->streamGetCaptureInfo(s, &status, &id, &graph, nullptr, nullptr),
                        "cuStreamGetCaptureInfo"));
    if (status == cuda::kStreamCaptureNone) continue;
    if (status != cuda::kStreamCaptureActive) {
      return Status::error(Errc::InvalidUsage, strprintf("rank %d: the stream's CUDA graph capture was invalidated by "
                                                         "an earlier error; end it and capture again",
                                                         rank));
    }
    if (capturing > 0 && id != captureId) {
      return Status::error(Errc::InvalidUsage, strprintf("rank %d: one group's operations are on streams of two "
                                                         "different CUDA graph captures; a group goes into one graph",
                                                         rank));
    }
    captureId = id;
    cap.graph = graph;
    ++capturing;
  }
  if (capturing > 0 && capturing != streams.size()) {
    return Status::error(Errc::InvalidUsage, strprintf("rank %d: some of one group's streams are being captured into "
                                                       "a CUDA graph and some are not; join them to the capture (an "
                                                       "event recorded on the capturing stream) or group them apart",
                                                       rank));
  }
  cap.active = capturing > 0;
  if (cap.active && !cuda::driver()->capturable) {
    return Status::error(Errc::InvalidUsage, strprintf("rank %d: this %s runtime has no graph user objects, which a "
                                                       "captured operation needs; run it outside the capture",
                                                       rank, cuda::backendName()));
  }
  return cap;
}

// A communicator of one rank moves nothing between ranks: each op is a copy of its input to its output (a sum,
// product, min, max or average of one value is that value) or nothing in place. On device memory that is one
// device-to-device copy on the user's stream, as in NCCL, with no host involvement. Returns false (nothing done)
// when the group needs the staged path: a PreMulSum (it scales), host buffers, or unmatched messages to self.
Result<bool> launchSingleRank(const std::vector<const Op*>& ops) {
  struct Copy {
    cuda::CUdeviceptr dst, src;
    size_t bytes;
    cuda::CUstream stream;
  };
  std::vector<Copy> copies;
  std::vector<const Op*> sends, recvs;
  cuda::CUcontext ctx = nullptr;
  std::vector<cuda::CUstream> streams;
  for (const Op* op : ops) {
    if (op->deviceScalar != nullptr || (op->kind == Op::Kind::Coll && op->args.op.preMultiply)) return false;
    // Their blocks move by counts and routing, not as one copy: they stage, where the host algorithm runs.
    if (op->kind == Op::Kind::Coll && coll::variableShape(op->args.coll)) return false;
    std::vector<OpRange> ranges;
    opRanges(*op, &ranges);
    for (const OpRange& r : ranges) {
      const cuda::PointerInfo info = cuda::classify(r.p);
      if (info.kind != cuda::MemKind::Device || (ctx != nullptr && info.context != ctx)) return false;
      ctx = info.context;
    }
    streams.push_back(static_cast<cuda::CUstream>(op->stream));
    if (op->kind == Op::Kind::Send)
      sends.push_back(op);
    else if (op->kind == Op::Kind::Recv)
      recvs.push_back(op);
    else if (op->args.sendbuff != op->args.recvbuff && op->args.count > 0) {
      copies.push_back({reinterpret_cast<cuda::CUdeviceptr>(op->args.recvbuff),
                        reinterpret_cast<cuda::CUdeviceptr>(op->args.sendbuff),
                        op->args.count * dataTypeSize(op->args.type), static_cast<cuda::CUstream>(op->stream)});
    }
  }
  if (sends.size() != recvs.size()) return false;
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->bytes != recvs[i]->bytes || sends[i]->stream != recvs[i]->stream) return false;
    if (sends[i]->bytes > 0 && sends[i]->sendbuff != recvs[i]->recvbuff) {
      copies.push_back({reinterpret_cast<cuda::CUdeviceptr>(recvs[i]->recvbuff),
                        reinterpret_cast<cuda::CUdeviceptr>(sends[i]->sendbuff), sends[i]->bytes,
                        static_cast<cuda::CUstream>(recvs[i]->stream)});
    }
  }
  // Copies on a capturing stream go into the graph like any others.
  CFX_TRY(captureOf(streams, ops.front()->comm->rank()).status());
  cuda::ScopedContext scope(ctx);
  for (const Copy& c : copies) {
    CFX_TRY(
        cuda::check(cuda::driver()->memcpyDtoDAsync(c.dst, c.src, c.bytes, c.stream), "cuMemcpyDtoDAsync (1 rank)"));
  }
  return true;
}

// The progress-thread job of one device op: its hooks around the host algorithm (or the device-direct run).
// `release` lets the op's streams go on; it runs whatever the outcome.
Communicator::DeferredJob deviceJob(Communicator* comm, const std::shared_ptr<DevicePlan>& plan,
                                    std::function<void()> release) {
  Communicator::DeferredJob job;
  job.before = [comm, plan]() -> Status {
    cuda::relaxCaptureModeOfThisThread();  // our CUDA calls must not break a capture the user runs meanwhile
    if (plan->gate) {
      Status reached = plan->gate->wait(comm->abortFlag());
      const std::string cause = reached.ok() ? std::string() : comm->stopCause();
      if (!cause.empty()) return Status::error(reached.code(), cause + " before the stream reached the operation");
      CFX_TRY(reached);
    }
    CFX_INFO(log::Sys::Proxy, "rank %d: %sdevice op %llu reached on its stream(s)%s", comm->rank(),
             plan->captured ? "captured " : "", opNumber(*plan),
             plan->direct || !plan->directP2p.empty() ? "; device-direct" : "");
    for (size_t i = 0; i < plan->program.hostSteps.size(); ++i) {
      if (i > 0) {  // the stream ran segment i
        Status reached = plan->stepGates[i]->wait(comm->abortFlag(), [comm, &plan, i](long long seconds) {
          CFX_INFO(log::Sys::Proxy,
                   "rank %d: device op %llu: host step %zu of %zu still waits for its stream to finish the device "
                   "work before it (%lld s); every earlier step is done",
                   comm->rank(), opNumber(*plan), i, plan->program.hostSteps.size(), seconds);
        });
        const std::string cause = reached.ok() ? std::string() : comm->stopCause();
        if (!cause.empty()) return Status::error(reached.code(), cause + " during a device-direct operation");
        CFX_TRY(reached);
      }
      Status st = plan->program.hostSteps[i]();
      if (st.code() == Errc::InvalidUsage) {
        // The likely cause is not in the op's arguments: the choice of protocol was not the same on every rank.
        return Status::error(Errc::InvalidUsage,
                             st.message() +
                                 " (this rank ran the op on device buffers over CUDA IPC: every rank must pass "
                                 "device buffers to it, with the same CFX_CUDA_IPC settings; a rank that passes host "
                                 "buffers runs another protocol)");
      }
      CFX_TRY(st);
      if (i + 1 < plan->program.hostSteps.size()) comm->device().complete(plan->stepSeqs[i]);  // segment i + 1 runs
    }
    if (plan->direct) return Status();
    if (!plan->onStream) {  // else the copies in ran on the stream before the gate opened
      if (plan->stagingBytes > 0) rebase(plan.get(), comm->device().stagingBase());
      CFX_TRY(comm->device().copyIn(plan->ctx, plan->ranges));
    }
    for (auto& [index, staged] : plan->scalars) {
      std::memcpy(plan->ops[index].args.op.scalar, staged, dataTypeSize(plan->ops[index].args.type));
    }
    return Status();
  };
  job.build = [comm, plan]() -> Result<std::vector<std::unique_ptr<prims::Work>>> {
    if (plan->direct) return std::vector<std::unique_ptr<prims::Work>>{};  // all done in `before`
    std::vector<const Op*> raw;
    for (const Op& op : plan->ops) raw.push_back(&op);
    return buildWorks(comm, raw);
  };
  job.after = [comm, plan, release = std::move(release)](const Status& outcome) {
    if (outcome.ok() && !plan->onStream) {
      Status copied = comm->device().copyOut(plan->ctx, plan->ranges);
      if (!copied.ok()) {
        CFX_WARN("rank %d: copying a device op's results back failed (its streams went on): %s", comm->rank(),
                 copied.message().c_str());
        comm->setAsyncError(copied);
      }
    }
    release();
    CFX_INFO(log::Sys::Proxy, "rank %d: %sdevice op %llu done (%s); its stream(s) may go on", comm->rank(),
             plan->captured ? "captured " : "", opNumber(*plan), outcome.ok() ? "ok" : outcome.message().c_str());
  };
  if (plan->gate) job.ready = [gate = plan->gate] { return gate->isOpen(); };
  return job;
}

// What a captured op's host node does at each replay: queue its run on the communicator, if it still exists.
CapturedOp::Launch replayLauncher(const std::shared_ptr<CommHandle>& handle, const std::shared_ptr<DevicePlan>& plan) {
  return [handle, plan](CapturedOp* op) -> bool {
    std::lock_guard<std::mutex> lock(handle->mutex);
    Communicator* comm = handle->comm;
    if (comm == nullptr) {
      CFX_WARN(
          "a CUDA graph replayed an operation of a destroyed communicator; it is skipped (its outputs are "
          "left as they are) and the stream goes on");
      return false;
    }
    return comm->enqueueReplay(deviceJob(comm, plan, [op] { op->release(); }));
  };
}

// Gives the plan's device-direct sends and receives their streams (after the staged ops', whose indices stagePlan
// fixed) and checks that their buffers are in the plan's one context.
Status addDirectP2p(Communicator* comm, DevicePlan* plan) {
  for (const Op& op : plan->directP2p) {
    const auto s = static_cast<cuda::CUstream>(op.stream);
    if (std::find(plan->streams.begin(), plan->streams.end(), s) == plan->streams.end()) plan->streams.push_back(s);
    const void* buffer = op.kind == Op::Kind::Send ? op.sendbuff : op.recvbuff;
    const cuda::PointerInfo info = cuda::classify(buffer);
    if (plan->ctx == nullptr) plan->ctx = info.context;
    if (info.context != plan->ctx) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("rank %d: one group's device buffers belong to different CUDA contexts (buffer "
                                     "%p is on device %d); a communicator drives one device",
                                     comm->rank(), buffer, info.device));
    }
  }
  return Status();
}

// Enqueues one communicator's device group: stream operations on the user's streams now, the work on the
// communicator's progress thread. Returns once both are enqueued. On streams being captured into a CUDA graph the
// same stream operations go into the graph, and the work is queued at each replay instead.
Status launchDeviceComm(Communicator* comm, const std::vector<const Op*>& ops) {
  CFX_TRY(comm->checkUsable());
  if (comm->nRanks() == 1) {
    CFX_TRY_ASSIGN(const bool done, launchSingleRank(ops));
    if (done) return Status();
  }
  std::vector<cuda::CUstream> opStreams;
  for (const Op* op : ops) {
    const auto s = static_cast<cuda::CUstream>(op->stream);
    if (std::find(opStreams.begin(), opStreams.end(), s) == opStreams.end()) opStreams.push_back(s);
  }
  CFX_TRY_ASSIGN(const Capture capture, captureOf(opStreams, comm->rank()));
  // A capture in CUDA's default (global) mode fails allocations on this thread, and with them the capture.
  std::optional<cuda::RelaxedCaptureMode> relaxed;
  if (capture.active) relaxed.emplace();
  auto plan = std::make_shared<DevicePlan>();
  plan->captured = capture.active;
  // Captured ops stage: a device-direct program's steps hand the stream back and forth with the progress thread
  // by sequence numbers, which a graph cannot replay.
  DeviceGroupPlan grouped = planDeviceGroup(comm, ops, capture.active);
  plan->direct = grouped.direct;
  plan->steps = std::move(grouped.steps);
  Status st;
  if (plan->direct) {  // nothing staged: the buffers move between devices
    for (const Op* op : ops) plan->ops.push_back(*op);
    plan->ctx = cuda::classify(deviceBufferOf(*ops.front())).context;
    plan->streams = opStreams;
  } else {
    std::vector<const Op*> staged;
    std::vector<const Op*> selfSends;
    std::vector<const Op*> selfRecvs;
    for (const Op* op : ops) {
      if (p2pDirectApplies(comm, *op, capture.active)) {
        plan->directP2p.push_back(*op);
      } else if (op->kind != Op::Kind::Coll && op->peer == comm->rank()) {
        (op->kind == Op::Kind::Send ? selfSends : selfRecvs).push_back(op);
      } else {
        staged.push_back(op);
      }
    }
    // Messages to self match in call order; a pair of device buffers is one device copy. Unpaired ones stage,
    // where the host path names the mismatch.
    for (size_t i = 0; i < std::max(selfSends.size(), selfRecvs.size()); ++i) {
      const bool paired = selfSends.size() == selfRecvs.size() &&
                          selfDirectApplies(comm, *selfSends[i], *selfRecvs[i], capture.active);
      for (const auto* side : {&selfSends, &selfRecvs}) {
        if (i >= side->size()) continue;
        if (paired) {
          plan->directP2p.push_back(*(*side)[i]);
        } else {
          staged.push_back((*side)[i]);
        }
      }
    }
    // A replayed op stages on its streams: the progress thread's shared block is rebased per run, once.
    plan->onStream = capture.active || stageOnStreamParam.get() == 1;
    st = stagePlan(comm, staged, plan.get());
    if (st.ok()) st = addDirectP2p(comm, plan.get());
  }
  DeviceState& dev = comm->device();
  DeviceState::Block block;
  std::vector<StreamCopies> copies;  // per stream, when onStream
  if (st.ok() && plan->onStream && plan->ctx != nullptr) st = dev.bindContext(plan->ctx);
  if (st.ok() && plan->onStream && plan->stagingBytes > 0) {
    // An op on one stream stages in that stream's shared block (see StagingPool), unless it is captured (the graph
    // keeps its block) or the stream is CUDA's per-thread default, one handle for a different stream per thread.
    // The NULL stream is the context's legacy stream, whose handle is 1.
    const auto legacy = reinterpret_cast<cuda::CUstream>(uintptr_t{1});
    const auto perThread = reinterpret_cast<cuda::CUstream>(uintptr_t{2});
    cuda::CUstream shared = nullptr;
    if (!capture.active && plan->streams.size() == 1 && plan->streams.front() != perThread) {
      shared = plan->streams.front() == nullptr ? legacy : plan->streams.front();
    }
    Result<DeviceState::Block> taken = dev.takeBlock(plan->ctx, plan->stagingBytes, shared);
    if (taken.ok()) {
      block = taken.value();
      rebase(plan.get(), block.p);
    } else {
      st = taken.status();
    }
  }
  if (st.ok() && plan->onStream) {
    Result<std::vector<StreamCopies>> planned =
        planStreamCopies(plan->ranges, plan->rangeStreams, plan->streams.size());
    if (planned.ok()) {
      copies = std::move(planned.value());
    } else {
      st = planned.status();
    }
  }
  if (st.ok() && !plan->onStream && !plan->ranges.empty()) st = dev.prepare(plan->ctx);
  if (st.ok() && (plan->direct || !plan->directP2p.empty())) {
    Result<coll::DeviceProgram> built =
        buildDirectProgram(comm, plan->ctx, plan->steps, plan->directP2p, plan->streams.size() == 1);
    if (built.ok()) {
      plan->program = std::move(built.value());
    } else {
      st = built.status();
    }
  }
  if (!st.ok()) {
    dev.giveBack(block);
    return st;
  }
  if (plan->direct && plan->program.hostSteps.empty()) {
    // Device-side barriers only: the stream runs the op on its own, and nothing waits on the progress thread.
    CFX_INFO(log::Sys::Proxy, "rank %d: device op enqueued with device-side barriers only: %zu op(s)", comm->rank(),
             plan->ops.size());
    st = dev.enqueueDeviceOnly(plan->ctx, plan->streams.front(), plan->program.segments.front());
    if (st.ok()) comm->watchDeviceBarriers();
    return st;
  }
  const bool ordered = plan->direct || !plan->directP2p.empty();  // it uses the IPC scratch
  if (ordered) st = dev.orderDirect(plan->ctx, plan->streams);
  if (!st.ok()) {
    dev.giveBack(block);
    return st;
  }
  if (capture.active) {
    CFX_INFO(log::Sys::Proxy,
             "rank %d: device op captured into a CUDA graph: %zu op(s), %zu staged range(s), %zu "
             "stream(s)",
             comm->rank(), plan->ops.size(), plan->ranges.size(), plan->streams.size());
    return dev.enqueueCaptured(plan->ctx, plan->streams, capture.graph, plan->onStream ? &copies : nullptr, block,
                               replayLauncher(comm->handle(), plan));
  }
  plan->gate = std::make_shared<ReadyGate>(static_cast<int>(plan->streams.size()));
  plan->gate->onOpen([handle = comm->handle()] {
    std::lock_guard<std::mutex> lock(handle->mutex);
    if (handle->comm != nullptr) handle->comm->wakeProgress();
  });
  if (plan->program.segments.empty()) {
    st = dev.enqueueStreamOps(plan->ctx, plan->streams, plan->gate, &plan->seq, plan->onStream ? &copies : nullptr,
                              block);
  } else {
    // Later steps' gates are waited for inside the job, which is running by then: they need not wake the thread.
    plan->stepGates.push_back(plan->gate);
    for (size_t i = 1; i < plan->program.segments.size(); ++i) {
      plan->stepGates.push_back(std::make_shared<ReadyGate>(1));
    }
    st = dev.enqueueSteps(plan->ctx, plan->streams, plan->stepGates, plan->program.segments, &plan->seq,
                          &plan->stepSeqs, plan->onStream ? &copies : nullptr, block);
  }
  if (st.ok() && ordered && plan->seq != 0) st = dev.markDirect(plan->ctx, plan->streams.front());
  if (plan->seq == 0) return st;
  // From here a stream waits for plan->seq: the job must run and complete it whatever happens.
  CFX_INFO(log::Sys::Proxy, "rank %d: device op %llu enqueued: %zu op(s), %zu staged range(s), %zu stream(s)",
           comm->rank(), opNumber(*plan), plan->ops.size(), plan->ranges.size(), plan->streams.size());
  comm->enqueue(deviceJob(comm, plan, [comm, plan] { comm->device().complete(plan->seq); }));
  return st;
}

}  // namespace

Status launchDevice(const std::vector<Communicator*>& comms, std::map<Communicator*, std::vector<const Op*>>& byComm) {
  Status first;
  for (Communicator* comm : comms) {
    Status st = launchDeviceComm(comm, byComm[comm]);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace cfx::core
