// SPDX-License-Identifier: Apache-2.0
// ProcessGroupConflux: the torch.distributed backend "conflux" on host memory (CPU tensors).
//
// Every operation is enqueued on a cfx host stream of its own (conflux.h) and returns at once with a Work; the
// communicator's progress threads run the operations, collectives side by side on its host lanes where it has them
// (CFX_HOST_LANES: across a long round trip), so they may end out of call order. Whoever first learns that an operation is over
// completes its Work: a thread in Work::wait() (synchronizing its stream), a poll (isCompleted), or, for a Work whose
// future was asked for, the group's completer thread, which follows those in call order so that futures complete
// even when nobody waits (DDP waits on futures). Completing runs the operation's copy-out step (list outputs are
// staged through one flat buffer), marks the future and wakes waiters. A blocking call (wait() right after the call)
// thus costs the progress thread's hand-off and nothing else.
//
// Deadlines: a dead or hung peer fails every survivor's operation with ncclRemoteError within the library's failure
// deadlines (CFX_HEARTBEAT_*), whatever PyTorch's timeout. PyTorch's timeout (init_process_group's, or an
// operation's own) bounds each operation from the call: a watchdog revokes the communicator when one runs past it,
// which fails it, and every later one, on every rank. Destroying the group never waits for peers: with operations
// still pending it aborts the communicator.
//
// Thread safety: operations may be called from any thread; calls are serialised (a communicator takes one caller at
// a time). Work objects may be waited on from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "cfx_api.h"

namespace cfx::torchext {

class ConfluxWork;

// Completes, in call order and on a thread of its own, the Works whose future was asked for: nobody may ever call
// their wait(). Shared by a group and its Works, which may outlive it; once stopped, add() completes on the caller.
class Completer {
 public:
  Completer();
  ~Completer();
  void add(c10::intrusive_ptr<ConfluxWork> work);
  void stop();  // completes what was added (bounded: the group aborts first), then joins the thread

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<ConfluxWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class ConfluxWork : public c10d::Work {
 public:
  // Runs after the operation succeeded, on whichever thread completes the Work: copies staged results out.
  using Finish = std::function<void()>;

  ConfluxWork(int rank, c10d::OpType opType, const char* name, cfxHostStream_t stream,
              std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive, Finish finish,
              std::chrono::steady_clock::time_point deadline, std::shared_ptr<Completer> completer);
  ~ConfluxWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  // timeout == 0 (kNoTimeout): until the operation is over. Otherwise false when it is still running at the timeout.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits for the stream and completes the Work (once; later calls return at once).
  void completeFromStream();
  // True once completed, or once the stream says the operation is over (then completes it); never blocks.
  bool poll();
  // The same without completing (which runs copy-outs and future callbacks): safe under the group's locks.
  bool over();
  // Marks the error that ended the group's operations (a timeout), used in place of the stream's own message.
  void setCause(std::string cause);

  const char* name() const { return name_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  void complete(ncclResult_t rc);

  const char* name_;
  cfxHostStream_t stream_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;  // inputs and staging buffers the operation reads or writes
  Finish finish_;
  std::chrono::steady_clock::time_point deadline_;
  std::string cause_;  // guarded by mutex_ (Work's)
  std::mutex completeMutex_;  // one completer at a time; never held while mutex_ is wanted by a waiter's cv
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<Completer> completer_;
  std::atomic<bool> futureAsked_{false};
};

class ProcessGroupConflux : public c10d::ProcessGroup {
 public:
  struct Options : c10d::ProcessGroup::Options {
    explicit Options(std::chrono::milliseconds timeout = kProcessGroupDefaultTimeout, std::string codec = "",
                     std::string codecMode = "auto")
        : c10d::ProcessGroup::Options("conflux", timeout), codec(std::move(codec)), codecMode(std::move(codecMode)) {}
    // The group's default codec (cfxCommSetCodec) as cfxCodecParse reads it ("bf16", "int8", "topk:0.01", ...):
    // all_reduce, reduce_scatter, all_gather and broadcast of float32, bfloat16 and float16 tensors (sum, avg)
    // carry it. "" keeps the library's default (CFX_CODEC).
    std::string codec;
    // Where it applies (cfxCompressMode): "auto" where the planner prices it cheaper (slow links between hosts),
    // "always" on every link, "never".
    std::string codecMode;
  };

  // Rank 0 makes the unique id and puts it in `store`; the others take it from there, waiting up to the timeout.
  // libraryPath: the Conflux library the `conflux` package located (it is loaded once per process).
  ProcessGroupConflux(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      c10::intrusive_ptr<Options> options, const std::string& libraryPath);
  // Adopts a communicator made by split() (public for make_intrusive; the tag keeps it internal).
  struct AdoptTag {};
  ProcessGroupConflux(AdoptTag, ncclComm_t comm, int rank, int size, c10::intrusive_ptr<Options> options);
  ~ProcessGroupConflux() override;

  const std::string getBackendName() const override { return "conflux"; }

  // Collective over every rank of this group: the ranks in `ranks` (in that order) form a new group by
  // ncclCommSplit; every other rank calls splitNoColor(). Outstanding operations finish first.
  c10::intrusive_ptr<ProcessGroupConflux> split(const std::vector<int64_t>& ranks, c10::intrusive_ptr<Options> options);
  void splitNoColor();
  // Aborts the communicator: outstanding operations fail at once, later ones are refused. Never blocks on peers.
  void abort();
  std::chrono::milliseconds timeout() const { return options_->timeout; }
  // cfxCommGetCompressStats of the last operation that carried a codec. Outstanding operations finish first.
  cfxCompressStats compressStats();

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Applies options_->codec, then starts the threads: what every constructor does once comm_ exists.
  void start();

  // What one operation hands to enqueue(): the C calls to make on the stream (inside one group when several), the
  // Work's outputs, the tensors to keep alive, and the copy-out step.
  struct Launch {
    c10d::OpType type;
    const char* name;
    std::function<void(ncclComm_t, cudaStream_t)> calls;  // throws (check()) when a call is refused
    std::vector<at::Tensor> outputs;
    std::vector<at::Tensor> keepAlive;
    ConfluxWork::Finish finish;
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
  };
  c10::intrusive_ptr<c10d::Work> enqueue(Launch launch);
  // Waits for every operation enqueued so far (errors stay with their Works).
  void drain();
  // Drops the Works at the front of pending_ that are over (whoever waits on them completes them). Caller holds
  // pendingMutex_.
  void reapLocked();
  void watchdogLoop();
  ncclComm_t liveComm();  // the communicator, or throws when it was aborted or revoked

  std::mutex callMutex_;  // serialises callers: enqueue, split, abort
  ncclComm_t comm_ = nullptr;
  std::string brokenBy_;  // why comm_ is unusable (a timeout); guarded by callMutex_
  c10::intrusive_ptr<Options> options_;

  std::shared_ptr<Completer> completer_;
  std::mutex pendingMutex_;
  std::condition_variable watchdogCv_;  // stopping_ (the watchdog otherwise wakes on its own schedule)
  // Enqueued and maybe not over yet, in call order (for drain, the watchdog and shutdown); reaped at each enqueue.
  std::deque<c10::intrusive_ptr<ConfluxWork>> pending_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace cfx::torchext
