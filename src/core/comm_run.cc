// SPDX-License-Identifier: Apache-2.0
// A communicator's running work and its stopping (core layer): the async state, ops run on the calling thread or
// queued for the progress thread (core/progress_queue.h), drain, finalize and revoke (by ncclCommRevoke, by a peer's
// notice, or by a mismatched call this rank found), and the user reduction ops. Creation, setup and abort (which reaches into the
// transports) are in communicator.cc.
#include "common/log.h"
#include "core/communicator.h"
#include "core/host_lanes.h"

namespace cfx::core {

// ---- state ----

Status Communicator::asyncStatus() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (asyncError() == Errc::InProgress) return Status::error(Errc::InProgress, "communicator initialization in progress");
  return asyncStatus_;
}

void Communicator::setAsyncError(const Status& st) {
  Communicator* parent = nullptr;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!asyncStatus_.ok()) return;  // the first failure is the one users need to see
    asyncStatus_ = st;
    // A thread polling ncclCommGetAsyncError (PyTorch's watchdog) reads ncclGetLastError as soon as it sees the
    // code, which may be before the failure's WARN is logged (a device op's, on the progress thread): the text is
    // there first, and the WARN then replaces it with its own.
    log::setLastError(strprintf("rank %d: %s", rank_, st.message().c_str()).c_str());
    // Release pairs with asyncError()'s acquire: a reader that sees the code can read asyncStatus_.
    asyncError_.store(st.code(), std::memory_order_release);
    parent = laneParent_;
  }
  // A lane's error is its parent's: the user sees only the parent (ncclCommGetAsyncError, checkUsable).
  if (parent != nullptr && !st.ok()) parent->setAsyncError(st);
}

void Communicator::becomeLaneOf(Communicator* parent) {
  Status earlier;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    laneParent_ = parent;
    earlier = asyncStatus_;
  }
  if (!earlier.ok()) parent->setAsyncError(earlier);
}

bool Communicator::takesHostLanes() const {
  return laneParent_ == nullptr && !agreesOutcomes() && config_.blocking && options_.hostLanes > 1;
}

void Communicator::stopWork() {
  // Release pairs with the executor's and the progress queue's acquire loads, as in revoke().
  abortFlag_.store(true, std::memory_order_release);
  if (doorbell_) doorbell_->ring();
  wakeProgress();
}

std::string Communicator::stopCause() const {
  if (laneParent_ != nullptr) return laneParent_->stopCause();  // a lane stops only when its parent does
  if (!revoked()) return abortFlag_.load(std::memory_order_acquire) ? "communicator was aborted" : "";
  const int by = revokedBy_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(revokeMutex_);
    if (revokeCode_ != Errc::Ok && by >= 0) {
      return strprintf("communicator was revoked by rank %d after it found %s", by, revokeReason_.c_str());
    }
    if (revokeCode_ != Errc::Ok) return "communicator was revoked by this rank after it found " + revokeReason_;
  }
  if (by >= 0) return strprintf("communicator was revoked by rank %d (ncclCommRevoke)", by);
  return revokedHere_.load(std::memory_order_relaxed)
             ? strprintf("communicator was revoked by rank %d (this rank's ncclCommRevoke)", rank_)
             : std::string("communicator was revoked (ncclCommRevoke)");
}

Status Communicator::blameFailedRank(Status st) {
  if (st.code() != Errc::RemoteError || health_ == nullptr || abortFlag_.load(std::memory_order_acquire)) return st;
  if (!health_->awaitFailure(options_.health.hungAfter() + options_.health.period)) return st;
  return Status::error(Errc::RemoteError, health_->describeFailures() + " (" + st.message() + ")");
}

