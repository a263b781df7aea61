// SPDX-License-Identifier: Apache-2.0
// Creating communicators from other communicators: split and shrink (core layer).
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

}  // namespace cfx::core
