// SPDX-License-Identifier: Apache-2.0
// ProcessGroupConflux's life: the communicator from the store's unique id, Works, the completion thread, the
// timeout watchdog, split and shutdown. The operations themselves are in collectives.cc.
#include "process_group_conflux.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <ATen/core/ivalue.h>
#include <Python.h>

namespace cfx::torchext {
namespace {

const char* const kUniqueIdKey = "cfx_unique_id";

// Lets go of the GIL for a scope when this thread holds it. The group's last reference usually goes from Python,
// GIL held, while its completion thread may be releasing a Work whose tensors own Python objects (torch keeps a
// tensor's PyObject alive in C++), which takes the GIL: joining that thread with the GIL held would deadlock.
class GilRelease {
 public:
  GilRelease() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

}  // namespace

// ---- Completer ---------------------------------------------------------------------------------------------------

Completer::Completer() : thread_([this] { loop(); }) {}

Completer::~Completer() { stop(); }

void Completer::add(c10::intrusive_ptr<ConfluxWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(work));
      cv_.notify_one();
      return;
    }
  }
  work->completeFromStream();
}

void Completer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Completer::loop() {
  for (;;) {
    c10::intrusive_ptr<ConfluxWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and done
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work->completeFromStream();
  }
}

// ---- ConfluxWork -------------------------------------------------------------------------------------------------

ConfluxWork::ConfluxWork(int rank, c10d::OpType opType, const char* name, cfxHostStream_t stream,
                         std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, Finish finish,
                         std::chrono::steady_clock::time_point deadline, std::shared_ptr<Completer> completer)
    : c10d::Work(rank, opType),
      name_(name),
      stream_(stream),
      outputs_(std::move(outputs)),
      keepAlive_(std::move(keepAlive)),
      finish_(std::move(finish)),
      deadline_(deadline),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      completer_(std::move(completer)) {}

ConfluxWork::~ConfluxWork() {
  // Completed by now unless nobody waited and the group is gone; destroying waits for the operation either way, so
  // the tensors it uses (keepAlive_) outlive it.
  if (stream_ != nullptr) (void)api().hostStreamDestroy(stream_);
}

bool ConfluxWork::isCompleted() { return poll(); }

bool ConfluxWork::over() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  return api().hostStreamQuery(stream_) != ncclInProgress;
}

bool ConfluxWork::poll() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  if (api().hostStreamQuery(stream_) == ncclInProgress) return false;
  completeFromStream();
  return true;
}

bool ConfluxWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr ConfluxWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> ConfluxWork::result() { return outputs_; }

void ConfluxWork::synchronize() {}  // host memory: nothing to order after the operation

bool ConfluxWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    completeFromStream();
  } else {
    // A bounded wait polls: the stream's own wait has no bound.
    const auto until = std::chrono::steady_clock::now() + timeout;
    auto nap = std::chrono::microseconds(10);
    while (!poll()) {
      TORCH_CHECK(std::chrono::steady_clock::now() < until, "conflux: ", name_, " still running after the ",
                  timeout.count(), " ms wait() allowed");
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> ConfluxWork::getFuture() {
  // The future must complete even if nobody ever waits on this Work: hand it to the completer (once).
  if (!futureAsked_.exchange(true)) {
    completer_->add(c10::intrusive_ptr<ConfluxWork>::unsafe_reclaim_from_nonowning(this));
  }
  return future_;
}

void ConfluxWork::setCause(std::string cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cause_.empty()) cause_ = std::move(cause);
}

void ConfluxWork::completeFromStream() {
  // completed_ first: a future's callback, run while this Work completes, may wait on it.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
  }
  std::lock_guard<std::mutex> once(completeMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
  }
  complete(api().hostStreamSynchronize(stream_));
}

