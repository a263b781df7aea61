// SPDX-License-Identifier: Apache-2.0
// Device buffers on a cudaStream_t (core layer): NCCL's stream semantics over the host algorithms.
//
// An op on device memory returns as soon as it is enqueued. Everything it does to the user's stream is enqueued at
// call time, on that stream:
//   1. copies of the op's device inputs into a pinned host staging block (cuMemcpyDtoHAsync);
//   2. a host function (cuLaunchHostFunc) that opens a gate once the stream got there, i.e. once every kernel and
//      copy enqueued before it, the copies in included, has finished. It only sets a flag and wakes a waiter: it
//      never blocks the driver's callback thread and never calls CUDA;
//   3. a stream wait (cuStreamWaitValue32) on a word of pinned host memory: the stream (not a kernel) stalls until
//      the communicator's progress thread writes the op's sequence number there;
//   4. copies of the outputs from staging back to the device, and a host function that returns the staging block.
// In between, the progress thread runs the same host algorithm as for host buffers on the staged bytes (so every
// transport, every collective and bit-identical results come for free) and writes the sequence number. It never
// touches the GPU itself. That matters: CUDA does not see the order the flag creates, and work of another stream
// that the flag waited for could sit behind the stalled stream in one of the device's few hardware queues (streams
// share them once a process has more than CUDA_DEVICE_MAX_CONNECTIONS, as PyTorch's stream pools do) and never
// run. All copies ride the user's own stream instead, ordered by CUDA. No kernel ever waits for another process's
// kernel, so any number of ranks may share one GPU, in one process or in many.
// (CFX_CUDA_STAGE_ON_STREAM=0 keeps the earlier design, where the progress thread copied on its own stream, for
// comparison on a GPU machine.)
//
// Cost per op: two PCIe copies of the op's bytes (about 25 GB/s each way on PCIe 5) plus ~100 us of stream
// signalling, on top of the host algorithm. The device-direct path (core/device_direct.h) replaces the staging for
// peers on one host; the stream protocol above stays.
//
// CUDA graphs: an op called while its stream is being captured puts the same steps into the graph, and each replay
// of the graph runs it again (CapturedOp below). A sequence number cannot be baked into a graph that replays, so a
// captured op waits on words of its own: its host node re-arms them (0) when the stream gets there and queues the
// op on the progress thread (Communicator::enqueueReplay); the op's end sets them to 1. The staging block and the
// words belong to the graph (a CUDA user object) and go back when the graph is destroyed.
//
// Sequence numbers are 64 bits and never wrap; CUDA's stream wait reads their low 32 bits, HIP's all 64 (see
// waitForWord). They start just below 2^32, as the Linux kernel starts its tick counter just before a wrap: every
// communicator's third device op crosses the 32-bit boundary, so the code that must survive it runs in nearly
// every test instead of first meeting it weeks into a job.
//
// Failure: a failed or aborted op still writes its sequence number (the stream must never stall forever on a
// dead peer); the error is the communicator's async error, as with NCCL's ncclCommGetAsyncError, and a WARN (the
// text of ncclGetLastError) names the peer and the op. Its outputs are undefined then, as in NCCL: the copies out
// run whatever the staging holds. The device tests' fault scenarios (a peer killed mid-op, staged and over CUDA
// IPC; a peer that never calls; abort while the op runs and before the stream reached it) check all of this.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"

