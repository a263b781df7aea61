// SPDX-License-Identifier: Apache-2.0
// The MPI interposer's knobs, read once into a plain struct (interpose layer). Kept apart from the MPI-facing
// code so the knob registry (docs/ENV.md) can see them on machines that have no MPI.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace cfx::interpose {

// The MPI collectives the interposer can route to Conflux. Order is the order of the stats report.
enum class MpiColl : int {
  Allreduce,
  Reduce,
  Bcast,
  Allgather,
  ReduceScatterBlock,
  ReduceScatter,
  Alltoall,
  Gather,
  Scatter,
  Barrier,
  // The non-blocking forms, in the same order; each uses its blocking form's threshold (see thresholdOf).
  Iallreduce,
  Ireduce,
  Ibcast,
  Iallgather,
  IreduceScatterBlock,
  IreduceScatter,
  Ialltoall,
  Igather,
  Iscatter,
  Ibarrier,
  Count
};
inline constexpr size_t kNumMpiColls = static_cast<size_t>(MpiColl::Count);
inline constexpr size_t kNumBlockingColls = static_cast<size_t>(MpiColl::Iallreduce);

// The blocking collective whose threshold and barrier switch a call of coll obeys (coll itself if blocking).
constexpr MpiColl blockingForm(MpiColl coll) {
  const auto i = static_cast<size_t>(coll);
  return static_cast<MpiColl>(i >= kNumBlockingColls ? i - kNumBlockingColls : i);
}

// "MPI_Allreduce" and so on.
const char* mpiCollName(MpiColl coll);

struct MpiOptions {
  bool disable = false;  // CFX_MPI_DISABLE: every call goes to PMPI.
  bool stats = false;    // CFX_MPI_STATS: print routed / passed-through counts at MPI_Finalize.
  bool routeBarrier = false;
  // Per blocking collective: calls whose bytes (see the knob help) are below this stay with MPI. Barrier's entry
  // is unused. The non-blocking forms use their blocking form's entry.
  std::array<int64_t, kNumBlockingColls> minBytes{};
};

// Reads the knobs on first call; later calls return the same struct. Thread-safe.
const MpiOptions& mpiOptions();

}  // namespace cfx::interpose
