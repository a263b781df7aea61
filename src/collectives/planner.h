// SPDX-License-Identifier: Apache-2.0
// The planner (collectives layer): a pure function from an op's shape and the user's restrictions to a plan.
//
// No I/O, no globals, no environment: core/ reads NCCL_ALGO once per communicator, parses it with
// parseAlgoSpec() into PlannerOptions, and logs describePlan() as the op's INFO/TUNING line. So every decision
// can be unit-tested alone. The topology-driven alpha-beta model will arrive as new fields here (a topology
// view in PlanRequest, cost tables in PlannerOptions) and replace the fixed preference order in planner.cc;
// callers keep calling choosePlan().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collectives/collective.h"
#include "common/status.h"

namespace cfx::coll {

struct PlanRequest {
  Collective coll = Collective::AllReduce;
  size_t bytes = 0;  // the op's largest buffer: count * element size, times nRanks where count is per rank
  int nRanks = 1;
  size_t sliceBytes = 0;  // what every verb moves per FIFO slot (FifoGeometry::slotBytes)
};

// Which algorithms the user allows, per collective (NCCL_ALGO). Default-constructed: all of them.
struct PlannerOptions {
  std::array<uint32_t, kNumCollectives> excluded{};  // bit (1 << Algorithm) set: not to be chosen
  std::string algoSpec;                              // the NCCL_ALGO text these came from, for log lines

  bool allows(Collective coll, Algorithm algorithm) const {
    return (excluded[static_cast<size_t>(coll)] & (1u << static_cast<unsigned>(algorithm))) == 0;
  }
};

// Parses NCCL_ALGO. Sections are separated by ';', each optionally prefixed by a collective and ':'
// ("allreduce:ring;broadcast:chain"); a section without a prefix applies to every collective, and a later
// section replaces an earlier one for the collectives it covers. A list names the algorithms allowed,
// comma-separated, or with a leading '^' the algorithms excluded. Names are case-insensitive; blanks around
// them are ignored; an empty spec allows everything.
// Errors (InvalidArgument, saying what was wrong and what is accepted): an unknown collective or algorithm
// name, an empty name, or a collective section naming an algorithm that does not implement that collective.
// A section without a prefix may leave a collective with no allowed algorithm; choosePlan then falls back to
// its default and describePlan says so.
Result<PlannerOptions> parseAlgoSpec(std::string_view spec);

// The plan for one op. Today: AllReduce uses Exchange while the whole message fits one slice on a power-of-two
// rank count above one, RecDouble while it fits one slice on other counts, else Ring; AllGather and ReduceScatter use Ring; Broadcast and Reduce use Chain; AlltoAll, Gather and
// Scatter use Direct. Algorithms the options exclude are skipped; if they exclude every algorithm that can
// run the op, the default choice is used anyway. Always returns an implemented, applicable pair.
Plan choosePlan(const PlanRequest& req, const PlannerOptions& opts);

// One line for INFO/TUNING, e.g. "AllReduce 4096 B on 8 ranks: RecDouble, slice 131072 B", noting when
// NCCL_ALGO changed the choice or could not be honoured.
std::string describePlan(const PlanRequest& req, const Plan& plan, const PlannerOptions& opts);

}  // namespace cfx::coll
