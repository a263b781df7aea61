// SPDX-License-Identifier: Apache-2.0
// Communicator: one rank's membership of one communicator, and the object behind ncclComm_t (core layer).
//
// It keeps the communicator's identity, configuration and lifecycle, and owns one member object per subsystem: the
// bootstrap, the transport set (transport/transport_set.h) and the device-direct pieces (transport/device_ipc.h), the
// window registry (core/window_registry.h), the progress queue that runs asynchronous work (core/progress_queue.h)
// and the lanes that run host-stream work beside it (core/host_lanes.h), the plan options and the user reduction ops.
//
// Threading: NCCL's rule holds — one thread at a time issues calls on a communicator. abort(), the async
// error and the progress thread are safe to touch from any thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "collectives/collective.h"
#include "collectives/planner.h"
#include "common/status.h"
#include "core/comm_config.h"
#include "core/compress_state.h"
#include "core/device_stream.h"
#include "core/progress_queue.h"
#include "core/window_registry.h"
#include "faulttol/health_monitor.h"
#include "primitives/executor.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/device_ipc.h"
#include "transport/transport.h"

namespace cfx::transport {
class TransportSet;
}

namespace cfx::core {

class Communicator;
class HostLanes;

// Reaches a communicator from CUDA host functions, which may run after it is gone (a graph replayed late, a stream
// that reaches an op after ncclCommDestroy): they lock `mutex` and find `comm` null once the destructor ran.
struct CommHandle {
  std::mutex mutex;
  Communicator* comm = nullptr;
};

// A registered user reduction: ncclRedOpCreatePreMulSum, or an ordered combine for cfxScan / cfxExScan
// (cfxRedOpCreateAffine, cfxRedOpCreateUser; ReduceOp's Affine and User).
struct UserRedOp {
  enum class Kind : uint8_t { PreMulSum, Affine, User };
  Kind kind = Kind::PreMulSum;
  DataType type;
  bool deviceScalar = false;             // ncclScalarDevice: read the scalar when the op runs
  const void* scalarPtr = nullptr;
  alignas(8) unsigned char scalar[8] = {};
  // Affine: a group is `decays` values (rows, or 1 with scalarDecay) then a rows x cols state.
  uint32_t rows = 0;
  uint32_t cols = 0;
  bool scalarDecay = false;
  // User: the caller's function over units of unitElems elements.
  UserCombineFn fn = nullptr;
  void* ctx = nullptr;
  uint32_t unitElems = 1;
};

class Communicator {
 public:
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Joins the communicator described by `id` as `rank` of `nRanks`. Blocking and collective.
  static Result<std::unique_ptr<Communicator>> create(const transport::UniqueId& id, int rank, int nRanks,
                                                      const CommConfig& config, const CommOptions& options);
  // An object in the Initializing state, for non-blocking init: finishInit() completes it (on any thread).
  static std::unique_ptr<Communicator> createPending(int rank, int nRanks, const CommConfig& config);
  Status finishInit(const transport::UniqueId& id, const CommOptions& options);
  // A finishInit running on another thread gives up at its next wait (the bootstrap's and the connections' waits
  // watch the flag): host lanes being made when their parent fails (core/host_lanes.cc). Any thread.
  void stopInit() { bootstrapAbort_.store(true, std::memory_order_release); }
  // Runs finishInit on a background thread (non-blocking communicators); joined by the destructor.
  void startAsyncInit(const transport::UniqueId& id, const CommOptions& options);
  // As above, where the id itself must first be learnt on that thread (a grow learns it from the parent's ranks,
  // which may still be on their way into the call). A failure of `resolve` fails the communicator.
  void startAsyncInit(std::function<Result<transport::UniqueId>()> resolve, const CommOptions& options);

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }
  int cudaDev() const { return cudaDev_; }
  const CommConfig& config() const { return config_; }
  const CommOptions& options() const { return options_; }
  transport::Bootstrap& bootstrap() { return *bootstrap_; }
  uint64_t commHash() const { return commHash_; }
  // The failed ranks this rank knows of (cfxCommGetFailures); null before init has finished.
  const ft::HealthMonitor* health() const { return health_.get(); }
  // The process is exiting with this communicator still alive: tell the peers it is a departure, not a failure.
  void announceExit();

