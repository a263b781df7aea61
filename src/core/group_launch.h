// SPDX-License-Identifier: Apache-2.0
// What group.cc (group semantics, host launch) and group_device.cc (device launch) share inside the core layer.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "core/group.h"
#include "primitives/executor.h"

namespace cfx::core {

// The Works of one communicator's part of a group, in call order. Building takes the messages' sequence numbers,
// so a queued job builds when it starts (see launchOps).
Result<std::vector<std::unique_ptr<prims::Work>>> buildWorks(Communicator* comm, const std::vector<const Op*>& ops);
// Builds the ops' Works and runs them on the calling thread (Communicator::runInline).
Status runOnThisThread(Communicator* comm, const std::vector<const Op*>& ops);

// A buffer an op touches on this rank, by NCCL's count semantics: what it reads (in) and what it writes (out).
struct OpRange {
  const void* p;
  size_t bytes;
  bool in;
  bool out;
};
void opRanges(const Op& op, std::vector<OpRange>* ranges);

// Enqueues each communicator's part of a group that touches device buffers on its streams and progress thread;
// returns once enqueued.
Status launchDevice(const std::vector<Communicator*>& comms, std::map<Communicator*, std::vector<const Op*>>& byComm);

}  // namespace cfx::core
