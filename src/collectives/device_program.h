// SPDX-License-Identifier: Apache-2.0
// Device programs (collectives layer): the algorithms that move device buffers GPU to GPU between the ranks of one
// host, through CUDA (HIP) IPC, instead of staging them through host memory for the host algorithms. The planner
// picks them by memory kind and size (chooseDevicePlan); core enqueues their steps on the user's stream and runs
// their host steps on the progress thread (core/device_stream.h), and keeps nothing of them but that glue.
//
// An op is a program: device segments (copies, reduce kernels) and host steps (barriers, tokens) in turn. Segment i
// is enqueued on the op's stream at the call; host step i runs on the progress thread once the stream has run
// segment i, and the stream goes on to segment i + 1 once host step i is done. No kernel waits on another process:
// the barriers run on the host and the copies are plain copy-engine transfers, so ranks may share a GPU. Where they
// do, each host step waits for a switch between the processes' contexts (~0.5 ms with 4 processes on an H100), which
// staging does not pay: ops below CFX_CUDA_IPC_MIN_BYTES (8 MiB there) stage. Captured ops stage.
//
// Two algorithms, each with a form per collective in a file of its own:
//   IpcScratch  (<collective>_ipcscratch.cc): every rank's device scratch is mapped by every rank; the ranks whose
//               data is read copy a window of it into their scratch, a barrier, the receivers copy (or reduce with
//               one kernel over every rank's scratch, in rank order) out of it, a barrier; per window.
//   IpcZeroCopy (<collective>_ipczerocopy.cc): buffers in symmetric windows every rank mapped (ncclMemAlloc memory
//               registered with NCCL_WIN_COLL_SYMMETRIC): ranks read each other's buffers where they lie, in one pass
//               of at most 3 host steps whatever the size.
//   IpcOneShot  (allreduce_ipconeshot.cc): a small all-reduce in one kernel: every rank copies its input into a
//               slot of its scratch, a device-side barrier, and every rank reduces all ranks' slots in rank order.
// Sends and receives have one form (p2p_ipc.cc): slots of the scratch handed over pair by pair with tokens.
//
// Barriers: on the host (a host step: the progress thread runs a 4-byte host all-reduce), or, where the communicator
// has a flag board (transport/cuda_ipc/flag_board.h, CFX_CUDA_IPC_DEVICE_SYNC), on the device: each stream writes its
// arrival into every peer's row of host memory they all map and waits for theirs, with no host thread on the way. A
// program whose barriers are all device-side has no host step at all (hostSteps empty): core enqueues it on the
// stream as it is, and per op the host only enqueues. The scratch forms' first host barrier also agrees that every
// rank took a scratch form; device-side barriers cannot, so there a rank on another form waits at the barrier until
// the watchdog (CFX_TIMEOUT_MS) names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "collectives/planner.h"
#include "common/cuda_driver.h"
#include "common/status.h"

namespace cfx::prims {
class DeviceKernels;
}
namespace cfx::transport::cuda_ipc {
class FlagBoard;
class IpcScratch;
class IpcWindow;
}  // namespace cfx::transport::cuda_ipc