void ConfluxWork::complete(ncclResult_t rc) {
  std::exception_ptr error;
  if (rc != ncclSuccess) {
    std::string text = describe(name_, rc);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!cause_.empty()) text = cause_ + " (" + text + ")";
    }
    error = std::make_exception_ptr(std::runtime_error("conflux: " + text));
  } else if (finish_) {
    try {
      finish_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  finish_ = nullptr;
  keepAlive_.clear();
  finish(error);  // c10d::Work: completed_, exception_, waiters
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// ---- ProcessGroupConflux -----------------------------------------------------------------------------------------

ProcessGroupConflux::ProcessGroupConflux(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         c10::intrusive_ptr<Options> options, const std::string& libraryPath)
    : c10d::ProcessGroup(rank, size), options_(std::move(options)) {
  loadApi(libraryPath);
  ncclUniqueId id;
  if (rank == 0) {
    check(api().getUniqueId(&id), "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    store->wait({kUniqueIdKey}, options_->timeout);
    const std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id), "conflux: the store's unique id has ", bytes.size(), " bytes, not ",
                sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  check(api().commInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  if (rank == 0) {
    // Every rank has joined, so every rank has read it: the id (a credential) need not stay in the store.
    try {
      store->deleteKey(kUniqueIdKey);
    } catch (const std::exception&) {
      // Stores without deleteKey keep it; the secret then lives as long as the store, as with other backends.
    }
  }
  start();
}

ProcessGroupConflux::ProcessGroupConflux(AdoptTag, ncclComm_t comm, int rank, int size,
                                         c10::intrusive_ptr<Options> options)
    : c10d::ProcessGroup(rank, size), comm_(comm), options_(std::move(options)) {
  start();
}

void ProcessGroupConflux::start() {
  if (!options_->codec.empty()) {
    cfxCodec codec;
    ncclResult_t rc = api().codecParse(options_->codec.c_str(), &codec);
    const std::string& mode = options_->codecMode;
    codec.mode = mode == "always" ? cfxCompressAlways : mode == "never" ? cfxCompressNever : cfxCompressAuto;
    if (mode != "auto" && mode != "always" && mode != "never") rc = ncclInvalidArgument;
    if (rc == ncclSuccess) rc = api().commSetCodec(comm_, &codec);
    if (rc != ncclSuccess) {
      const std::string why = mode != "auto" && mode != "always" && mode != "never"
                                  ? "codec_mode \"" + mode + "\" is not auto, always or never"
                                  : describe("cfxCommSetCodec", rc);
      (void)api().commAbort(comm_);  // every rank parses the same text, so every rank fails here alike
      comm_ = nullptr;
      TORCH_CHECK(false, "conflux: codec \"", options_->codec, "\": ", why);
    }
  }
  init();
  completer_ = std::make_shared<Completer>();
  watchdog_ = std::thread([this] { watchdogLoop(); });
}

ProcessGroupConflux::~ProcessGroupConflux() {
  GilRelease nogil;
  bool idle;
  {
    std::lock_guard<std::mutex> lock(pendingMutex_);
    reapLocked();
    idle = pending_.empty();
  }
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    if (comm_ != nullptr) {
      // Destroy drains what is queued, which may wait on a peer that never calls; abort never waits.
      (void)(idle && brokenBy_.empty() ? api().commDestroy(comm_) : api().commAbort(comm_));
      comm_ = nullptr;
    }
  }
  {
    std::lock_guard<std::mutex> lock(pendingMutex_);
    stopping_ = true;
    pending_.clear();  // a Work still held elsewhere completes (with the abort's error) when it is waited on
  }
  watchdogCv_.notify_all();
  watchdog_.join();
  completer_->stop();
}

ncclComm_t ProcessGroupConflux::liveComm() {
  TORCH_CHECK(brokenBy_.empty(), "conflux: this process group can no longer be used: ", brokenBy_);
  TORCH_CHECK(comm_ != nullptr, "conflux: this process group was aborted");
  return comm_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::enqueue(Launch launch) {
  const auto timeout = launch.timeout == c10d::kUnsetTimeout ? options_->timeout : launch.timeout;
  c10::intrusive_ptr<ConfluxWork> work;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    ncclComm_t comm = liveComm();
    cfxHostStream_t stream = nullptr;
    check(api().hostStreamCreate(&stream), "cfxHostStreamCreate");
    try {
      launch.calls(comm, reinterpret_cast<cudaStream_t>(stream));
    } catch (...) {
      (void)api().hostStreamDestroy(stream);
      throw;
    }
    work = c10::make_intrusive<ConfluxWork>(rank_, launch.type, launch.name, stream, std::move(launch.outputs),
                                            std::move(launch.keepAlive), std::move(launch.finish),
                                            std::chrono::steady_clock::now() + timeout, completer_);
  }
  std::lock_guard<std::mutex> lock(pendingMutex_);
  reapLocked();
  pending_.push_back(work);
  return work;
}

void ProcessGroupConflux::reapLocked() {
  // Operations mostly end in call order (collectives on different host lanes need not): the first one still running
  // ends the scan, and one over behind it goes at a later reap.
  while (!pending_.empty() && pending_.front()->over()) pending_.pop_front();
}

void ProcessGroupConflux::drain() {
  std::deque<c10::intrusive_ptr<ConfluxWork>> works;
  {
    std::lock_guard<std::mutex> lock(pendingMutex_);
    works.swap(pending_);
  }
  for (auto& work : works) work->completeFromStream();  // bounded by the failure deadlines and the watchdog
}

void ProcessGroupConflux::watchdogLoop() {
  std::unique_lock<std::mutex> lock(pendingMutex_);
  bool revoked = false;
  while (!stopping_) {
    // Looks at least once a second (PyTorch's timeouts are seconds to minutes), and at the earliest deadline.
    reapLocked();
    auto wake = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    if (!revoked) {
      for (const auto& work : pending_) wake = std::min(wake, work->deadline());
    }
    watchdogCv_.wait_until(lock, wake);
    if (stopping_ || revoked) continue;
    const auto now = std::chrono::steady_clock::now();
    auto late = std::find_if(pending_.begin(), pending_.end(),
                             [&](const auto& w) { return w->deadline() <= now && !w->over(); });
    if (late == pending_.end()) continue;
    revoked = true;
    const std::string cause = std::string((*late)->name()) + " ran past its timeout (" +
                              std::to_string(options_->timeout.count()) +
                              " ms unless the operation set its own); the communicator was revoked, so this and "
                              "every later operation of the group fail";
    for (auto& w : pending_) w->setCause(cause);
    lock.unlock();
    {
      std::lock_guard<std::mutex> call(callMutex_);
      if (comm_ != nullptr && brokenBy_.empty()) {
        brokenBy_ = cause;
        // Stops the operations in flight here and, through the revoke notice, on every peer; they fail as it
        // reaches them, and nothing new is accepted.
        (void)api().commRevoke(comm_, NCCL_REVOKE_DEFAULT);
      }
    }
    lock.lock();
  }
}

c10::intrusive_ptr<ProcessGroupConflux> ProcessGroupConflux::split(const std::vector<int64_t>& ranks,
                                                                   c10::intrusive_ptr<Options> options) {
  auto me = std::find(ranks.begin(), ranks.end(), static_cast<int64_t>(rank_));
  TORCH_CHECK(me != ranks.end(), "conflux: rank ", rank_, " is not in the new group; it calls _split_nocolor()");
  const int key = static_cast<int>(me - ranks.begin());
  drain();  // the split is a collective of its own; let every earlier operation finish first, on every rank
  ncclComm_t child = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    check(api().commSplit(liveComm(), 0, key, &child, nullptr), "ncclCommSplit");
  }
  return c10::make_intrusive<ProcessGroupConflux>(AdoptTag{}, child, key, static_cast<int>(ranks.size()),
                                                  std::move(options));
}

void ProcessGroupConflux::splitNoColor() {
  drain();
  ncclComm_t child = nullptr;
  std::lock_guard<std::mutex> lock(callMutex_);
  check(api().commSplit(liveComm(), NCCL_SPLIT_NOCOLOR, 0, &child, nullptr), "ncclCommSplit");
}

cfxCompressStats ProcessGroupConflux::compressStats() {
  drain();
  cfxCompressStats stats{};
  std::lock_guard<std::mutex> lock(callMutex_);
  check(api().commGetCompressStats(liveComm(), &stats), "cfxCommGetCompressStats");
  return stats;
}

void ProcessGroupConflux::abort() {
  std::lock_guard<std::mutex> lock(callMutex_);
  if (comm_ != nullptr) (void)api().commAbort(comm_);
  comm_ = nullptr;
}

}  // namespace cfx::torchext
