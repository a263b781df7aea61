// SPDX-License-Identifier: Apache-2.0
// The planner (collectives layer): a pure function from an op's shape and the user's restrictions to a plan.
//
// No I/O, no globals, no environment: core/ reads NCCL_ALGO once per communicator, parses it with
// parseAlgoSpec() into PlannerOptions, derives a Fabric from its topology view once with fabricOf(), and logs
// describePlan() as the op's INFO/TUNING line. So every decision can be unit-tested alone, on synthetic
// topologies, without any communication.
//
// The cost model is alpha-beta per flow: an algorithm step costs the latency of the slowest edge it uses, and its
// bytes cost bytes / bandwidth, where a flow's bandwidth is its narrowest link divided by the number of the
// algorithm's flows that cross that link in the same direction at the same time. That one rule is what tells a
// ring of point-to-point links (a second ring the other way doubles the bandwidth) from hosts behind one NIC and a
// switch (it shares the NIC and gains nothing), and what makes the hierarchical algorithm pay off between hosts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/collective.h"
#include "common/status.h"
#include "topology/topology_view.h"

namespace cfx::coll {

// What one step of an algorithm costs besides its link's latency: waking the rank, the verb's bookkeeping, the
// transport's system calls. Where every rank has a CPU of its own that is a few microseconds (a 4-rank shared-memory
// step on this project's 2-core machine); it keeps the model from trading one long message for several short ones
// that would cost nothing.
inline constexpr double kStepOverheadUs = 5;
// ... and where ranks outnumber the CPUs they run on: a waiting rank has gone to sleep, and its peer's message finds
// the CPU taken by another rank, so a step also waits for the scheduler. 20 ranks the algorithms as the namespace
// bed ran them (docs/notes/algorithms.md, "The planner's constants").
inline constexpr double kSharedCpuStepOverheadUs = 20;

// The step overhead for ranks running `ranksPerCpu` to a CPU (the most crowded machine's ranks over the CPUs they
// may run on; at most 1 where each has one).
double stepOverheadUs(double ranksPerCpu);

// Microseconds to move `bytes` at `f`'s bandwidth (infinite on a link without one).
double transferUs(const topo::LinkFigures& f, double bytes);

// The figures of each communication pattern the planner prices, derived once per communicator. Each is the
// per-flow figure of the pattern's slowest flow while all its flows run at once: latency in microseconds per
// hop, bandwidth in GB/s.
struct Fabric {
  topo::LinkFigures ring;    // rank r -> r + 1 for every r (the flat ring)
  topo::LinkFigures biRing;  // r -> r + 1 and r -> r - 1 at once (the bidirectional ring); n >= 3 only
  // r <-> r ^ mask among the first 2^k ranks, one entry per round, mask = 1, 2, 4, ... (recursive doubling and
  // halving, pairwise exchange): rounds are sequential, so each is priced on its own flows.
  std::vector<topo::LinkFigures> butterfly;
  bool hier = false;         // several hosts, each running the same number (> 1) of ranks
  bool contiguousHosts = true;  // every host's ranks are consecutive in rank order (the hierarchical scan's need)
  int hosts = 1;
  int localRanks = 1;
  topo::LinkFigures host;   // every host's ring of its own ranks, all hosts at once
  topo::LinkFigures cross;  // the rings of one local index across hosts, every local index at once
  // The 3-level algorithms (Layout::threeLevel()): D devices per host, G ranks per device.
  bool hier3 = false;
  int devices = 1;
  int deviceRanks = 1;
  topo::LinkFigures device;    // every device's ring of its own ranks, all at once
  topo::LinkFigures midHost;   // the rings of one device index across a host's devices, all at once
  topo::LinkFigures crossDev;  // the rings of one (device, index) position across hosts, all at once
  double stepUs = kStepOverheadUs;  // every step's overhead (stepOverheadUs), the same on every link
};

// The layout of `view`'s placed ranks: its hosts, and below them devices, one per GPU or, for CPU ranks, per NUMA
// node (a rank placed on no node is on the host's first).
Layout layoutOf(const topo::TopologyView& view);

// Prices `layout`'s ranks on `view`, whose rank r must be the communicator's rank r. `rails`: how many of a host's
// NICs each flow between hosts is striped over (CFX_SOCKET_RAILS with autotuned TCP streams); 1 routes every flow
// through the host's first NIC on its route.
Fabric fabricOf(const topo::TopologyView& view, const Layout& layout, int rails = 1);

struct PlanRequest {
  Collective coll = Collective::AllReduce;
  size_t bytes = 0;  // the op's largest buffer: count * element size, times nRanks where count is per rank
  int nRanks = 1;
  size_t sliceBytes = 0;  // what every verb moves per FIFO slot (FifoGeometry::slotBytes)
  const Fabric* fabric = nullptr;  // null: nothing known, so the ring family is chosen without prices
  // Every pair of ranks can send a message of at least this many bytes as a direct (single-copy) message; 0 when
  // some pair cannot. On one host, AllGather, ReduceScatter and Broadcast go Direct from there on.
  size_t directMinBytes = 0;
  // ... and for any buffer (ranks are threads of one process, or CFX_SHM_DIRECT=1), not only ncclMemAlloc's.
  bool directAnyBuffer = false;
  // Slices per chunk of the ring all-reduce's loops (prims::Prims::ringChunkSlices(): more than 1 on long fat paths).
  int ringChunkSlices = 1;
  // A compressed op: the codec it asks for (null: plain) and where it may be used. With Auto the op compresses only
  // where the model prices a compressed algorithm clearly below the best plain one (a slow link between hosts, not
  // shared memory); Always takes the cheapest compressed algorithm; Never plans it plain.
  const compress::Codec* codec = nullptr;
  CompressArgs::Mode compressMode = CompressArgs::Mode::Auto;
  // Scan: the op combines groups in order (Affine, User), at a slower rate than the reduction kernels.
  bool orderedCombine = false;
};

// Which algorithms the user allows, per collective (NCCL_ALGO). Default-constructed: all of them.
struct PlannerOptions {
  std::array<uint32_t, kNumCollectives> excluded{};  // bit (1 << Algorithm) set: not to be chosen
  std::string algoSpec;                              // the NCCL_ALGO text these came from, for log lines
  // NCCL_PROTO: bit (1 << Collective) set where the spec leaves no protocol this library has. There is one,
  // Simple (NCCL's LL and LL128 trade bandwidth for latency inside GPU kernels); such ops still use it.
  uint32_t simpleExcluded = 0;
  std::string protoSpec;

