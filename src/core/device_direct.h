// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer): the ranks of one host move device buffers through each other's CUDA IPC
// scratch (transport/cuda_ipc) with copy engines, instead of staging through host memory.
//
// Every collective has its form here (device_direct.cc gives each its steps and cost): the ranks whose data is read
// copy a window of it into their scratch; a host barrier; the ranks that receive copy (or, for the reductions,
// reduce with one kernel over every rank's scratch, in rank order) from the scratch blocks into their outputs; a
// host barrier, after which the scratch may be refilled. All-reduce and reduce add a third step: each rank reduces
// a 1/n slice, so the reduction is spread over the ranks' GPUs, and every rank (reduce: the root) copies the slices
// out. Sends and receives split each rank's scratch into one slot per peer and hand slots over with small tokens on
// the host transport, pair by pair, so ranks outside a pair never wait for it; in a group they go first, and the
// group's other ops then stage as before.
//
// An op is a program: device segments (copies, kernels) and host steps (barriers, tokens) in turn. Every segment is
// enqueued on the op's own stream at the call, each followed by a host function that opens the next step's gate and
// a wait on the communicator's flag (device_stream.h); the progress thread runs a host step once its gate opened
// and then writes the flag that lets the stream go on to the next segment. So all of the op's device work rides the
// user's stream, ordered by CUDA: the library's own stream, stalled behind a user stream that waits for it in one of
// the device's shared hardware queues, is what hung PyTorch when staging worked that way. No kernel waits on
// another process: the barriers run on the host, and copies are plain copy-engine transfers, so ranks may share a
// GPU. Per window: 2 host steps (3 for all-reduce and reduce), each a 4-byte host all-reduce (~10-50 us on shared
// memory) plus a host function and a flag wait on the stream, and copies at device-memory or NVLink speed. Where
// ranks share a GPU each step waits for a switch between the processes' contexts (~0.5 ms with 4 processes on an
// H100, measured with the earlier progress-thread copies), which staging through host memory does not pay: ops
// smaller than CFX_CUDA_IPC_MIN_BYTES (8 MiB there) stage instead. Ops captured into a CUDA graph stage.
//
// Zero-copy: all-reduce, all-gather, reduce-scatter and all-to-all whose buffers lie in a symmetric window that
// every rank mapped (ncclMemAlloc memory registered with ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC;
// transport/cuda_ipc/ipc_window.h) skip the scratch: ranks read each other's buffers where they lie, in one pass
// of at most 3 host steps whatever the size, instead of copying every window into the scratch first.
//
#pragma once

#include <functional>
#include <vector>

#include "common/cuda_driver.h"
#include "core/communicator.h"
#include "core/group.h"

namespace cfx::core {

// Whether this group (one communicator's ops) runs device-direct: every op of it has the path. Its ops then run
// one after another, in call order.
bool deviceDirectApplies(Communicator* comm, const std::vector<const Op*>& ops);
// Whether a point-to-point op of a group moves device-direct: a send or receive of a device buffer, to another rank,
// of at least CFX_CUDA_IPC_MIN_BYTES and more than zero bytes. Both sides of a message decide alike from its byte
// count; a peer that passes host memory instead fails the message with a named mismatch. The group's other ops
// stage as before, after these.
bool p2pDirectApplies(Communicator* comm, const Op& op);
// Whether a send to self and the receive it matches (in call order) are one device copy: both device buffers, of
// the same nonzero size, at least CFX_CUDA_IPC_MIN_BYTES, with the path on.
bool selfDirectApplies(Communicator* comm, const Op& send, const Op& recv);
// The buffer of a device-direct op that is device memory on every rank (a non-root's receive buffer of reduce and
// gather need not be): the op's context is its context.
const void* deviceBufferOf(const Op& op);
// The host side of a program: a barrier among the communicator's ranks, and a host group of small sends and
// receives (the p2p tokens). Both run on the progress thread.
struct DirectHost {
  std::function<Status()> barrier;
  std::function<Status(const std::vector<Op>&)> exchange;
  // A barrier that also fails, on every rank, unless every rank passed the same value.
  std::function<Status(uint64_t)> agree;
};

// One device-direct plan as alternating steps: segment i is device work the caller enqueues on the op's stream at
// the call; host step i runs on the progress thread once the stream has run segment i, and the stream goes on to
// segment i + 1 once host step i is done. As many host steps as segments.
struct DirectProgram {
  std::vector<std::function<Status(cuda::CUstream)>> segments;
  std::vector<std::function<Status()>> hostSteps;
};

// Builds the program of a plan's device-direct ops, at the call (on the caller's thread: it loads the reduce
// kernels into `ctx`): its sends and receives (`p2p`, sends to self paired with their receives in call order), then
// its collectives (`colls`) one after another. Either may be empty.
Result<DirectProgram> buildDirectProgram(Communicator* comm, cuda::CUcontext ctx, const std::vector<Op>& colls,
                                         const std::vector<Op>& p2p, const DirectHost& host);

}  // namespace cfx::core
