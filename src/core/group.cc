// SPDX-License-Identifier: Apache-2.0
// Group recording and launch (core layer).
#include "core/group.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <unordered_set>

#include "collectives/moe.h"
#include "collectives/planner.h"
#include "common/cuda_driver.h"
#include "common/log.h"
#include "common/param.h"
#include "core/call_check.h"
#include "core/compressed_op.h"
#include "core/group_launch.h"
#include "core/host_lanes.h"

namespace cfx::core {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
  std::vector<DeferredSetup> inits;
  Status firstError;
};
thread_local GroupState tGroup;

std::mutex gStreamsMutex;
std::unordered_set<const void*>& liveStreams() {
  static auto* s = new std::unordered_set<const void*>();  // leaked: usable during static destruction
  return *s;
}

struct CollItem {
  coll::CollArgs args;
  uint32_t seq;
  uint64_t opCount;
};

// Names both sides of a mismatched call in its verbs' errors.
class CollNaming final : public prims::OpNaming {
 public:
  explicit CollNaming(const coll::CollArgs& args) : args_(args) {}
  std::string kindName(uint32_t kind) const override { return coll::stampKindName(kind); }
  std::string call() const override { return coll::describeCall(args_); }

 private:
  const coll::CollArgs& args_;
};

// Plans and runs one collective on the collective channel; `prims` and `naming` must outlive the returned Coro.
prims::Coro runOne(Communicator* comm, const CollItem& item, const CollNaming& naming, prims::Prims& prims) {
  // What every message of the op carries besides its size, and where slices may be cut (a User op's units): set for
  // each op, so the next one starts from its own.
  prims.setOpStamp(coll::opStamp(item.args), &naming);
  const bool units = item.args.op.combine == ReduceOp::Combine::User;
  prims.setSliceUnit(units ? item.args.op.sliceUnitElems() * dataTypeSize(item.args.type) : 1);
  if (item.args.compress != nullptr) return runCompressedOp(comm, item.args, item.seq, item.opCount, prims);
  if (item.args.delta != nullptr) return runDeltaOp(comm, item.args, item.seq, item.opCount, prims);
  prims.setOpSeq(item.seq);
  coll::PlanRequest req = comm->planRequest(item.args.coll, item.args.count, item.args.type);
  req.orderedCombine = item.args.op.ordered();
  const coll::Plan plan = comm->plan(req);
  CFX_INFO(log::Sys::Tuning, "%s opCount %lx: %s", coll::collectiveName(item.args.coll),
           static_cast<unsigned long>(item.opCount), coll::describePlan(req, plan, comm->options().planner).c_str());
  return coll::runCollective(item.args, plan, prims);
}

// CFX_CHECK_CALLS: the ranks agree on the call before it runs (call_check.h).
prims::Coro runChecked(Communicator* comm, const CollItem& item, const CollNaming& naming, prims::Prims& prims) {
  prims.setOpStamp(coll::opStamp(item.args), &naming);
  CFX_CO_TRY(co_await checkCall(item.args, item.seq, prims));
  co_return co_await runOne(comm, item, naming, prims);
}

prims::Coro runPlanned(Communicator* comm, const CollItem& item, const CollNaming& naming, prims::Prims& prims) {
  if (comm->options().checkCalls) return runChecked(comm, item, naming, prims);
  return runOne(comm, item, naming, prims);
}

prims::Coro runCollectives(Communicator* comm, std::vector<CollItem> items) {
  prims::Prims prims = comm->prims(transport::kCollChannel);
  for (const CollItem& item : items) {
    const CollNaming naming(item.args);
    CFX_CO_TRY(co_await runPlanned(comm, item, naming, prims));
  }
  co_return Status();
}

struct P2pItem {
  const void* sendbuff;
  void* recvbuff;
  size_t bytes;
  uint32_t seq;
};

prims::Coro runSends(Communicator* comm, int peer, std::vector<P2pItem> items) {
  prims::Prims prims = comm->prims(transport::kP2pChannel);
  for (const P2pItem& item : items) {
    prims.setOpSeq(item.seq);
    CFX_CO_TRY(co_await prims.send(peer, item.sendbuff, item.bytes));
  }
  co_return Status();
}