  bool allows(Collective coll, Algorithm algorithm) const {
    return (excluded[static_cast<size_t>(coll)] & (1u << static_cast<unsigned>(algorithm))) == 0;
  }
};

// Parses NCCL_ALGO. Sections are separated by ';', each optionally prefixed by a collective and ':'
// ("allreduce:ring;broadcast:chain"); a section without a prefix applies to every collective, and a later
// section replaces an earlier one for the collectives it covers. A list names the algorithms allowed,
// comma-separated, or with a leading '^' the algorithms excluded. Names are case-insensitive; blanks around
// them are ignored; an empty spec allows everything.
// NCCL's algorithms this library lacks (CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT) are skipped: they are
// stored in *skipped (when not null, each once, in NCCL's spelling) for the caller to log, and the rest of the
// spec applies, so "^NVLS" allows everything and "NVLS,Tree" allows Tree.
// Errors (InvalidArgument, saying what was wrong and what is accepted): an unknown collective or algorithm
// name, an empty name, or a collective section naming an algorithm that does not implement that collective.
// A section without a prefix may leave a collective with no allowed algorithm; choosePlan then falls back to
// its default and describePlan says so.
Result<PlannerOptions> parseAlgoSpec(std::string_view spec, std::vector<std::string>* skipped = nullptr);

// Parses NCCL_PROTO into `opts` (simpleExcluded, protoSpec), with NCCL_ALGO's syntax: sections separated by ';',
// optionally prefixed by a collective, each a comma list of protocols allowed or, after '^', excluded. Names:
// Simple, LL, LL128 (NCCL's, case-insensitive). Errors (InvalidArgument), as for NCCL_ALGO: an unknown
// collective or protocol name, or an empty name.
Status parseProtoSpec(std::string_view spec, PlannerOptions& opts);

// The plan for one op. When all ranks share one host or nothing is known, AllReduce uses Exchange while the whole
// message fits one slice on a power-of-two rank count above one, RecDouble while it fits one slice on other
// counts, and Ring above (rules measured on shared memory). Otherwise AllReduce, AllGather and ReduceScatter take the
// cheapest by the cost model of, in this order, Exchange and RecDouble (while they fit one slice), Ring, BiRing,
// Hier, Hier3 and (AllReduce) Rabenseifner and Tree, where a later one must be at least kModelMargin cheaper than the
// best before it to be chosen (the model is coarse; the earlier ones are the safer defaults). Without a fabric they use
// Ring. Broadcast and Reduce use Chain; AlltoAll, Gather and Scatter use Direct. Algorithms the options exclude are
// skipped; if they exclude every algorithm that can run the op, the default choice is used anyway. Always returns an
// implemented, applicable pair; the plan's layout is left for the caller to fill in.
inline constexpr double kModelMargin = 0.05;
Plan choosePlan(const PlanRequest& req, const PlannerOptions& opts);

// The model's estimate of `algorithm` running the op, in microseconds; negative when it has no price (no fabric,
// an algorithm outside the ring family, or not applicable). With req.codec the compressed form is priced
// (estimateCompressedUs); without, the plain one.
double estimateUs(const PlanRequest& req, Algorithm algorithm);

// The compressed side of the planner (planner_compress.cc). The model adds to the plain one the codec's wire bytes
// (framed bytes over buffer bytes) and its CPU time, at the per-core encode and decode rates of codecSpeed(), which
// overlaps a phase's transfer (a verb encodes slice by slice while earlier slices travel). Compressed candidates,
// most preferred first: SparseGather (top-k), QuantOnce and Hier (dense), and the requantising Ring only where
// NCCL_ALGO leaves no other.
struct CodecSpeed {
  double encodeGBs;  // GB/s of fp32 values one core encodes
  double decodeGBs;  // GB/s of fp32 values one core decodes and adds
};
CodecSpeed codecSpeed(compress::Format format);
double estimateCompressedUs(const PlanRequest& req, Algorithm algorithm);
// The compressed plan for req (req.codec set, mode not Never), or nullopt where the op stays plain: the collective
// has no compressed form for the format, NCCL_ALGO allows none, or (Auto) none beats `plainUs` (the chosen plain
// plan's price; negative: unpriced, so Auto stays plain) by kModelMargin.
std::optional<Plan> chooseCompressed(const PlanRequest& req, const PlannerOptions& opts, double plainUs);

// All-Scan (planner_scan.cc). Every scan algorithm is priced, on one host too: the chain pays n - 1 hops and moves
// each state once, recursive doubling pays log2 n latencies and moves the whole state every round on contended
// butterfly flows, Blelloch pays 2 log2 n latencies on uncontended ones with half the combines, and Hier prices its
// host chains, cross-host doubling and carry hop on their own figures. Each round also pays the combine, at the
// rates of scanCombineGBs. Without a fabric: recursive doubling while the state fits a slice, else the chain.
double scanCombineGBs(const PlanRequest& req);
double estimateScanUs(const PlanRequest& req, Algorithm algorithm);
std::optional<Algorithm> pickScan(const PlanRequest& req, const PlannerOptions* opts);


// One line for INFO/TUNING, e.g. "AllReduce 4096 B on 8 ranks: RecDouble, slice 131072 B", noting when
// NCCL_ALGO changed the choice or could not be honoured.
std::string describePlan(const PlanRequest& req, const Plan& plan, const PlannerOptions& opts);

}  // namespace cfx::coll