  // The async state: InProgress while a non-blocking init runs, Ok, or the error that broke the comm.
  Errc asyncError() const { return asyncError_.load(std::memory_order_acquire); }
  Status asyncStatus() const;
  void setAsyncError(const Status& st);
  // Fails unless the communicator accepts new operations (initialized, not revoked, not broken).
  Status checkUsable() const;
  // Why operations stop here: "communicator was revoked by rank N (...)" (a peer, or this rank) or "communicator
  // was aborted"; empty while neither happened. Refused calls, failed device ops and ops stopped by a peer's revoke
  // say it so.
  std::string stopCause() const;
  // A bootstrap exchange that failed on a peer's ended connection (RemoteError) may be that peer giving up because
  // another rank failed. The health monitor names the rank that failed: this waits for its verdict, as long as it
  // takes to declare a silent peer hung, and puts it first ("<failed ranks> (<st>)"). Else, or unless RemoteError,
  // `st` as it is.
  Status blameFailedRank(Status st);

  // Runs works on the calling thread (blocking NULL-stream path).
  Status runInline(std::vector<prims::Work*>& works);
  // A job for the progress thread (core/progress_queue.h); whoever makes a job's `ready` true calls wakeProgress().
  using DeferredJob = core::DeferredJob;
  // Queues a job for the progress thread; it starts once every dependency is done (and its `ready`, if any).
  std::shared_ptr<JobState> enqueue(DeferredJob job, std::vector<std::shared_ptr<JobState>> deps = {});
  // A replay of an op captured in a CUDA graph, queued by the graph's host node once the stream reached it (so it
  // is ready). Replays are not in call order: a graph launch is not a call into this library. They run before a
  // queued job whose stream has not reached it yet, which on one stream is exactly stream order. False (nothing
  // queued) once the communicator stops or aborted: the caller must then release the op's stream itself.
  bool enqueueReplay(DeferredJob job);
  void wakeProgress();
  const std::shared_ptr<CommHandle>& handle() const { return handle_; }
  // True while the progress thread has queued or running work: a blocking op must then queue behind it.
  bool hasQueuedWork();
  // Device-buffer state (stream flag, staging), created on first use.
  DeviceState& device();
  // Every rank's device scratch, mapped here; null unless the device-direct path is on (the same on all ranks).
  const transport::cuda_ipc::IpcScratch* ipcScratch() const { return ipc_ ? ipc_->scratch() : nullptr; }
  // The device-direct pieces behind it (transport/device_ipc.h); null where ipcScratch() is.
  const transport::DeviceIpc* deviceIpc() const { return ipc_.get(); }
  // The device-direct path takes ops of at least this many bytes (CFX_CUDA_IPC_MIN_BYTES); smaller ones stage.
  size_t ipcMinBytes() const { return ipcMinBytes_; }
  // Device-side barriers (core/comm_device_sync.cc): the flag board, null unless CFX_CUDA_IPC_DEVICE_SYNC set one
  // up (the same on every rank), and IpcOneShot's slot size (0: none) and op count.
  transport::cuda_ipc::FlagBoard* flagBoard() const { return ipc_ ? ipc_->board() : nullptr; }
  size_t oneShotBytes() const { return oneShotBytes_; }
  uint64_t* oneShotCount() { return &oneShotCount_; }
  // A program with device-side barriers was enqueued: the watchdog (started on first use) names a peer that does not
  // reach one within CFX_TIMEOUT_MS, makes that the async error, and releases the stream. User thread.
  void watchDeviceBarriers();
  // Lets this rank's stream past every device-side barrier handed out so far (abort, a peer's failure, destroy).
  // Any thread.
  void releaseDeviceBarriers();
  // ncclCommWindowRegister's collective half: with the device-direct path on, every rank maps every rank's window
  // (transport/cuda_ipc/ipc_window.h), on the calling thread. `key` is the window handle. A no-op with the path off.
  Status registerWindow(const void* key, const void* buff, size_t bytes);
  // The same for a non-blocking communicator: queued to a thread of this communicator's, in call order, and
  // InProgress (what ncclCommWindowRegister returns) unless there is nothing to map. Until the queue has run,
  // ncclCommGetAsyncError says ncclInProgress and operations are refused, as NCCL's contract has it; a failure
  // becomes the communicator's async error. Aborting ends it within a poll.
  Status registerWindowAsync(const void* key, const void* buff, size_t bytes);
  // True while a non-blocking registration is queued or running.
  bool windowSetupPending() const { return windows_.pending(); }
  // InvalidUsage naming the pending registration while there is one, else Ok: calls that must wait for it.
  Status checkNoWindowSetup() const;
  // What ncclCommGetAsyncError reports: asyncError(), or InProgress while a non-blocking registration runs.
  Errc userAsyncError() const;
  void deregisterWindow(const void* key);
  // The first registered zero-copy window holding all of [p, p + bytes) on this rank, and p's offset in it: the same
  // offset reaches the op's buffer in every peer's window, as NCCL_WIN_COLL_SYMMETRIC promises. Null when none.
  using WindowSpan = WindowRegistry::Span;
  WindowSpan findWindow(const void* p, size_t bytes);
  // Set by abort(): hooks of queued device jobs stop waiting.
  const std::atomic<bool>& abortFlag() const { return abortFlag_; }
  // Waits until every queued job has finished (ncclCommFinalize).
  Status drain();