prims::Coro runRecvs(Communicator* comm, int peer, std::vector<P2pItem> items) {
  prims::Prims prims = comm->prims(transport::kP2pChannel);
  for (const P2pItem& item : items) {
    prims.setOpSeq(item.seq);
    CFX_CO_TRY(co_await prims.recv(peer, item.recvbuff, item.bytes));
  }
  co_return Status();
}

std::unique_ptr<prims::Work> makeWork(prims::Coro task, const char* what, uint64_t opCount, int rank, int peer) {
  auto w = std::make_unique<prims::Work>();
  w->task = std::move(task);
  w->what = what;
  w->opCount = opCount;
  w->rank = rank;
  w->peer = peer;
  return w;
}

}  // namespace

Result<std::vector<std::unique_ptr<prims::Work>>> buildWorks(Communicator* comm, const std::vector<const Op*>& ops) {
  std::vector<std::unique_ptr<prims::Work>> works;
  std::vector<CollItem> colls;
  std::map<int, std::vector<P2pItem>> sends;
  std::map<int, std::vector<P2pItem>> recvs;
  std::vector<const Op*> selfSends;
  std::vector<const Op*> selfRecvs;
  for (const Op* op : ops) {
    switch (op->kind) {
      case Op::Kind::Coll:
        colls.push_back({op->args, op->seq != 0 ? op->seq : comm->nextCollSeq(), comm->nextOpCount()});
        break;
      case Op::Kind::Send:
        if (op->peer == comm->rank()) selfSends.push_back(op);
        else sends[op->peer].push_back({op->sendbuff, nullptr, op->bytes, comm->nextSendSeq(op->peer)});
        break;
      case Op::Kind::Recv:
        if (op->peer == comm->rank()) selfRecvs.push_back(op);
        else recvs[op->peer].push_back({nullptr, op->recvbuff, op->bytes, comm->nextRecvSeq(op->peer)});
        break;
    }
  }
  // Messages to self match in call order within the group and are plain copies.
  if (selfSends.size() != selfRecvs.size()) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("rank %d posted %zu sends to itself but %zu receives from itself in one group",
                                   comm->rank(), selfSends.size(), selfRecvs.size()));
  }
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("rank %d: send to self of %zu bytes matched with a receive of %zu bytes",
                                     comm->rank(), selfSends[i]->bytes, selfRecvs[i]->bytes));
    }
    prims::Prims::copy(selfRecvs[i]->recvbuff, selfSends[i]->sendbuff, selfSends[i]->bytes);
  }
  const int r = comm->rank();
  if (!colls.empty()) {
    const char* what = coll::collectiveName(colls.front().args.coll);
    const uint64_t opCount = colls.front().opCount;
    works.push_back(makeWork(runCollectives(comm, std::move(colls)), what, opCount, r, -1));
  }
  for (auto& [peer, items] : sends) works.push_back(makeWork(runSends(comm, peer, std::move(items)), "Send", 0, r, peer));
  for (auto& [peer, items] : recvs) works.push_back(makeWork(runRecvs(comm, peer, std::move(items)), "Recv", 0, r, peer));
  return works;
}

Status runOnThisThread(Communicator* comm, const std::vector<const Op*>& ops) {
  CFX_TRY_ASSIGN(auto works, buildWorks(comm, ops));
  std::vector<prims::Work*> raw;
  for (auto& w : works) raw.push_back(w.get());
  return comm->runInline(raw);
}