Status Communicator::checkUsable() const {
  const Errc e = asyncError();
  if (e == Errc::InProgress) {
    return Status::error(Errc::InvalidUsage, "communicator is still initializing: poll ncclCommGetAsyncError until it "
                                             "returns ncclSuccess before issuing operations");
  }
  CFX_TRY(checkNoWindowSetup());
  if (revoked()) {
    return Status::error(Errc::InvalidUsage, stopCause() + ": only destroy, split or shrink are allowed");
  }
  if (abortFlag_.load(std::memory_order_acquire)) return Status::error(Errc::InvalidUsage, stopCause());
  if (finalized_) return Status::error(Errc::InvalidUsage, "communicator was finalized: only destroy is allowed");
  if (e != Errc::Ok) {
    Status st = asyncStatus();
    return Status::error(st.code(), "communicator is broken by an earlier error: " + st.message());
  }
  return Status();
}

// ---- running work ----

Status Communicator::runInline(std::vector<prims::Work*>& works) {
  log::setThreadRank(rank_);
  // Pairs with abort()'s load: an abort either sees this thread inside, or this thread sees the flag below.
  inlineActive_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_release); }  // pairs with abort()'s acquire wait
  } leave{inlineActive_};
  // A lane is revoked with its parent, and a mismatch it finds revokes the parent (which stops every lane).
  Communicator& owner = laneParent_ != nullptr ? *laneParent_ : *this;
  if (abortFlag_.load(std::memory_order_seq_cst)) {
    // A revoke for a mismatched call gives that call's error (ncclInvalidUsage) here too, whether its notice came
    // before this op started or stopped it midway (below): which one happens is a race between the ranks.
    const Errc code = owner.revokeCode();
    return Status::error(code != Errc::Ok ? code : Errc::RemoteError, stopCause() + " before this operation started");
  }
  prims::ExecOptions eo;
  eo.doorbell = doorbell_;
  eo.abortFlag = &abortFlag_;
  eo.spins = options_.spins;
  eo.yieldEvery = yieldEvery_;
  eo.timeout = options_.timeout;
  eo.health = health_.get();
  eo.endpoints = &endpoints();
  Status st = prims::execute(works, eo);
  // A peer's revoke is the cause of whatever this op then failed with; this rank's own abort or revoke is not news.
  // A revoke for a mismatched call gives every rank that call's error, instead of the abort it caused here: also to
  // this rank's ops that it stopped on other host lanes.
  if (!st.ok() && owner.revokedByPeer()) {
    const Errc code = owner.revokeCode();
    st = code == Errc::Ok || code == st.code() ? Status::error(st.code(), owner.stopCause() + ": " + st.message())
                                               : Status::error(code, owner.stopCause());
  } else if (prims::isMismatch(st)) {
    owner.revokeForMismatch(st);
  } else if (!st.ok() && owner.revokeCode() != Errc::Ok) {
    st = Status::error(owner.revokeCode(), owner.stopCause());
  }
  if (!st.ok()) setAsyncError(st);
  return st;
}

std::shared_ptr<JobState> Communicator::enqueue(DeferredJob deferred, std::vector<std::shared_ptr<JobState>> deps) {
  return progress_->enqueue(std::move(deferred), std::move(deps));
}

bool Communicator::enqueueReplay(DeferredJob deferred) { return progress_->enqueueReplay(std::move(deferred)); }

void Communicator::wakeProgress() { progress_->wake(); }

bool Communicator::hasQueuedWork() { return progress_->busy(); }

DeviceState& Communicator::device() {
  std::lock_guard<std::mutex> lock(deviceMutex_);
  if (!device_) device_ = std::make_unique<DeviceState>(rank_);
  return *device_;
}

// Nobody waits on a device job's state: its failure is the communicator's async error, and this WARN is the text
// ncclGetLastError gives (a blocking call's error is logged by the call). Not after this rank's own abort or revoke,
// which end every pending op on purpose; a peer's revoke, or one for a mismatch, is news here.
void Communicator::deviceJobFailed(const Status& st) {
  if (!abortFlag_.load(std::memory_order_acquire) || revokedByPeer() || revokeCode() != Errc::Ok) {
    CFX_WARN("rank %d: an operation on device buffers failed (its streams went on; its outputs are undefined): %s",
             rank_, st.message().c_str());
  }
  setAsyncError(st);
}

Status Communicator::drain() {
  progress_->drain();
  lanes_->drain();
  return asyncStatus();
}