  // Verbs on a channel for this rank.
  prims::Prims prims(int channel) {
    prims::Prims p(endpoints(), channel, rank_, nRanks_, sliceBytes_);
    p.setRingChunkSlices(ringChunkSlices_);
    return p;
  }
  size_t sliceBytes() const { return sliceBytes_; }
  // Which ranks share a host, and the planner's prices for this communicator (null: plan without prices).
  const coll::Layout& layout() const { return layout_; }
  const coll::Fabric* fabric() const { return fabric_ ? &*fabric_ : nullptr; }
  // What the planner is asked for one op of `count` elements (NCCL's count meaning for `coll`), and its answer
  // with this communicator's NCCL_ALGO and layout.
  coll::PlanRequest planRequest(coll::Collective coll, size_t count, DataType type) const;
  coll::Plan plan(const coll::PlanRequest& req) const;
  uint32_t nextCollSeq() { return ++collSeq_; }
  // All-or-nothing collectives (membership communicators, core/membership.h): given how one launch that holds a
  // collective ended on this rank, returns how it ends on every member. Unset, each rank's own outcome stands.
  using OutcomeAgreement = std::function<Status(const Status& local)>;
  void setOutcomeAgreement(OutcomeAgreement agreement) { agreement_ = std::move(agreement); }
  bool agreesOutcomes() const { return static_cast<bool>(agreement_); }
  Status agreeOutcome(const Status& local) const { return agreement_(local); }
  uint32_t nextSendSeq(int peer) { return ++sendSeq_[static_cast<size_t>(peer)]; }
  uint32_t nextRecvSeq(int peer) { return ++recvSeq_[static_cast<size_t>(peer)]; }
  uint64_t nextOpCount() { return opCount_++; }