namespace {

bool touchesDevice(const Op& op) {
  if (cuda::driver() == nullptr) return false;
  if (op.deviceScalar != nullptr) return true;
  const void* ptrs[2] = {op.kind == Op::Kind::Recv ? nullptr : (op.kind == Op::Kind::Send ? op.sendbuff : op.args.sendbuff),
                         op.kind == Op::Kind::Send ? nullptr : (op.kind == Op::Kind::Recv ? op.recvbuff : op.args.recvbuff)};
  // Managed memory is host-accessible, but the stream may still be writing it: it needs stream order too.
  for (const void* p : ptrs) {
    if (p != nullptr && cuda::classify(p).kind != cuda::MemKind::Host) return true;
  }
  if (op.kind == Op::Kind::Coll && op.args.moe != nullptr) {
    for (const coll::MoeArgs::Span& span : op.args.moe->buffers) {
      if (span.p != nullptr && cuda::classify(span.p).kind != cuda::MemKind::Host) return true;
    }
  }
  return false;
}

// Host buffers run now, on the calling thread. Inside a graph capture they would run once and never at replay, so
// that is refused. Pinned or registered host memory is the one kind a CUDA stream can write (a copy to it, a kernel
// through its mapping), and NCCL orders an op on such buffers after the stream's earlier work: here the call waits
// for the stream first, so the op never reads what the stream has yet to write (and its results are there for the
// stream's later work, as the op is over when the call returns). Pageable memory needs no wait: CUDA copies to and
// from it before the copy call returns.
Status orderHostOp(const Op& op) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr || op.stream == nullptr || findHostStream(op.stream) != nullptr) return Status();
  const auto stream = static_cast<cuda::CUstream>(op.stream);
  int capture = cuda::kStreamCaptureNone;
  if (d->streamIsCapturing(stream, &capture) == cuda::kSuccess && capture != cuda::kStreamCaptureNone) {
    return Status::error(Errc::InvalidUsage, strprintf("rank %d: an operation on host buffers cannot be captured "
                                                       "into a CUDA graph (it would run now and never at replay); "
                                                       "use device memory",
                                                       op.comm->rank()));
  }
  std::vector<OpRange> ranges;
  opRanges(op, &ranges);
  const bool pinned =
      std::any_of(ranges.begin(), ranges.end(), [](const OpRange& r) { return cuda::classify(r.p).pinned; });
  if (!pinned) return Status();
  const std::string what = strprintf(
      "rank %d: cuStreamSynchronize (the stream's work before an op on pinned host buffers)", op.comm->rank());
  return cuda::check(d->streamSynchronize(stream), what.c_str());
}

// An op run on the calling thread first waits for a pending host-stream job that uses the same library state (an
// error-feedback residual) on another lane (core/host_lanes.h), so that the two use it in call order.
void awaitStateUsers(Communicator* comm, const std::vector<const Op*>& ops) {
  for (const auto& user : comm->hostLanes().stateUsers(ops)) (void)user->wait();
}

// A host collective's sequence number (its messages' tags, stochastic rounding's draws). On a communicator with
// host lanes it is taken when the op is launched, its place among the communicator's host collectives (NCCL's rule
// makes that the same on every rank), so it stays so whatever lane runs it, and an op gives the same bits with any
// CFX_HOST_LANES. A collective issued on a host stream on one rank and blocking on another shifts the lanes every
// later one takes on one of the two; its ops then meet ops of other calls, with other numbers, and fail as
// mismatched calls instead of pairing with them. Device ops, and communicators without lanes, take theirs when
// built (see launchOps).
uint32_t hostCallSeq(Communicator* comm) {
  return comm->takesHostLanes() ? comm->hostLanes().nextCall() : comm->nextCollSeq();
}