namespace cfx::coll {

// ---- choosing ----------------------------------------------------------------------------------------------------

// What decides whether a collective on this rank runs as a device program. Pure data: core fills it per op.
struct DevicePlanRequest {
  Collective coll = Collective::AllReduce;
  size_t bytes = 0;  // the op's largest buffer, as PlanRequest::bytes
  int nRanks = 1;
  // Every buffer this rank's part of the op uses is device memory (a non-root's unused buffer may be anything).
  bool onDevice = false;
  bool ipc = false;          // every rank maps every rank's device scratch (the same on every rank)
  size_t ipcMinBytes = 0;    // CFX_CUDA_IPC_MIN_BYTES as applied: below it, ops stage
  bool sharedGpu = false;    // two or more ranks run on one GPU (why the default rule is 8 MiB)
  bool kernels = false;      // reduce kernels for the op's datatype are loaded (reducing collectives need them)
  int maxReduceSources = 0;  // how many sources one reduce kernel can take
  // What no device form runs: a codec, a delta broadcast, an ordered combine, a PreMulSum scalar in device memory.
  bool hostOnly = false;
  bool captured = false;  // the op is being captured into a CUDA graph (its steps could not be replayed)
  // CFX_CHECK_CALLS=1: the ranks agree on the call on the host before it runs, which only the staged path does (a
  // one-shot op has no host step to do it in, and mismatched calls there would combine garbage unnoticed).
  bool checkCalls = false;
  bool zeroCopy = false;  // this rank's buffers lie in symmetric windows that give the op a zero-copy form
  bool deviceSync = false;       // the communicator has a flag board: device-side barriers, IpcOneShot
  size_t oneShotMaxBytes = 0;    // IpcOneShot's limit (CFX_CUDA_IPC_ONESHOT_BYTES)
};

struct DevicePlan {
  std::optional<Algorithm> algorithm;  // IpcZeroCopy or IpcScratch; none: the op stages for the host algorithms
  std::string why;                     // the reason, for the INFO/TUNING line
  bool onDevice = false;               // the request's: false means the op is an ordinary host-memory one
};

// The device algorithm for one op, or none (it stages) with the reason. Every rank computes the same answer from the
// same call, except zeroCopy, which is this rank's: ranks that disagree on it fail the op's first host step with a
// named InvalidUsage (the symmetric promise was broken). NCCL_ALGO may exclude IpcZeroCopy or IpcScratch (see
// parseAlgoSpec); a list that names neither leaves both allowed, since they replace staging, not a host algorithm.
DevicePlan chooseDevicePlan(const DevicePlanRequest& req, const PlannerOptions& opts);
// The INFO/TUNING line of a device op: "AllReduce 16777216 B on 4 ranks: IpcScratch (...)" or "...: staged (...)".
std::string describeDevicePlan(const DevicePlanRequest& req, const DevicePlan& plan);
// Whether `algorithm` is a device program with a form for `coll`.
bool hasDeviceAlgorithm(Collective coll, Algorithm algorithm);
// The collectives whose device forms run a reduce kernel.
inline bool reducesOnDevice(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

// Whether a send or receive moves device-direct: a device buffer, to another rank, of at least ipcMinBytes and more
// than zero bytes (a zero-byte buffer may be NULL on one side). Both sides of a message decide alike from its byte
// count; a peer that passes host memory fails the message with a named mismatch.
struct DeviceP2pRequest {
  bool ipc = false;
  size_t ipcMinBytes = 0;
  size_t bytes = 0;
  bool onDevice = false;  // this side's buffer (self: both)
  bool toSelf = false;    // a send to self with its matching receive: one device copy
  bool captured = false;
};
bool deviceP2pApplies(const DeviceP2pRequest& req);

// ---- running -----------------------------------------------------------------------------------------------------

// Device work and host steps in turn (see the top of this file); as many host steps as segments.
struct DeviceProgram {
  std::vector<std::function<Status(cuda::CUstream)>> segments;
  std::vector<std::function<Status()>> hostSteps;
};

// A small host message of a program's host step (the p2p tokens).
struct HostMessage {
  bool send = false;
  int peer = -1;
  void* buffer = nullptr;  // sent from, or received into; lives as long as the program
  size_t bytes = 0;
};

// What the host steps do, given by core; all run on the progress thread.
struct DeviceHost {
  std::function<Status()> barrier;                                 // among the communicator's ranks
  std::function<Status(uint64_t)> agree;                           // a barrier that fails unless every rank passed
                                                                   // the same value (InvalidUsage, on every rank)
  std::function<Status(const std::vector<HostMessage>&)> exchange;  // one group of small sends and receives
};

// A symmetric window holding a buffer on this rank, and the buffer's offset in it.
struct WindowSpan {
  const transport::cuda_ipc::IpcWindow* window = nullptr;
  size_t offset = 0;
};

// What device programs need of the communicator.
struct DeviceComm {
  int rank = 0;
  int nRanks = 1;
  const transport::cuda_ipc::IpcScratch* scratch = nullptr;  // every rank's, mapped here
  // The first registered zero-copy window holding all of [p, p + bytes) on this rank (window null: none).
  std::function<WindowSpan(const void* p, size_t bytes)> findWindow;
  const prims::DeviceKernels* kernels = nullptr;  // loaded in the ops' context; needed by reducing collectives
  DeviceHost host;
  // Device-side barriers (null: host barriers). Its barrier numbers are handed out as programs are built, in call
  // order, so every rank numbers the same barriers alike.
  transport::cuda_ipc::FlagBoard* board = nullptr;
  size_t oneShotBytes = 0;          // with a board: IpcOneShot's slot, two of which end every rank's scratch
  uint64_t* oneShotCount = nullptr;  // IpcOneShot ops built so far on the communicator (their slot's parity)
  bool deviceOnly = false;           // a program with device-side barriers only may have no host step (one stream)
};

// Appends to a program: device work gathers into the current segment until a host step ends it.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(DeviceProgram* program) : program_(program) {}
  void copy(cuda::CUdeviceptr dst, cuda::CUdeviceptr src, size_t bytes);
  void work(std::function<Status(cuda::CUstream)> w) { work_.push_back(std::move(w)); }
  void host(std::function<Status()> step);
  // A device-side barrier among the ranks, appended to the current segment (see the top of this file).
  void deviceBarrier(transport::cuda_ipc::FlagBoard* board);
  // Ends a program whose last device work is not followed by a host step: one more segment, no host step.
  void finish();
  bool pending() const { return !work_.empty(); }
  // A reduce kernel: dst = srcs[0] (+) ... (+) srcs[n-1], count elements, in source order; nothing when count is 0.
  void reduce(const prims::DeviceKernels* kernels, const ReduceOp& op, cuda::CUdeviceptr dst,
              const std::vector<cuda::CUdeviceptr>& srcs, size_t count);

 private:
  DeviceProgram* program_;
  std::vector<std::function<Status(cuda::CUstream)>> work_;
};

// One collective of a program: its arguments, this rank's place, and the barrier its steps end with (the scratch
// forms' first one also agrees that every rank took a scratch form).
struct DeviceOp {
  const DeviceComm& comm;
  const CollArgs& a;
  std::function<Status()> barrier;
  size_t es;  // element size
  size_t n;   // ranks
  size_t me;  // this rank

