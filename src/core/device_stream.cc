// SPDX-License-Identifier: Apache-2.0
// Device buffers on a cudaStream_t (core layer).
#include "core/device_stream.h"

#include <algorithm>
#include <bit>
#include <chrono>

namespace cfx::core {

namespace {

// Flags live in 4 KiB pinned pages carved into 64-byte slots (one cache line each, so the GPU's polling of one
// communicator's word does not share a line with another's). Pages are never freed: a stream may still be waiting
// on a slot when its communicator is destroyed, and freeing mapped memory under a waiting stream faults the GPU.
constexpr size_t kFlagPage = 4096;
constexpr size_t kFlagSlot = 64;

std::mutex gFlagMutex;
std::vector<uint64_t*> gFreeFlags;  // slots of destroyed graphs, which nothing waits on any more

Result<uint64_t*> allocateFlagSlot() {
  static unsigned char* page = nullptr;
  static size_t used = kFlagPage;
  std::lock_guard<std::mutex> lock(gFlagMutex);
  if (!gFreeFlags.empty()) {
    uint64_t* slot = gFreeFlags.back();
    gFreeFlags.pop_back();
    *slot = 0;
    return slot;
  }
  if (used == kFlagPage) {
    void* p = nullptr;
    CFX_TRY(cuda::check(cuda::driver()->memHostAlloc(&p, kFlagPage, cuda::kHostAllocPortable | cuda::kHostAllocDeviceMap),
                        "cuMemHostAlloc (stream flags)"));
    page = static_cast<unsigned char*>(p);
    used = 0;
  }
  auto* slot = reinterpret_cast<uint64_t*>(page + used);
  used += kFlagSlot;
  *slot = 0;
  return slot;
}

void releaseFlagSlot(uint64_t* slot) {
  std::lock_guard<std::mutex> lock(gFlagMutex);
  gFreeFlags.push_back(slot);
}

void setWord(uint64_t* word, uint64_t value) {
  std::atomic_ref<uint64_t>(*word).store(value, std::memory_order_release);
}

// Stalls `stream` until the word reaches `value`. CUDA waits on its low 32 bits (the slot is little-endian), whose
// cyclic compare is right across a wrap; HIP's compare is a plain >=, so there it waits on all 64 bits, which do
// not wrap (cuda_driver.h). Sequence numbers start below 2^32 (kFirstSeq), so tests cross the wrap either way.
static_assert(std::endian::native == std::endian::little, "CUDA's wait reads the low half of a 64-bit word");
Status waitForWord(const cuda::Driver* d, cuda::CUstream stream, cuda::CUdeviceptr word, uint64_t value,
                   const char* what) {
  if (d->streamWaitValue64 != nullptr) {
    return cuda::check(d->streamWaitValue64(stream, word, value, cuda::kStreamWaitValueGeq), what);
  }
  return cuda::check(d->streamWaitValue32(stream, word, static_cast<uint32_t>(value), cuda::kStreamWaitValueGeq), what);
}

// The destructor of a captured op's user object: the graph is gone.
void dropCaptured(void* data) { delete static_cast<std::shared_ptr<CapturedOp>*>(data); }

void openGate(void* data) {
  auto* ref = static_cast<std::shared_ptr<ReadyGate>*>(data);
  (*ref)->open();
  delete ref;
}

// A staging block on its way back to the pool: the last of the op's streams to run its host function returns it.
struct BlockReturn {
  std::shared_ptr<StagingPool> pool;
  StagingBlock block;
  std::atomic<int> pending;
};

void returnBlock(void* data) {
  auto* r = static_cast<BlockReturn*>(data);
  if (r->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  r->pool->settle(r->block);
  delete r;
}

constexpr size_t kMinBlock = 64 * 1024;

}  // namespace

Result<std::vector<StreamCopies>> planStreamCopies(const std::vector<StagedRange>& ranges,
                                                   const std::vector<std::vector<size_t>>& streamsOf,
                                                   size_t nStreams) {
  if (streamsOf.size() != ranges.size()) {
    return Status::error(Errc::InternalError, strprintf("%zu staged ranges but stream lists for %zu", ranges.size(),
                                                        streamsOf.size()));
  }
  std::vector<StreamCopies> copies(nStreams);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::vector<size_t>& on = streamsOf[i];
    if (on.empty()) return Status::error(Errc::InternalError, strprintf("staged range %zu names no stream", i));
    for (size_t k : on) {
      if (k >= nStreams) {
        return Status::error(Errc::InternalError,
                             strprintf("staged range %zu names stream %zu of %zu", i, k, nStreams));
      }
    }
    if (ranges[i].copyIn) copies[on.front()].in.push_back(ranges[i]);
    if (ranges[i].copyOut) {
      for (size_t k : on) copies[k].out.push_back(ranges[i]);
    }
  }
  return copies;
}

void ReadyGate::open() {
  bool opened = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    opened = --pending_ == 0;
    if (opened) cv_.notify_all();
  }
  if (opened && notify_) notify_();
}