Status launchOps(std::vector<Op> ops) {
  if (ops.empty()) return Status();
  // Partition by communicator, keeping call order within each.
  std::vector<Communicator*> comms;
  std::map<Communicator*, std::vector<const Op*>> byComm;
  HostStream* stream = nullptr;
  for (const Op& op : ops) {
    if (byComm.find(op.comm) == byComm.end()) comms.push_back(op.comm);
    byComm[op.comm].push_back(&op);
    if (HostStream* hs = findHostStream(op.stream)) {
      if (stream && stream != hs) {
        return Status::error(Errc::InvalidUsage, "one group uses two different cfx host streams; use one stream per group");
      }
      stream = hs;
    }
  }
  for (Communicator* comm : comms) CFX_TRY(comm->checkUsable());
  if (std::any_of(ops.begin(), ops.end(), touchesDevice)) {
    if (stream) return Status::error(Errc::InvalidUsage, "device buffers cannot be ordered on a cfx host stream");
    return launchDevice(comms, byComm);
  }
  for (const Op& op : ops) CFX_TRY(orderHostOp(op));
  for (Op& op : ops) {
    if (op.kind == Op::Kind::Coll && op.comm->takesHostLanes()) op.seq = hostCallSeq(op.comm);
  }

  // Host work queued behind device work on the same communicator must run after it: queue it too.
  if (!stream && comms.size() == 1 && !comms.front()->hasQueuedWork()) {
    awaitStateUsers(comms.front(), byComm[comms.front()]);
    return runOnThisThread(comms.front(), byComm[comms.front()]);
  }
  std::vector<std::shared_ptr<JobState>> deps = stream ? stream->tail() : std::vector<std::shared_ptr<JobState>>{};
  std::vector<std::shared_ptr<JobState>> jobs;
  // A host-stream launch of collectives on one communicator takes one of its lanes (core/host_lanes.h); device ops,
  // groups over several communicators, sends and receives, and membership communicators keep its queue.
  const bool laneable = stream && comms.size() == 1 &&
                        std::all_of(ops.begin(), ops.end(), [](const Op& op) { return op.kind == Op::Kind::Coll; });
  for (Communicator* comm : comms) {
    Communicator* runner = comm;
    if (laneable && comm->takesHostLanes()) {
      CFX_TRY_ASSIGN(runner, comm->hostLanes().pick());
    }
    // Built when it starts, like the device jobs it may queue behind: building takes the messages' sequence numbers,
    // which then follow the order the jobs run in on every rank. Built now, this op would take its numbers before a
    // device op called earlier whose job has not started, on a rank whose stream was slow, and
    // after it on another (the ops' messages then pair with the wrong op's). Collectives on a communicator with host
    // lanes took theirs above (hostCallSeq). The job keeps its own copy of the ops: on a cfx host stream the call
    // returns before it runs.
    std::vector<Op> own;
    for (const Op* op : byComm[comm]) own.push_back(*op);
    Communicator::DeferredJob job;
    job.build = [runner, own = std::move(own)] {
      std::vector<const Op*> raw;
      for (const Op& op : own) raw.push_back(&op);
      return buildWorks(runner, raw);
    };
    // After a pending job of another lane that uses the same library state (a residual), whatever its outcome: a
    // failure there is the communicator's async error, not this op's.
    if (auto users = comm->hostLanes().stateUsers(byComm[comm]); !users.empty()) {
      job.before = [users = std::move(users)] {
        for (const auto& user : users) (void)user->wait();
        return Status();
      };
    }
    jobs.push_back(runner->enqueue(std::move(job), deps));
    comm->hostLanes().noteStateUser(byComm[comm], jobs.back());
  }
  if (stream) {
    stream->setTail(std::move(jobs));
    return Status();
  }
  Status first;
  for (auto& job : jobs) {
    Status st = job->wait();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

// The inputs of a launch that its outputs overlap (in-place ops), copied before it runs: a launch that fails on
// any member of a membership communicator fails on all of them and gives the caller its inputs back to retry.
class InputBackup {
 public:
  explicit InputBackup(const std::vector<Op>& ops) {
    std::vector<OpRange> ranges;
    for (const Op& op : ops) opRanges(op, &ranges);
    for (const OpRange& in : ranges) {
      if (!in.in) continue;
      const auto* lo = static_cast<const uint8_t*>(in.p);
      const bool overwritten = std::any_of(ranges.begin(), ranges.end(), [&](const OpRange& out) {
        const auto* outLo = static_cast<const uint8_t*>(out.p);
        return out.out && lo < outLo + out.bytes && outLo < lo + in.bytes;
      });
      if (overwritten) saved_.push_back({const_cast<uint8_t*>(lo), std::vector<uint8_t>(lo, lo + in.bytes)});
    }
  }
  void restore() const {
    for (const auto& [p, bytes] : saved_) std::memcpy(p, bytes.data(), bytes.size());
  }

 private:
  std::vector<std::pair<uint8_t*, std::vector<uint8_t>>> saved_;
};

// Every launch: on membership communicators (Communicator::agreesOutcomes), one that holds a collective ends the
// same way on every member of the epoch; it runs on the calling thread with host buffers only, since the
// agreement (a round trip to the membership master) must follow the data.
Status launch(std::vector<Op> ops) {
  std::vector<Communicator*> agreeing;
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Coll && op.comm->agreesOutcomes() &&
        std::find(agreeing.begin(), agreeing.end(), op.comm) == agreeing.end()) {
      agreeing.push_back(op.comm);
    }
  }
  if (agreeing.empty()) return launchOps(std::move(ops));
  for (const Op& op : ops) {
    if (op.comm->agreesOutcomes() && (findHostStream(op.stream) != nullptr || touchesDevice(op))) {
      Status st = Status::error(Errc::InvalidUsage,
                                "collectives on a membership communicator (cfxMemberUpdate) take host buffers and no "
                                "cfx host stream: every member agrees on each one's outcome before it returns");
      CFX_WARN("%s", st.message().c_str());
      for (Communicator* comm : agreeing) (void)comm->agreeOutcome(st);
      return st;
    }
  }
  const InputBackup backup(ops);
  const Status local = launchOps(std::move(ops));
  Status agreed;
  for (Communicator* comm : agreeing) {
    Status st = comm->agreeOutcome(local);
    if (!st.ok() && agreed.ok()) agreed = std::move(st);
  }
  if (!agreed.ok()) backup.restore();
  return agreed;
}

