// SPDX-License-Identifier: Apache-2.0
// Groups and launch (core layer): NCCL's ncclGroupStart/End semantics over host memory.
//
// Outside a group an op is a group of one. Inside, ops are recorded per thread and launched together at the
// outermost ncclGroupEnd: the collectives of each communicator run in call order on one Work, and its
// point-to-point messages run concurrently beside them on their own channel, one Work per (peer, direction).
// A group that touches one communicator runs on the calling thread; a group over several communicators
// (one thread driving several ranks) runs each on its communicator's progress thread, so ranks that wait
// for each other never share a thread.
//
// Streams: a NULL stream (or any stream that is not a cfx host stream: host memory needs no device
// ordering) means the group has completed when ncclGroupEnd returns. A cfx host stream makes the launch
// asynchronous: the work is queued behind everything earlier on that stream. A group that touches device
// memory is ordered on its CUDA streams instead and returns once enqueued (core/device_stream.h).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/collective.h"
#include "common/status.h"
#include "core/communicator.h"

namespace cfx::core {

struct Op {
  enum class Kind { Coll, Send, Recv };
  Kind kind = Kind::Coll;
  Communicator* comm = nullptr;
  coll::CollArgs args;        // Kind::Coll
  const void* sendbuff = nullptr;  // Kind::Send
  void* recvbuff = nullptr;        // Kind::Recv
  size_t bytes = 0;
  int peer = -1;
  void* stream = nullptr;
  // A PreMulSum scalar in device memory (ncclScalarDevice): read in stream order when the op runs, then written
  // into args.op.
  const void* deviceScalar = nullptr;
  // Kind::Coll: its sequence number when taken at launch (on a communicator with host lanes: group.cc,
  // hostCallSeq); 0: taken when built.
  uint32_t seq = 0;
};

// A cfx host stream: an ordering of asynchronous host work across communicators.
class HostStream {
 public:
  // The jobs launched last on this stream; the next launch depends on all of them.
  std::vector<std::shared_ptr<JobState>> tail();
  void setTail(std::vector<std::shared_ptr<JobState>> jobs);
  // InProgress while work is pending, Ok when idle, or the first error of the last launch.
  Status query();
  Status synchronize();

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<JobState>> tail_;
};
HostStream* createHostStream();
Status destroyHostStream(HostStream* stream);
HostStream* findHostStream(const void* stream);  // null unless `stream` is a live cfx host stream

int groupDepth();
void groupStart();
// Launches everything recorded since the outermost groupStart (or fails with InvalidUsage when not in one).
Status groupEnd();
// Ends the group without launching and estimates the time it would take, in microseconds.
Status groupSimulateEnd(float* estimatedTimeUs);
// Records (inside a group) or launches (outside) one op. The op must already be validated.
Status submit(const Op& op);
// Records or runs a collective setup call (communicator creation, window registration); inside a group they run
// at groupEnd, concurrently, except that those with the same non-null `key` (a communicator) run in call order.
struct DeferredSetup {
  const void* key = nullptr;
  std::function<Status()> run;
};
Status submitInit(std::function<Status()> init, const void* key = nullptr);
// Remembers a validation failure inside a group: ncclGroupEnd then launches none of the group's operations and
// reports it, as NCCL does.
void noteGroupError(const Status& st);

}  // namespace cfx::core