namespace cfx::core {

// The first device op's sequence number (see "Sequence numbers" above).
constexpr uint64_t kFirstSeq = (uint64_t{1} << 32) - 2;

// One device range of an op, mirrored in pinned host memory for the op's duration.
struct StagedRange {
  cuda::CUdeviceptr device = 0;
  void* host = nullptr;
  size_t bytes = 0;
  bool copyIn = false;   // device -> host before the op runs (the op reads it)
  bool copyOut = false;  // host -> device after the op ran (the op wrote it)
};

// Opened by the stream's host functions once the stream has reached the op.
class ReadyGate {
 public:
  explicit ReadyGate(int streams) : pending_(streams) {}
  void open();                      // from the CUDA callback thread; never blocks for long
  void fail(Status st);             // the stream operations could not be enqueued
  bool isOpen();                    // every stream reached the op (or it failed): wait() would return at once
  // Called (outside the gate's lock) once the gate opens or fails: wakes whoever polls isOpen().
  void onOpen(std::function<void()> notify) { notify_ = std::move(notify); }
  // Waits until every stream reached the op, or `abort` is set. Blocks (no spinning), with no deadline: streams
  // may stay busy for as long as the user's kernels run. The progress loop starts a job only once its gate is open
  // (isOpen) or the communicator aborted, and logs a long wait itself, so there this returns at once. A device-direct
  // program's later steps wait here while the stream runs a segment: `stillWaiting`, when given, is called every 10 s
  // of waiting with the seconds so far, so a hang on a GPU says which step's segment never finished.
  Status wait(const std::atomic<bool>& abort, const std::function<void(long long seconds)>& stillWaiting = {});

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int pending_;
  Status failure_;
  std::function<void()> notify_;
};

// One op's pinned staging (on-stream staging); `stream` is set when it is that stream's shared block.
struct StagingBlock {
  void* p = nullptr;
  size_t bytes = 0;
  cuda::CUstream stream = nullptr;
};

// Pinned staging blocks of one communicator, reused across ops. Shared with the host functions that give blocks
// back, which may run after the communicator is gone; blocks given back after that are left alone (a host function
// must not call CUDA), as are blocks of ops that failed half-enqueued.
//
// Ops of one stream run their staging copies in stream order: op k+1's copies in start after op k's copies out,
// which wait for op k to be over. So every op on that stream may stage in the same block, however many the user
// enqueues ahead of the GPU (nccl-tests enqueues 25 at a time). That block is the stream's; it is replaced by a
// larger one when an op needs more, and the old one joins `free` once the ops still using it are over. Ops of a
// group on several streams, and captured ops, take a block of their own from `free`.
struct StagingPool {
  struct Shared {
    void* p = nullptr;
    size_t bytes = 0;
    int users = 0;  // ops enqueued on it whose copies out have not run yet
  };
  using Allocate = std::function<Result<void*>(size_t bytes)>;

  // A block of at least `bytes`: with `stream`, that stream's shared block; else one of the op's own. `allocate`
  // (called without the lock) makes a new one of blockSize(bytes) when none fits.
  Result<StagingBlock> take(size_t bytes, cuda::CUstream stream, const Allocate& allocate);
  // One op is done with `b`: its copies out ran, or nothing was enqueued for it. Host functions call this.
  void settle(const StagingBlock& b);
  // The size of a new block: four sizes per power of two from 64 KiB, so blocks are reused across nearby sizes and
  // at most a fifth of one is waste.
  static size_t blockSize(size_t bytes);

  std::mutex mutex;
  std::vector<std::pair<size_t, void*>> free;  // (bytes, block)
  std::unordered_map<cuda::CUstream, Shared> byStream;
  std::vector<Shared> retired;  // replaced stream blocks still in use
  bool closed = false;

 private:
  void settleLocked(const StagingBlock& b);
  void adoptLocked(cuda::CUstream stream, void* p, size_t bytes);
};

// The copies one staged op puts on one of its streams, before its gate and after its flag wait.
struct StreamCopies {
  std::vector<StagedRange> in;
  std::vector<StagedRange> out;
};

// Where one op's staging copies go: range i is copied in on the first stream of `streamsOf[i]` (the streams, as
// indices, whose ops name it) and out on every one of them. One entry per stream, empty ones included (an op of
// zero elements stages nothing but still waits on its streams). InternalError when the lists do not fit together.
Result<std::vector<StreamCopies>> planStreamCopies(const std::vector<StagedRange>& ranges,
                                                   const std::vector<std::vector<size_t>>& streamsOf,
                                                   size_t nStreams);

struct CapturedRegistry;

// One op captured into a CUDA graph, alive while the graph lives (the graph holds it as a CUDA user object).
class CapturedOp {
 public:
  // Queues one run of `op`, whose end must call op->release(); false when nothing was queued (the communicator
  // is gone, stopping or aborted).
  using Launch = std::function<bool(CapturedOp* op)>;
  ~CapturedOp();  // may run on a CUDA thread: gives the staging and the words back without calling CUDA
  // Lets every stream of the op go on (the op's run is over, or will never come).
  void release();