// One collective outside a group on the calling thread: the loop every benchmark and most training steps run.
// Nothing here allocates (the Work and its verbs live on this stack, coroutine frames come from the per-thread
// cache in primitives/coro.h), which for a small all-reduce is a good part of the whole op's cost.
Status launchCollective(const Op& op) {
  Communicator* comm = op.comm;
  CFX_TRY(comm->checkUsable());
  const CollItem item{op.args, hostCallSeq(comm), comm->nextOpCount()};
  prims::Prims prims = comm->prims(transport::kCollChannel);
  const CollNaming naming(item.args);
  prims::Work work;
  work.task = runPlanned(comm, item, naming, prims);
  work.what = coll::collectiveName(op.args.coll);
  work.opCount = item.opCount;
  work.rank = comm->rank();
  // runInline takes a vector; one per thread, reused, keeps this path free of allocation.
  thread_local std::vector<prims::Work*> tRaw;
  std::vector<prims::Work*>& raw = tRaw;
  raw.assign(1, &work);
  Status st = comm->runInline(raw);
  raw.clear();
  return st;
}

Status runInits(std::vector<DeferredSetup>& inits) {
  if (inits.size() == 1) return inits.front().run();
  // One thread sets up several ranks: each setup blocks until all ranks joined, so run them side by side; the
  // setups of one communicator (two window registrations) one after another, in call order, on one thread.
  std::vector<std::vector<DeferredSetup*>> lanes;
  std::map<const void*, size_t> laneOf;
  for (DeferredSetup& d : inits) {
    if (d.key == nullptr || !laneOf.contains(d.key)) {
      if (d.key != nullptr) laneOf[d.key] = lanes.size();
      lanes.emplace_back();
      lanes.back().push_back(&d);
    } else {
      lanes[laneOf[d.key]].push_back(&d);
    }
  }
  // A non-blocking communicator's setup only starts (InProgress) and its next one queues behind it; any other
  // failure ends its lane. The group reports the first failure, else InProgress when anything is still running, as
  // ncclGroupEnd does with non-blocking communicators.
  auto started = [](const Status& st) { return st.code() == Errc::InProgress; };
  std::vector<Status> results(lanes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < lanes.size(); ++i) {
    threads.emplace_back([&, i] {
      for (DeferredSetup* d : lanes[i]) {
        Status st = d->run();
        if (st.ok()) continue;
        if (!started(st)) {
          results[i] = std::move(st);
          break;
        }
        if (results[i].ok()) results[i] = std::move(st);
      }
    });
  }
  for (auto& t : threads) t.join();
  Status outcome;
  for (auto& st : results) {
    if (!st.ok() && !started(st)) return st;
    if (started(st)) outcome = st;
  }
  return outcome;
}

}  // namespace

std::vector<std::shared_ptr<JobState>> HostStream::tail() {
  std::lock_guard<std::mutex> lock(mutex_);
  return tail_;
}

void HostStream::setTail(std::vector<std::shared_ptr<JobState>> jobs) {
  std::lock_guard<std::mutex> lock(mutex_);
  tail_ = std::move(jobs);
}

Status HostStream::query() {
  for (auto& job : tail()) {
    if (!job->isDone()) return Status::error(Errc::InProgress, "host stream has pending work");
  }
  return synchronize();
}

