// SPDX-License-Identifier: Apache-2.0
// Rounds of a pipelined multi-level algorithm (collectives layer).
//
// The hierarchical algorithms cut a buffer into segments and give each level a strand that works one segment
// behind the level before it: in round i, level s runs segment i - s. Every rank runs the same rounds in the same
// order and the strands of a round talk to disjoint peers, so a round needs only the same round of its peers.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "collectives/collective.h"
#include "primitives/parallel.h"

namespace cfx::coll {

// Whether round `round` of a pipeline over `segments` segments has work at stage `stage` (segment round - stage).
inline bool pipelineHas(size_t round, size_t stage, int segments) {
  return round >= stage && round - stage < static_cast<size_t>(segments);
}

// Runs rounds 0 .. rounds - 1: the strands strandsOf(round) returns run at once (prims::Parallel), and the next
// round starts once they all finished; the first failure ends the run. `strandsOf` is copied into the Coro, and
// whatever it refers to must outlive it.
template <typename StrandsOf>
Coro pipelinedRounds(size_t rounds, StrandsOf strandsOf) {
  for (size_t round = 0; round < rounds; ++round) {
    std::vector<Coro> strands = strandsOf(round);
    if (strands.size() == 1) {
      CFX_CO_TRY(co_await std::move(strands.front()));
    } else if (!strands.empty()) {
      CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
    }
  }
  co_return Status();
}

}  // namespace cfx::coll