void ReadyGate::fail(Status st) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::move(st);
    pending_ = 0;
    cv_.notify_all();
  }
  if (notify_) notify_();
}

bool ReadyGate::isOpen() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_ <= 0;
}

Status ReadyGate::wait(const std::atomic<bool>& abort, const std::function<void(long long seconds)>& stillWaiting) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto start = std::chrono::steady_clock::now();
  auto nextReport = start + std::chrono::seconds(10);
  // The host function wakes us; the timed wait only notices an abort, which nobody signals on this condition.
  while (pending_ > 0) {
    if (abort.load(std::memory_order_acquire)) {
      return Status::error(Errc::RemoteError, "aborted while waiting for the stream to reach the operation");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (stillWaiting && pending_ > 0 && std::chrono::steady_clock::now() >= nextReport) {
      nextReport += std::chrono::seconds(10);
      const long long seconds =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
      lock.unlock();  // the report logs; the host function may open the gate meanwhile
      stillWaiting(seconds);
      lock.lock();
    }
  }
  return failure_;
}

CapturedOp::~CapturedOp() {
  if (registry_) {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    std::erase(registry_->live, this);
  }
  if (block_.p != nullptr) {
    // After the communicator is gone the block stays allocated: freeing it is a CUDA call, not allowed here.
    pool_->settle(block_);
  }
  for (uint64_t* w : words_) releaseFlagSlot(w);
}

void CapturedOp::release() {
  for (uint64_t* w : words_) setWord(w, 1);
}

void CapturedOp::arrive(void* data) {
  const auto* a = static_cast<const Arrival*>(data);
  CapturedOp* op = a->op;
  // Re-armed before the launch below: the run may end (and set the words) before this function returns.
  setWord(op->words_[a->stream], 0);
  if (op->pending_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  op->pending_.store(op->streams_, std::memory_order_relaxed);  // the next replay starts after this run ends
  if (!op->launch_(op)) op->release();
}

DeviceState::~DeviceState() {
  releaseAll();
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) return;
  {
    cuda::ScopedContext scope(boundCtx_);
    std::lock_guard<std::mutex> lock(pool_->mutex);
    pool_->closed = true;
    for (auto& [bytes, p] : pool_->free) d->memFreeHost(p);
    pool_->free.clear();
    // A stream block still in use (its stream has yet to copy out of it) stays allocated, like `retired`.
    for (auto& [stream, shared] : pool_->byStream) {
      if (shared.users == 0) d->memFreeHost(shared.p);
    }
    pool_->byStream.clear();
  }
  if (lastDirect_ != nullptr) {
    cuda::ScopedContext direct(lastDirectCtx_);
    d->eventDestroy(lastDirect_);
  }
  cuda::ScopedContext scope(copyCtx_);
  if (copyDone_ != nullptr) d->eventDestroy(copyDone_);
  if (copyStream_ != nullptr) d->streamDestroy(copyStream_);
  for (void* p : retiredStaging_) d->memFreeHost(p);
  if (staging_ != nullptr) d->memFreeHost(staging_);
}