 private:
  friend class DeviceState;
  struct Arrival {
    CapturedOp* op;
    size_t stream;
  };
  static void arrive(void* arrival);  // the host node of one stream: re-arm its word; the last one launches

  std::vector<uint64_t*> words_;  // one per stream: 0 while its run is pending, 1 once it is over
  std::vector<Arrival> arrivals_;
  std::atomic<int> pending_{0};
  int streams_ = 0;
  Launch launch_;
  std::shared_ptr<StagingPool> pool_;
  StagingBlock block_;
  std::shared_ptr<CapturedRegistry> registry_;
};

// The live captured ops of one communicator, so that abort and destroy can release their streams.
struct CapturedRegistry {
  std::mutex mutex;
  std::vector<CapturedOp*> live;
};

// A communicator's device-side state: its stream flag, pinned staging and copy stream.
class DeviceState {
 public:
  explicit DeviceState(int rank) : rank_(rank) {}
  ~DeviceState();  // releases every stream still waiting on this communicator
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  // Progress-thread staging (CFX_CUDA_STAGE_ON_STREAM=0): one pinned block per communicator, shared by all its
  // device jobs, which run one at a time on the progress thread. The user thread grows it (reserveStaging, before
  // enqueueing a job that needs `bytes`); a job takes the current block when it starts (stagingBase). A replaced
  // block is kept until destroy, since the running job may still use it; doubling bounds that waste to the size of
  // the current block.
  Status reserveStaging(size_t bytes);
  void* stagingBase();

  // On-stream staging: a pinned block of at least `bytes` for one op, allocated in `ctx` (bound first, see
  // bindContext). With `stream` (an op whose copies all ride that one stream), the stream's shared block (see
  // StagingPool); else one of its own from the pool or newly allocated. User thread.
  using Block = StagingBlock;
  Result<Block> takeBlock(cuda::CUcontext ctx, size_t bytes, cuda::CUstream stream = nullptr);
  void giveBack(Block block);  // a block no stream operation was enqueued for

  // User thread: the first device op binds the communicator to its buffers' context; a later op with buffers of
  // another context (device) is InvalidUsage, as a communicator drives one device.
  Status bindContext(cuda::CUcontext ctx);

