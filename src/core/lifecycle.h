// SPDX-License-Identifier: Apache-2.0
// Creating communicators from other communicators: split, shrink and grow (core layer).
#pragma once

#include <memory>
#include <vector>

#include "core/communicator.h"

namespace cfx::core {

// ncclCommSplit: collective over every rank of `parent`. Ranks with the same color form a child, ordered
// by key (ties keep parent order). Returns null for color == NCCL_SPLIT_NOCOLOR (-1).
Result<std::unique_ptr<Communicator>> splitComm(Communicator& parent, int color, int key, const CommConfig& config,
                                                const CommOptions& options);

// ncclCommShrink: called by every rank of `parent` not in `exclude`; survivors keep their order. Only point-
// to-point bootstrap messages are used, so excluded ranks need not take part (they may be dead).
Result<std::unique_ptr<Communicator>> shrinkComm(Communicator& parent, std::vector<int> exclude, const CommConfig& config,
                                                 const CommOptions& options);

// ncclCommGrow on a rank of `parent` (existing ranks keep their numbers; the new ranks call ncclCommInitRank-like
// with the id alone). Exactly one existing rank passes `given`, the id its ncclCommGetUniqueId handed out; the
// ranks agree over the parent's bootstrap on that id and on `nRanks`, and every one of them gets the same error
// when they do not (no id, two ids, a foreign or used id, different sizes). Returns the id to join with.
Result<transport::UniqueId> agreeGrowId(Communicator& parent, int nRanks, const transport::UniqueId* given);

}  // namespace cfx::core