Status DeviceState::reserveStaging(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes <= stagingBytes_) return Status();
  const size_t size = std::max(bytes, 2 * stagingBytes_);
  void* p = nullptr;
  // Portable: the progress thread copies in whatever context the op's buffers belong to.
  CFX_TRY(cuda::check(cuda::driver()->memHostAlloc(&p, size, cuda::kHostAllocPortable),
                      strprintf("cuMemHostAlloc (%zu bytes of staging)", size).c_str()));
  if (staging_ != nullptr) retiredStaging_.push_back(staging_);
  staging_ = p;
  stagingBytes_ = size;
  return Status();
}

size_t StagingPool::blockSize(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  size_t pow = kMinBlock;
  while (pow <= bytes / 2) pow *= 2;
  const size_t step = pow / 4;
  return (bytes + step - 1) / step * step;
}

Result<StagingBlock> StagingPool::take(size_t bytes, cuda::CUstream stream, const Allocate& allocate) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stream != nullptr) {
      auto it = byStream.find(stream);
      if (it != byStream.end() && it->second.bytes >= bytes) {
        ++it->second.users;
        return StagingBlock{it->second.p, it->second.bytes, stream};
      }
    }
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->first >= bytes && (best == free.end() || it->first < best->first)) best = it;
    }
    if (best != free.end()) {
      StagingBlock b{best->second, best->first, stream};
      free.erase(best);
      if (stream != nullptr) adoptLocked(stream, b.p, b.bytes);
      return b;
    }
  }
  const size_t size = blockSize(bytes);
  CFX_TRY_ASSIGN(void* p, allocate(size));
  if (stream != nullptr) {
    std::lock_guard<std::mutex> lock(mutex);
    adoptLocked(stream, p, size);
  }
  return StagingBlock{p, size, stream};
}

void StagingPool::settle(const StagingBlock& b) {
  std::lock_guard<std::mutex> lock(mutex);
  settleLocked(b);
}

// A block of a closed pool stays allocated (see StagingPool).
void StagingPool::settleLocked(const StagingBlock& b) {
  if (closed) return;
  if (b.stream == nullptr) {
    free.emplace_back(b.bytes, b.p);
    return;
  }
  auto it = byStream.find(b.stream);
  if (it != byStream.end() && it->second.p == b.p) {
    --it->second.users;
    return;
  }
  for (auto r = retired.begin(); r != retired.end(); ++r) {
    if (r->p != b.p) continue;
    if (--r->users == 0) {
      free.emplace_back(r->bytes, r->p);
      retired.erase(r);
    }
    return;
  }
}

// `stream` gets a new shared block; the one it replaces is free once its last op is over.
void StagingPool::adoptLocked(cuda::CUstream stream, void* p, size_t bytes) {
  auto it = byStream.find(stream);
  if (it != byStream.end()) {
    if (it->second.users == 0) {
      free.emplace_back(it->second.bytes, it->second.p);
    } else {
      retired.push_back(it->second);
    }
  }
  byStream[stream] = Shared{p, bytes, 1};
}

Result<DeviceState::Block> DeviceState::takeBlock(cuda::CUcontext ctx, size_t bytes, cuda::CUstream stream) {
  return pool_->take(bytes, stream, [ctx](size_t size) -> Result<void*> {
    void* p = nullptr;
    cuda::ScopedContext scope(ctx);
    // Portable: the copies run in whatever context the op's buffers belong to.
    CFX_TRY(cuda::check(cuda::driver()->memHostAlloc(&p, size, cuda::kHostAllocPortable),
                        strprintf("cuMemHostAlloc (%zu bytes of staging)", size).c_str()));
    return p;
  });
}

void DeviceState::giveBack(Block block) {
  if (block.p != nullptr) pool_->settle(block);
}

void* DeviceState::stagingBase() {
  std::lock_guard<std::mutex> lock(mutex_);
  return staging_;
}

