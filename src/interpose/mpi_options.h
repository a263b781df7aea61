// SPDX-License-Identifier: Apache-2.0
// The MPI interposer's knobs, read once into a plain struct (interpose layer). Kept apart from the MPI-facing
// code so the knob registry (docs/ENV.md) can see them on machines that have no MPI.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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
  Alltoallv,
  Scan,
  Exscan,
  Barrier,
  // The non-blocking forms, in the same order; each uses its blocking form's size rule (see blockingForm).
  Iallreduce,
  Ireduce,
  Ibcast,
  Iallgather,
  IreduceScatterBlock,
  IreduceScatter,
  Ialltoall,
  Igather,
  Iscatter,
  Ialltoallv,
  Iscan,
  Iexscan,
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

// Byte ranges [lo, hi) in which a collective stays with MPI although it is above its minimum: measured bands where
// Open MPI beats Conflux (CFX_MPI_<COLL>_MPI_BAND). A fixed array keeps MpiOptions a plain struct.
struct ByteBand {
  int64_t lo = 0;
  int64_t hi = 0;
};
inline constexpr size_t kMaxMpiBands = 4;
struct ByteBands {
  std::array<ByteBand, kMaxMpiBands> band{};
  size_t count = 0;
};

// Parses a band knob: "none" or "" for no band, else up to kMaxMpiBands comma-separated "LO-HI" ranges, each
// bound a decimal byte count with an optional binary suffix K, M or G (KiB, MiB, GiB), LO < HI. Returns what is
// wrong, or nullopt with out filled.
std::optional<std::string> parseByteBands(const std::string& text, ByteBands& out);

struct MpiOptions {
  bool disable = false;  // CFX_MPI_DISABLE: every call goes to PMPI.
  bool stats = false;    // CFX_MPI_STATS: print routed / passed-through counts at MPI_Finalize.
  bool routeBarrier = false;
  // Per blocking collective: calls whose bytes (see the knob help) are below this stay with MPI. Barrier's entry
  // is unused. The non-blocking forms use their blocking form's entry.
  std::array<int64_t, kNumBlockingColls> minBytes{};
  // Per blocking collective: calls whose bytes fall in one of these bands stay with MPI too.
  std::array<ByteBands, kNumBlockingColls> mpiBands{};
};

// Whether a call of coll (blocking or not; barriers excluded) that moves `bytes` bytes is routed to Conflux by
// the size rule: at least the minimum and outside every pass-through band. The same on every rank, since the
// bytes are.
bool sizeRoutes(const MpiOptions& options, MpiColl coll, int64_t bytes);
// Whether the size rule of coll routes every size (minimum 0, no band). MPI_Alltoallv's bytes differ from rank to
// rank, so any other rule costs it an agreement between the ranks first (see mpi_collectives.cc).
bool routesEverySize(const MpiOptions& options, MpiColl coll);

// Reads the knobs on first call; later calls return the same struct. Thread-safe.
const MpiOptions& mpiOptions();

}  // namespace cfx::interpose