Status Communicator::finalize() {
  if (finalized_) return Status::error(Errc::InvalidArgument, "communicator already finalized");
  Status st = drain();
  finalized_ = true;
  return st.code() == Errc::InProgress ? Status() : st;
}

void Communicator::revokedRemotely(const ft::RevokeNotice& notice) {
  {
    std::lock_guard lock(revokeMutex_);
    revokeCode_ = notice.code;
    revokeReason_ = notice.reason;
  }
  revokedBy_.store(notice.origin, std::memory_order_relaxed);
  abortFlag_.store(true, std::memory_order_release);
  revoked_.store(true, std::memory_order_release);
  lanes_->stopWork();
  releaseDeviceBarriers();
  if (doorbell_) doorbell_->ring();
  wakeProgress();  // a device job still waiting for its stream fails now
}

// The ranks' calls differ and data has moved: whatever sits in the FIFOs belongs to no op the others will run, so
// the communicator cannot go on. Every other rank's op is stopped with this error, through the health channel's
// revoke notice, rather than left to time out or to see a closed connection (docs/DESIGN.md, "Mismatched calls").
// Queued work fails fast on the flag; destroy, split and shrink still work, as after ncclCommRevoke.
void Communicator::revokeForMismatch(const Status& st) {
  if (revoked()) return;  // another rank's revoke, or an earlier mismatch, was first
  // The text says "this rank"; on the ranks that read it, that is this one.
  std::string reason = st.message();
  const std::string me = strprintf("rank %d", rank_);
  for (size_t at = reason.find("this rank"); at != std::string::npos; at = reason.find("this rank", at + me.size())) {
    reason.replace(at, 9, me);
  }
  {
    std::lock_guard lock(revokeMutex_);
    revokeCode_ = st.code();
    revokeReason_ = reason;
  }
  if (health_) health_->announceRevoke(st.code(), reason);
  abortFlag_.store(true, std::memory_order_release);
  revoked_.store(true, std::memory_order_release);
  lanes_->stopWork();
  releaseDeviceBarriers();  // a stream waiting at a device-side barrier goes on, as after a peer's revoke
  if (doorbell_) doorbell_->ring();
}

Status Communicator::revoke() {
  // Every rank of a job typically calls ncclCommRevoke; one that already heard another's revoke is not revoking
  // twice. Only a second call on this rank is an error.
  if (finalized_) return Status::error(Errc::InvalidArgument, "communicator already finalized");
  if (revokedHere_.exchange(true)) return Status::error(Errc::InvalidArgument, "communicator already revoked");
  if (asyncError() != Errc::InProgress && health_) health_->announceRevoke();
  // Release pairs with the executor's acquire: in-flight operations stop; the comm stays usable for split.
  abortFlag_.store(true, std::memory_order_release);
  revoked_.store(true, std::memory_order_release);
  lanes_->stopWork();
  releaseDeviceBarriers();
  if (doorbell_) doorbell_->ring();
  wakeProgress();
  (void)drain();  // queued work fails fast on the flag; its errors are the revoke's point, not a failure of it
  return Status();
}

// ---- user reduction ops ----

int Communicator::addRedOp(const UserRedOp& op) {
  for (size_t i = 0; i < redOps_.size(); ++i) {
    if (!redOps_[i]) {
      redOps_[i] = op;
      return kFirstUserOp + static_cast<int>(i);
    }
  }
  redOps_.push_back(op);
  return kFirstUserOp + static_cast<int>(redOps_.size() - 1);
}

const UserRedOp* Communicator::findRedOp(int handle) const {
  const int i = handle - kFirstUserOp;
  if (i < 0 || static_cast<size_t>(i) >= redOps_.size() || !redOps_[static_cast<size_t>(i)]) return nullptr;
  return &*redOps_[static_cast<size_t>(i)];
}

bool Communicator::removeRedOp(int handle) {
  const int i = handle - kFirstUserOp;
  if (i < 0 || static_cast<size_t>(i) >= redOps_.size() || !redOps_[static_cast<size_t>(i)]) return false;
  redOps_[static_cast<size_t>(i)].reset();
  return true;
}

}  // namespace cfx::core