Status DeviceState::ensureFlag() {
  if (flag_ != nullptr) return Status();
  CFX_TRY_ASSIGN(flag_, allocateFlagSlot());
  setWord(flag_, issued_.load(std::memory_order_relaxed));  // no op has been handed to a stream yet
  return cuda::check(cuda::driver()->memHostGetDevicePointer(&flagDevice_, flag_, 0), "cuMemHostGetDevicePointer");
}

Status DeviceState::enqueueStreamOps(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                                     const std::shared_ptr<ReadyGate>& gate, uint64_t* seqOut,
                                     const std::vector<StreamCopies>* copies, Block block) {
  // A program of one step with no device work: the copies in, the gate, the wait, the copies out.
  std::vector<uint64_t> noStepSeqs;
  return enqueueSteps(ctx, streams, {gate}, {[](cuda::CUstream) { return Status(); }}, seqOut, &noStepSeqs, copies,
                      block);
}

Status DeviceState::enqueueSteps(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                                 const std::vector<std::shared_ptr<ReadyGate>>& gates,
                                 const std::vector<std::function<Status(cuda::CUstream)>>& segments, uint64_t* seqOut,
                                 std::vector<uint64_t>* stepSeqs, const std::vector<StreamCopies>* copies,
                                 Block block) {
  *seqOut = 0;
  stepSeqs->clear();
  auto failFrom = [&gates](size_t first, const Status& st) {
    for (size_t i = first; i < gates.size(); ++i) gates[i]->fail(st);
  };
  if (streams.empty() || gates.empty() || gates.size() != segments.size() ||
      (copies != nullptr && copies->size() != streams.size())) {
    const Status st =
        Status::error(Errc::InternalError, strprintf("rank %d: a device program of %zu gate(s), %zu "
                                                     "segment(s) and %zu stream(s) does not fit",
                                                     rank_, gates.size(), segments.size(), streams.size()));
    failFrom(0, st);
    return st;
  }
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  Status st = [&]() -> Status {
    std::lock_guard<std::mutex> lock(mutex_);
    return ensureFlag();
  }();
  if (!st.ok()) {
    failFrom(0, st);
    return st;
  }
  auto openAfter = [&](cuda::CUstream stream, const std::shared_ptr<ReadyGate>& gate) -> Status {
    auto* ref = new std::shared_ptr<ReadyGate>(gate);
    Status launched = cuda::check(d->launchHostFunc(stream, openGate, ref), "cuLaunchHostFunc");
    if (!launched.ok()) delete ref;
    return launched;
  };
  // One user thread issues on a communicator at a time (NCCL's rule), so this read-increment is not a race.
  const uint64_t first = issued_.load(std::memory_order_relaxed) + 1;
  // A failure from here on leaves the staging block out of the pool: copies already enqueued may still write it.
  const uint64_t last = first + segments.size() - 1;
  for (size_t i = 0; i < streams.size(); ++i) {
    if (copies != nullptr) {
      for (const StagedRange& r : (*copies)[i].in) {
        st = cuda::check(d->memcpyDtoHAsync(r.host, r.device, r.bytes, streams[i]), "cuMemcpyDtoHAsync (staging in)");
        if (!st.ok()) {
          failFrom(0, st);
          return st;
        }
      }
    }
    if (i == 0) st = segments[0](streams[0]);
    if (st.ok()) st = openAfter(streams[i], gates[0]);
    if (!st.ok()) {
      failFrom(0, st);  // streams already holding a host function open an already-failed gate: harmless
      return st;
    }
  }
  // From here the op will write `last`, so the waits may be enqueued; issued_ moves first so releaseAll covers them.
  issued_.store(last, std::memory_order_release);
  *seqOut = last;
  for (size_t i = 1; i < segments.size(); ++i) stepSeqs->push_back(first + i - 1);
  for (size_t i = 1; i < segments.size(); ++i) {
    st = waitForWord(d, streams[0], flagDevice_, first + i - 1, "cuStreamWaitValue");
    if (st.ok()) st = segments[i](streams[0]);
    if (st.ok()) st = openAfter(streams[0], gates[i]);
    if (!st.ok()) {
      failFrom(i, st);
      return st;
    }
  }
  auto* giveBack = copies != nullptr && block.p != nullptr
                       ? new BlockReturn{pool_, block, static_cast<int>(streams.size())}
                       : nullptr;
  for (size_t i = 0; i < streams.size(); ++i) {
    CFX_TRY(waitForWord(d, streams[i], flagDevice_, last, "cuStreamWaitValue"));
    if (copies == nullptr) continue;
    for (const StagedRange& r : (*copies)[i].out) {
      CFX_TRY(cuda::copyHtoDAsync(r.device, r.host, r.bytes, streams[i], "cuMemcpyHtoDAsync (staging out)"));
    }
    if (giveBack != nullptr) {
      CFX_TRY(cuda::check(d->launchHostFunc(streams[i], returnBlock, giveBack), "cuLaunchHostFunc (staging return)"));
    }
  }
  return Status();
}