  cuda::CUdeviceptr send(size_t byteOffset) const {
    return reinterpret_cast<cuda::CUdeviceptr>(a.sendbuff) + byteOffset;
  }
  cuda::CUdeviceptr recv(size_t byteOffset) const {
    return reinterpret_cast<cuda::CUdeviceptr>(a.recvbuff) + byteOffset;
  }
  // Rank r's scratch block as mapped here.
  cuda::CUdeviceptr block(size_t rank, size_t byteOffset = 0) const;
  // The scratch the windowed forms use: all of it, less IpcOneShot's slots where there are some.
  size_t scratchBytes() const;
  // A barrier among the ranks: device-side where the communicator has a flag board, else a host step.
  void sync(ProgramBuilder& b) const;
  bool isRoot() const { return static_cast<int>(me) == a.root; }
};

// A zero-copy op's buffers as this rank addresses them: every rank's send buffer (all-gather in place: its block of
// the output) and, for all-reduce, every rank's receive buffer, through the windows they lie in. `fingerprint` names
// the windows and offsets (not addresses, which differ between processes): the op's first host step checks that
// every rank computed the same one.
struct ZeroCopySpans {
  std::vector<cuda::CUdeviceptr> send;
  std::vector<cuda::CUdeviceptr> recv;
  uint64_t fingerprint = 0;
};
// The spans of an op of this rank whose buffers lie in symmetric windows with room for them on every rank, for the
// collectives with a zero-copy form; nullopt otherwise.
std::optional<ZeroCopySpans> zeroCopySpans(const DeviceComm& comm, const CollArgs& a);

// The forms. Each appends the op's steps; the caller ends nothing (each form's last step is a barrier).
void allReduceIpcScratch(const DeviceOp& d, ProgramBuilder& b);      // AllReduce and Reduce (root)
void reduceScatterIpcScratch(const DeviceOp& d, ProgramBuilder& b);  // ReduceScatter
void allGatherIpcScratch(const DeviceOp& d, ProgramBuilder& b);      // AllGather, Gather, Broadcast
void alltoAllIpcScratch(const DeviceOp& d, ProgramBuilder& b);       // AlltoAll, Scatter
void allReduceIpcOneShot(const DeviceOp& d, ProgramBuilder& b);      // AllReduce of at most oneShotBytes
void allReduceIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b);
void reduceScatterIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b);
void allGatherIpcZeroCopy(const DeviceOp& d, const ZeroCopySpans& z, ProgramBuilder& b);  // AllGather, AlltoAll

// One send or receive of a device buffer (peer == rank: a message to self, paired with its receive in call order).
struct DeviceMessage {
  bool send = false;
  int peer = -1;
  cuda::CUdeviceptr buffer = 0;
  size_t bytes = 0;
};
void p2pIpc(const DeviceComm& comm, const std::vector<DeviceMessage>& messages, ProgramBuilder& b);

// A collective of a program with the device algorithm its plan chose.
struct DeviceStep {
  CollArgs args;
  Algorithm algorithm = Algorithm::IpcScratch;
};

// The program of one group's device-direct part: its sends and receives first, then its collectives one after
// another, each by its algorithm. Starts with an empty host step: the stream has reached the op, but its device work
// waits for the progress thread, which starts the op only after the communicator's earlier ones (the scratch is one
// per communicator, and an earlier op's last segment on another stream may still read it). InvalidUsage for a step
// whose algorithm has no form for its collective, or a reducing step without kernels.
Result<DeviceProgram> buildDeviceProgram(const DeviceComm& comm, const std::vector<DeviceStep>& colls,
                                         const std::vector<DeviceMessage>& p2p);

}  // namespace cfx::coll