  // User thread, before enqueueStreamOps: creates the copy stream and event in `ctx` on first use. They must be
  // created here: cuStreamCreate takes a context-wide write lock, and the user's thread may later sit in a
  // synchronous CUDA call (a copy to pageable memory) that holds that lock for reading until this op completes.
  Status prepare(cuda::CUcontext ctx);
  // User thread: enqueues the ready host function and the flag wait for one op on each stream, in `ctx`.
  // Sets *seq to the op's sequence number once a stream may wait for it (0 before that): from then on the op must
  // be run and completed even if this returns an error. On an error before that, the gate has been failed.
  // With `copies` (one entry per stream) and `block`, also the op's staging copies on each stream, and the return
  // of `block` to the pool once every stream's copies out have run.
  Status enqueueStreamOps(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                          const std::shared_ptr<ReadyGate>& gate, uint64_t* seq,
                          const std::vector<StreamCopies>* copies = nullptr, Block block = {});
  // User thread: enqueueStreamOps for an op whose device work runs in segments between host steps (a device-direct
  // program, core/device_direct.h). On streams[0]: the copies in, segment 0, a host function opening gates[0]; then
  // for each later segment i a wait for stepSeqs[i - 1], segment i and a host function opening gates[i]; then the
  // wait for the op's last sequence number (*seq) and the copies out. The other streams open gates[0] (which counts
  // every stream) and wait for *seq, so the op starts once all its streams reached it and they all go on after it.
  // The progress thread writes stepSeqs[i] once host step i is done, and *seq at the op's end. When a segment
  // cannot be enqueued, its gate and every later one fail, so the job ends with the error and still writes *seq.
  Status enqueueSteps(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams,
                      const std::vector<std::shared_ptr<ReadyGate>>& gates,
                      const std::vector<std::function<Status(cuda::CUstream)>>& segments, uint64_t* seq,
                      std::vector<uint64_t>* stepSeqs, const std::vector<StreamCopies>* copies = nullptr,
                      Block block = {});
  // User thread: a device program with no host step (device-side barriers only, collectives/device_program.h) on
  // `stream`: after the communicator's previous device-direct op if that ran on another stream (an event; they share
  // the IPC scratch), then `program`. Nothing waits on the progress thread.
  Status enqueueDeviceOnly(cuda::CUcontext ctx, cuda::CUstream stream,
                           const std::function<Status(cuda::CUstream)>& program);
  // User thread, around a device-direct program with host steps on `streams` (enqueueSteps): `streams` wait for
  // the communicator's previous device-direct op where it ran on another stream (before), and the next one waits
  // for this one (after).
  Status orderDirect(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams);
  Status markDirect(cuda::CUcontext ctx, cuda::CUstream stream);
  // User thread, for streams that are being captured into `graph` (all in one capture): the captured form of
  // enqueueStreamOps. The graph takes `block`; `launch` runs on a CUDA thread at every replay and must only queue.
  Status enqueueCaptured(cuda::CUcontext ctx, const std::vector<cuda::CUstream>& streams, cuda::CUgraph graph,
                         const std::vector<StreamCopies>* copies, Block block, CapturedOp::Launch launch);
  // Progress thread: staging copies in `ctx` on this communicator's copy stream, waited for without spinning.
  // Nothing here creates or destroys a CUDA object (see prepare).
  Status copyIn(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges);
  Status copyOut(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges);
  // Progress thread: the op with this sequence number is over; its streams may go on.
  void complete(uint64_t seq);
  // Releases every stream waiting on this communicator (abort, destroy).
  void releaseAll();

 private:
  Status ensureFlag();
  Status bindContextLocked(cuda::CUcontext ctx);
  Status copy(cuda::CUcontext ctx, const std::vector<StagedRange>& ranges, bool in);

  int rank_;
  std::mutex mutex_;
  uint64_t* flag_ = nullptr;  // pinned, mapped; never freed (a stream may still poll it after destroy)
  cuda::CUdeviceptr flagDevice_ = 0;
  std::atomic<uint64_t> issued_{kFirstSeq - 1};  // last sequence number handed to a stream
  cuda::CUcontext copyCtx_ = nullptr;
  cuda::CUstream copyStream_ = nullptr;
  cuda::CUevent copyDone_ = nullptr;
  std::shared_ptr<StagingPool> pool_ = std::make_shared<StagingPool>();
  std::shared_ptr<CapturedRegistry> captured_ = std::make_shared<CapturedRegistry>();
  cuda::CUcontext boundCtx_ = nullptr;  // the one context of this communicator's device buffers (bindContext)
  void* staging_ = nullptr;
  size_t stagingBytes_ = 0;
  std::vector<void*> retiredStaging_;
  // The end of the communicator's last device-direct op, and its stream (orderDirect, markDirect).
  cuda::CUevent lastDirect_ = nullptr;
  cuda::CUcontext lastDirectCtx_ = nullptr;  // the one lastDirect_ was made in
  cuda::CUstream lastDirectStream_ = nullptr;
  bool anyDirect_ = false;
};

}  // namespace cfx::core