Status DeviceState::enqueueCaptured(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                                    cuda::CUgraph graph, const std::vector<StreamCopies>* copies, Block block,
                                    CapturedOp::Launch launch) {
  if (copies != nullptr && copies->size() != streams.size()) {
    giveBack(block);
    return Status::error(Errc::InternalError, strprintf("rank %d: %zu stream(s) but staging copies for %zu", rank_,
                                                        streams.size(), copies->size()));
  }
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  auto op = std::make_shared<CapturedOp>();
  op->streams_ = static_cast<int>(streams.size());
  op->pending_.store(op->streams_, std::memory_order_relaxed);
  op->launch_ = std::move(launch);
  op->pool_ = pool_;
  op->block_ = block;
  std::vector<cuda::CUdeviceptr> wordsDevice;
  for (size_t i = 0; i < streams.size(); ++i) {
    CFX_TRY_ASSIGN(uint64_t * w, allocateFlagSlot());
    op->words_.push_back(w);
    op->arrivals_.push_back({op.get(), i});
    cuda::CUdeviceptr dev = 0;
    CFX_TRY(cuda::check(d->memHostGetDevicePointer(&dev, w, 0), "cuMemHostGetDevicePointer"));
    wordsDevice.push_back(dev);
  }
  {
    std::lock_guard<std::mutex> lock(captured_->mutex);
    captured_->live.push_back(op.get());
  }
  op->registry_ = captured_;
  // The graph owns the op from here: its destruction (of the graph and every instance) runs dropCaptured.
  auto* holder = new std::shared_ptr<CapturedOp>(op);
  cuda::CUuserObject object = nullptr;
  Status st = cuda::check(d->userObjectCreate(&object, holder, dropCaptured, 1, cuda::kUserObjectNoDestructorSync),
                          "cuUserObjectCreate (captured op)");
  if (!st.ok()) {
    delete holder;
    return st;
  }
  st = cuda::check(d->graphRetainUserObject(graph, object, 1, cuda::kGraphUserObjectMove), "cuGraphRetainUserObject");
  if (!st.ok()) {
    d->userObjectRelease(object, 1);
    return st;
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    if (copies != nullptr) {
      for (const StagedRange& r : (*copies)[i].in) {
        CFX_TRY(cuda::check(d->memcpyDtoHAsync(r.host, r.device, r.bytes, streams[i]), "cuMemcpyDtoHAsync (captured)"));
      }
    }
    CFX_TRY(cuda::check(d->launchHostFunc(streams[i], CapturedOp::arrive, &op->arrivals_[i]),
                        "cuLaunchHostFunc (captured)"));
    CFX_TRY(waitForWord(d, streams[i], wordsDevice[i], 1, "cuStreamWaitValue (captured)"));
    if (copies == nullptr) continue;
    for (const StagedRange& r : (*copies)[i].out) {
      CFX_TRY(cuda::copyHtoDAsync(r.device, r.host, r.bytes, streams[i], "cuMemcpyHtoDAsync (captured)"));
    }
  }
  return Status();
}