  // Lifecycle.
  Status finalize();
  void abort();   // never blocks for long: peers may be dead
  Status revoke();
  bool finalized() const { return finalized_; }
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }

  // User reduction ops: handles are kFirstUserOp (ncclNumOps) + index.
  static constexpr int kFirstUserOp = 5;
  int addRedOp(const UserRedOp& op);
  const UserRedOp* findRedOp(int handle) const;
  bool removeRedOp(int handle);

  // Default codec, library-kept residuals and the last compressed op's statistics; a lane's are its parent's.
  CompressState& compression() { return laneParent_ != nullptr ? laneParent_->compression() : compress_; }

  // Host-stream lanes (core/host_lanes.h). takesHostLanes: whether a host-stream launch on this communicator alone
  // may run on one of its lanes: a blocking communicator with CFX_HOST_LANES > 1 that is no lane itself and agrees no
  // outcomes (a membership communicator's launches run on the calling thread).
  bool takesHostLanes() const;
  HostLanes& hostLanes() { return *lanes_; }
  // On a lane, called once right after it is made: the parent whose compression state, stop cause and async error
  // it shares. An error the lane met before (its health monitor runs already) becomes the parent's too.
  void becomeLaneOf(Communicator* parent);
  // A lane's parent stopped (revoke, a peer's revoke, a mismatched call): running and queued work stops at its next
  // poll and fails with the parent's cause. Any thread; never blocks.
  void stopWork();
  // The figures the ranks agreed on at init (CFX_TOPO_CALIBRATE), which a lane plans with too.
  const std::optional<topo::Calibration>& agreedCalibration() const { return calibration_; }

  // Split/shrink bookkeeping so every child gets a distinct bootstrap tag.
  uint32_t nextSplitCount() { return ++splitCount_; }

  // ncclCommGetUniqueId: a fresh id (its bootstrap root runs in this process) for the next ncclCommGrow. Only one
  // may be outstanding, as in NCCL: InvalidUsage while an earlier one is not consumed.
  Result<transport::UniqueId> newGrowId(const transport::BootstrapOptions& options);
  // ncclCommGrow on the rank that passes the id: true, and the id is consumed, when it is this rank's outstanding
  // grow id. Any other id is refused, so a stale or foreign id cannot form a communicator with the wrong ranks.
  bool takeGrowId(const transport::UniqueId& id);

 private:
  Communicator(int rank, int nRanks, const CommConfig& config);
  Status connect(const transport::UniqueId& id);
  Status checkSecretAcrossHosts() const;
  Status checkSettingsAgree() const;
  Status startHealth();
  Status learnPlacement();
  // CFX_TOPO_CALIBRATE: every rank measures, all plan with the median (calibration_). Collective, at init.
  Status agreeCalibration();
  void learnTopology();
  Result<topo::TopologyView> planningView() const;
  Status setupDeviceDirect();
  // With the IPC scratch set up: the flag board of device-side barriers where CFX_CUDA_IPC_DEVICE_SYNC asks for one
  // (core/comm_device_sync.cc). Collective; every rank takes the same branch.
  Status setupDeviceSync();
  void boardWatchLoop();
  void stopBoardWatch();
  // registerWindow's collective part, on whichever thread runs it; stops early on abort or a failed peer.
  Status mapWindow(const void* key, const void* buff, size_t bytes);
  void revokedRemotely(const ft::RevokeNotice& notice);  // from the health monitor: another rank revoked it
  // This rank's op found a mismatched call: revoke with that error, so every rank's op fails with it.
  void revokeForMismatch(const Status& st);
  void stopProgressThread() { progress_->stop(); }
  // A device job failed on the progress thread: nobody waits on its state.
  void deviceJobFailed(const Status& st);

  int rank_;
  int nRanks_;
  int cudaDev_ = -1;
  CommConfig config_;
  CommOptions options_;
  uint64_t commHash_ = 0;

  std::unique_ptr<transport::Bootstrap> bootstrap_;
  std::vector<transport::PeerInfo> peers_;
  // Every transport this rank reaches its peers with (transport/transport_set.h), and their ends.
  std::unique_ptr<transport::TransportSet> transports_;
  transport::Endpoints& endpoints();
  size_t directMinBytes_ = 0;  // coll::PlanRequest::directMinBytes
  bool directAnyBuffer_ = false;  // coll::PlanRequest::directAnyBuffer
  Doorbell* doorbell_ = nullptr;  // owned by transports_
  // Rings doorbell_ and calls setAsyncError: created after the transports, destroyed before them.
  std::unique_ptr<ft::HealthMonitor> health_;
  size_t sliceBytes_ = 0;
  int ringChunkSlices_ = 1;  // prims::Prims::ringChunkSlices(); agreed at init like sliceBytes_
  int netRails_ = 1;         // network rails every TCP link stripes over (the fewest any rank has); planner input
  coll::Layout layout_;
  std::optional<coll::Fabric> fabric_;
  std::optional<topo::Calibration> calibration_;  // agreed at init when CFX_TOPO_CALIBRATE is set
  int yieldEvery_ = 64;  // failed polls between yields while waiting (prims::yieldInterval)
  double ranksPerCpu_ = 1;  // on the most crowded machine (learnPlacement); the planner's step overhead follows it

  uint32_t collSeq_ = 0;
  OutcomeAgreement agreement_;
  std::vector<uint32_t> sendSeq_;
  std::vector<uint32_t> recvSeq_;
  uint64_t opCount_ = 0;
  uint32_t splitCount_ = 0;
  // The last plan per collective, as (bytes << 8) | algorithm, kNoPlan when none: see plan().
  static constexpr uint64_t kNoPlan = ~uint64_t{0};
  mutable std::array<std::atomic<uint64_t>, coll::kNumCollectives> lastPlan_;
  std::mutex growMutex_;
  std::optional<std::array<uint8_t, transport::UniqueId::kBytes>> growId_;  // encoded; set by newGrowId

  std::atomic<Errc> asyncError_{Errc::Ok};
  mutable std::mutex errorMutex_;
  Status asyncStatus_;
  std::atomic<bool> abortFlag_{false};
  // The bootstrap's own abort flag: set by abort() only. revoke() stops data operations but leaves the
  // bootstrap working, because split and shrink of a revoked communicator exchange ids over it.
  std::atomic<bool> bootstrapAbort_{false};
  // Threads currently inside runInline(): abort() must not free the communicator under them (a watchdog
  // thread aborting while the user's thread is blocked in a collective is the normal PyTorch pattern).
  std::atomic<int> inlineActive_{0};
  std::atomic<bool> revoked_{false};
  std::atomic<int> revokedBy_{-1};  // the rank whose revoke notice reached us; -1 when revoked here or not at all
  std::atomic<bool> revokedHere_{false};  // ncclCommRevoke was called on this rank
  // Why the communicator was revoked when it was not ncclCommRevoke (a mismatched call, found here or by the rank
  // revokedBy_): the error every op then fails with. Written once, before revoked_ is set; read after it is.
  mutable std::mutex revokeMutex_;
  Errc revokeCode_ = Errc::Ok;
  std::string revokeReason_;
  // Stopped by another rank's revoke, not by this rank's own abort or revoke: news to report, not a deliberate stop.
  bool revokedByPeer() const {
    return revokedBy_.load(std::memory_order_relaxed) >= 0 && !revokedHere_.load(std::memory_order_relaxed);
  }
  // The error a revoke carries: Ok for ncclCommRevoke (or none), else the mismatched call's a rank found.
  Errc revokeCode() const {
    std::lock_guard lock(revokeMutex_);
    return revokeCode_;
  }
  bool finalized_ = false;

  std::vector<std::optional<UserRedOp>> redOps_;
  CompressState compress_;

  std::mutex deviceMutex_;
  std::unique_ptr<DeviceState> device_;
  // ipc_ is set during setup and freed at destruction while health and abort threads may release its barriers
  // (releaseDeviceBarriers): both take ipcMutex_.
  std::mutex ipcMutex_;
  std::unique_ptr<transport::DeviceIpc> ipc_;  // the scratch, and the flag board where one was set up
  size_t ipcMinBytes_ = 0;
  size_t oneShotBytes_ = 0;
  uint64_t oneShotCount_ = 0;  // user thread, in call order
  std::mutex boardWatchMutex_;
  std::condition_variable boardWatchCv_;
  bool boardWatchStop_ = false;
  std::thread boardWatch_;
  WindowRegistry windows_;
  std::shared_ptr<CommHandle> handle_ = std::make_shared<CommHandle>();
  std::unique_ptr<ProgressQueue> progress_;
  std::unique_ptr<HostLanes> lanes_;
  // Set on a lane (becomeLaneOf) before it runs any job, under errorMutex_: its health thread reads it in
  // setAsyncError; the lane's jobs read it after the queue's lock.
  Communicator* laneParent_ = nullptr;
  std::thread initThread_;
};

// Live-communicator registry: ncclComm_t values are checked against it, so a destroyed or garbage handle
// is reported instead of being dereferenced.
void registerComm(Communicator* comm);
void unregisterComm(Communicator* comm);
bool isLiveComm(const void* comm);

}  // namespace cfx::core
