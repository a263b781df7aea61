// SPDX-License-Identifier: Apache-2.0
// Device-direct collectives (core layer): the ranks of one host move device buffers through each other's CUDA IPC
// scratch (transport/cuda_ipc) with copy engines, instead of staging through host memory.
//
// Every collective has its form here (device_direct.cc gives each its steps and cost): the ranks whose data is read
// copy a window of it into their scratch; a host barrier; the ranks that receive copy (or, for the reductions,
// reduce with one kernel over every rank's scratch, in rank order) from the scratch blocks into their outputs; a
// host barrier, after which the scratch may be refilled. All-reduce and reduce add a third step: each rank reduces
// a 1/n slice, so the reduction is spread over the ranks' GPUs, and every rank (reduce: the root) copies the slices
// out. Per window: 2 host barriers (3 for all-reduce and reduce), each a 4-byte host all-reduce (~10-50 us on shared
// memory), and copies at device-memory or NVLink speed. No kernel waits on another process: the barriers run on the
// host, and copies are plain copy-engine transfers, so ranks may share a GPU. But where they do, each wait for the
// GPU's copies is a switch between the processes' contexts (~0.5 ms with 4 processes on an H100), which staging
// through host memory does not pay: ops smaller than CFX_CUDA_IPC_MIN_BYTES (8 MiB there) stage instead.
//
// Sends and receives split each rank's scratch into one slot per peer and hand slots over with small tokens on the
// host transport, pair by pair (runDeviceDirectP2p), so ranks outside a pair never wait for it. In a group they go
// first; the group's other ops then stage as before.
//
// The choice is the same on every rank: the scratch exists on all ranks or none (IpcScratch), and the other
// conditions are properties of the call every rank makes alike (collective, size, device buffers, one op). A rank that
// passes host buffers where the others pass device buffers runs a different protocol; the barrier's tag check then
// fails on both sides with a named mismatch instead of a hang.
#pragma once

#include <functional>

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
// Runs a group's device-direct sends and receives on the progress thread, after their streams reached them.
// `exchange` runs a host group of small sends and receives (the tokens that hand the scratch slots over).
Status runDeviceDirectP2p(Communicator* comm, const std::vector<Op>& ops,
                          const std::function<Status(const std::vector<Op>&)>& exchange);
// Whether the collective's device-direct form runs a reduce kernel (which the caller's thread must load first).
bool reduces(coll::Collective c);
// The buffer of a device-direct op that is device memory on every rank (a non-root's receive buffer of reduce and
// gather need not be): the op's context is its context.
const void* deviceBufferOf(const Op& op);
// Runs one op device-direct on the progress thread, after its stream reached it. `barrier` is a host barrier on
// this communicator.
Status runDeviceDirect(Communicator* comm, const Op& op, const std::function<Status()>& barrier);

}  // namespace cfx::core
