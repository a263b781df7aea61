// SPDX-License-Identifier: Apache-2.0
// Shared-state synchronisation (core layer): cfxSharedStateSync, the PCCL-style step that leaves every member of a
// communicator holding bit-identical state (weights, optimizer moments, a step counter), whoever joined late or
// missed an update.
//
// Every member hashes its state (ft::StateHasher over the entries' bytes, in order) and the members all-gather
// the digests with a digest of the layout (entry sizes). The digest most members hold is the state everyone will
// hold; a tie goes to the digest whose lowest holder is the lowest rank, so every member picks the same one from
// the same table without further talk. Members whose digest differs are out of date: the i-th of them (in rank
// order) receives every entry from the (i mod u)-th of the u up-to-date members, so the sending is shared. Each
// receiver hashes what arrived, and a last all-gather of one word per member makes the call succeed on every
// member or fail on every member, naming the ones that failed.
//
// Cost: one pass over the state on every member (a second on receivers) at tens of GB/s, two all-gathers of a few
// bytes, and ceil(k / u) * state bytes sent by each source for k out-of-date members; nothing moves when all agree.
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "core/communicator.h"
#include "faulttol/state_hash.h"

namespace cfx::core {

struct StateBuffer {
  void* data = nullptr;  // host memory
  size_t bytes = 0;
  int dataType = 0;      // part of the layout every member must agree on
};

struct StateSyncOutcome {
  ft::StateHash hash;       // of the state every member now holds
  bool replaced = false;    // this member was out of date; its buffers now hold the majority's bytes
  int source = -1;          // the member it received from, or -1
  int outdated = 0;         // members that were brought up to date
  size_t bytesReceived = 0;
};

// Collective over every rank of `comm`, outside any group. Mismatched layouts fail with InvalidUsage on every
// member before anything is written; a receiver whose bytes do not hash to the majority's digest fails the call on
// every member with RemoteError (its buffers then hold what arrived).
Result<StateSyncOutcome> syncSharedState(Communicator& comm, const std::vector<StateBuffer>& entries);

// The digest syncSharedState compares, for a member that only wants to know (no communication).
ft::StateHash hashState(const std::vector<StateBuffer>& entries);

}  // namespace cfx::core