Status HostStream::synchronize() {
  for (auto& job : tail()) CFX_TRY(job->wait());
  return Status();
}

HostStream* createHostStream() {
  auto* s = new HostStream();
  std::lock_guard<std::mutex> lock(gStreamsMutex);
  liveStreams().insert(s);
  return s;
}

Status destroyHostStream(HostStream* stream) {
  {
    std::lock_guard<std::mutex> lock(gStreamsMutex);
    if (liveStreams().erase(stream) == 0) return Status::error(Errc::InvalidArgument, "not a live cfx host stream");
  }
  Status st = stream->synchronize();  // NCCL-style: destroying a stream waits for its work
  delete stream;
  return st;
}

HostStream* findHostStream(const void* stream) {
  if (!stream) return nullptr;
  std::lock_guard<std::mutex> lock(gStreamsMutex);
  return liveStreams().count(stream) ? static_cast<HostStream*>(const_cast<void*>(stream)) : nullptr;
}

int groupDepth() { return tGroup.depth; }

void groupStart() { ++tGroup.depth; }

void noteGroupError(const Status& st) {
  if (tGroup.depth > 0 && tGroup.firstError.ok()) tGroup.firstError = st;
}

Status groupEnd() {
  if (tGroup.depth == 0) return Status::error(Errc::InvalidUsage, "ncclGroupEnd: not in a group call.");
  if (--tGroup.depth > 0) return Status();
  std::vector<Op> ops = std::move(tGroup.ops);
  std::vector<DeferredSetup> inits = std::move(tGroup.inits);
  Status recorded = std::move(tGroup.firstError);
  tGroup = GroupState{};
  // A group is atomic, as in NCCL: when one of its calls failed, none of its operations is launched (the others,
  // enqueued on streams or run now, would leave this rank out of step with the peers and with what ncclGroupEnd
  // reports).
  if (!recorded.ok()) {
    CFX_INFO(log::Sys::Coll, "ncclGroupEnd: a call in the group failed; none of its %zu operation(s) was launched",
             ops.size());
    return recorded;
  }
  if (!inits.empty() && !ops.empty()) {
    return Status::error(Errc::InvalidUsage,
                         "a group may not mix communicator creation or window registration with operations");
  }
  if (!inits.empty()) CFX_TRY(runInits(inits));
  return launch(std::move(ops));
}

Status groupSimulateEnd(float* estimatedTimeUs) {
  if (tGroup.depth == 0) return Status::error(Errc::InvalidUsage, "ncclGroupSimulateEnd: not in a group call.");
  if (--tGroup.depth > 0) return Status();
  // A simple alpha-beta estimate over shared memory: 2 us per step, 5 GB/s per rank.
  double us = 0;
  for (const Op& op : tGroup.ops) {
    const int n = op.comm->nRanks();
    const double bytes = op.kind == Op::Kind::Coll ? static_cast<double>(op.args.count * dataTypeSize(op.args.type))
                                                   : static_cast<double>(op.bytes);
    const int steps = op.kind == Op::Kind::Coll ? 2 * std::max(1, n - 1) : 1;
    us += 2.0 * steps + bytes * 2.0 / 5e3;
  }
  if (estimatedTimeUs) *estimatedTimeUs = static_cast<float>(us);
  tGroup = GroupState{};
  return Status();
}

Status submit(const Op& op) {
  GroupState& group = tGroup;
  if (group.depth > 0) {
    group.ops.push_back(op);
    return Status();
  }
  if (op.kind == Op::Kind::Coll && !op.comm->agreesOutcomes() && !findHostStream(op.stream) && !touchesDevice(op) &&
      !op.comm->hasQueuedWork()) {
    CFX_TRY(orderHostOp(op));
    if (op.args.compress != nullptr || op.args.delta != nullptr) awaitStateUsers(op.comm, {&op});
    return launchCollective(op);
  }
  return launch({op});
}

Status submitInit(std::function<Status()> init, const void* key) {
  if (tGroup.depth > 0) {
    tGroup.inits.push_back(DeferredSetup{key, std::move(init)});
    return Status();
  }
  return init();
}

}  // namespace cfx::core