Status DeviceState::orderDirect(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams) {
  if (!anyDirect_) return Status();
  cuda::ScopedContext scope(ctx);
  for (cuda::CUstream s : streams) {
    if (s == lastDirectStream_) continue;
    CFX_TRY(cuda::check(cuda::driver()->streamWaitEvent(s, lastDirect_, 0), "cuStreamWaitEvent (device-direct order)"));
  }
  return Status();
}

Status DeviceState::markDirect(cuda::CUcontext ctx, cuda::CUstream stream) {
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  if (lastDirect_ == nullptr) {
    CFX_TRY(
        cuda::check(d->eventCreate(&lastDirect_, cuda::kEventDisableTiming), "cuEventCreate (device-direct order)"));
    lastDirectCtx_ = ctx;
  }
  CFX_TRY(cuda::check(d->eventRecord(lastDirect_, stream), "cuEventRecord (device-direct order)"));
  lastDirectStream_ = stream;
  anyDirect_ = true;
  return Status();
}

Status DeviceState::enqueueDeviceOnly(cuda::CUcontext ctx, cuda::CUstream stream,
                                      const std::function<Status(cuda::CUstream)>& program) {
  CFX_TRY(orderDirect(ctx, {stream}));
  {
    cuda::ScopedContext scope(ctx);
    CFX_TRY(program(stream));
  }
  return markDirect(ctx, stream);
}

Status DeviceState::bindContext(cuda::CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mutex_);
  return bindContextLocked(ctx);
}

Status DeviceState::bindContextLocked(cuda::CUcontext ctx) {
  if (boundCtx_ == nullptr) boundCtx_ = ctx;
  if (ctx == boundCtx_) return Status();
  return Status::error(Errc::InvalidUsage,
                       strprintf("rank %d: this communicator's device buffers belong to two CUDA contexts (devices); "
                                 "a communicator drives one device, as in NCCL", rank_));
}

Status DeviceState::prepare(cuda::CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mutex_);
  CFX_TRY(bindContextLocked(ctx));
  if (copyStream_ != nullptr) return Status();
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  CFX_TRY(cuda::check(d->streamCreate(&copyStream_, cuda::kStreamNonBlocking), "cuStreamCreate (staging copies)"));
  // Blocking sync: the progress thread sleeps through a copy instead of spinning a core on it.
  CFX_TRY(cuda::check(d->eventCreate(&copyDone_, cuda::kEventBlockingSync | cuda::kEventDisableTiming),
                      "cuEventCreate (staging copies)"));
  copyCtx_ = ctx;
  return Status();
}

Status DeviceState::copy(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges, bool in) {
  bool any = false;
  for (const StagedRange& r : ranges) any = any || (in ? r.copyIn : r.copyOut);
  if (!any) return Status();
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  for (const StagedRange& r : ranges) {
    if (in && r.copyIn) {
      CFX_TRY(cuda::check(d->memcpyDtoHAsync(r.host, r.device, r.bytes, copyStream_), "cuMemcpyDtoHAsync (staging in)"));
    } else if (!in && r.copyOut) {
      CFX_TRY(cuda::copyHtoDAsync(r.device, r.host, r.bytes, copyStream_, "cuMemcpyHtoDAsync (staging out)"));
    }
  }
  CFX_TRY(cuda::check(d->eventRecord(copyDone_, copyStream_), "cuEventRecord (staging)"));
  return cuda::check(d->eventSynchronize(copyDone_), in ? "staging copy device->host" : "staging copy host->device");
}

Status DeviceState::copyIn(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges) { return copy(ctx, ranges, true); }

Status DeviceState::copyOut(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges) {
  return copy(ctx, ranges, false);
}

void DeviceState::complete(uint64_t seq) {
  // The copies before this store have finished (their event was waited for); the release keeps the store after
  // them on this CPU, and the GPU reads the word over PCIe once it is visible.
  setWord(flag_, seq);
}

void DeviceState::releaseAll() {
  {
    std::lock_guard<std::mutex> lock(captured_->mutex);
    for (CapturedOp* op : captured_->live) op->release();
  }
  if (flag_ == nullptr) return;
  setWord(flag_, issued_.load(std::memory_order_acquire));
}

}  // namespace cfx::core
