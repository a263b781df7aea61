// SPDX-License-Identifier: Apache-2.0
// Algorithm choice and NCCL_ALGO parsing (collectives layer). Pure: no logging, no environment.
#include "collectives/planner.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "collectives/device_program.h"
#include "collectives/ring.h"

namespace cfx::coll {

namespace {

// Latency-bound algorithms, most preferred first: they apply while the whole message fits one slice, and on one
// host (or with nothing known) they are taken whenever they apply.
constexpr Algorithm kLatencyFamily[] = {Algorithm::Exchange, Algorithm::RecDouble};
// Algorithms priced by the model, safest first: a later one must be clearly cheaper than the best before it.
constexpr Algorithm kPricedFamily[] = {Algorithm::Exchange,     Algorithm::RecDouble, Algorithm::Ring,
                                       Algorithm::BiRing,       Algorithm::Hier,      Algorithm::Hier3,
                                       Algorithm::Rabenseifner, Algorithm::Tree};
// One always-applicable algorithm per remaining collective.
constexpr Algorithm kFixedFamily[] = {Algorithm::Chain, Algorithm::Direct};
// Direct broadcast where buffers may travel as slices: at most this many ranks (see pick()).
constexpr int kDirectBroadcastSlicedRanks = 4;
// From this many bytes a one-host all-reduce that can go Direct does, rather than Exchange or RecDouble: there its two
// copies beat Exchange's log2(n) rounds (docs/notes/algorithms.md, "The planner's constants").
constexpr size_t kDirectOverLatencyBytes = 64 * 1024;
// Many ranks on one host (issue 40): the rules below were measured with 2 to 16 ranks. From this many an all-reduce
// on one host is priced by the model like one between hosts: with tens of ranks per core every step waits for the
// scheduler, so the fewest steps win (Rabenseifner's 2 log2(n) against the ring's 2 (n - 1) and Direct's n - 1
// peers), as the model says. Measured in docs/notes/scale.md, "The planner at many ranks".
constexpr int kPricedLocalRanks = 32;

// Whether `a` can run this op at all, whatever it costs.
bool applicable(Algorithm a, const PlanRequest& req) {
  switch (a) {
    case Algorithm::RecDouble: return req.nRanks > 1 && req.bytes <= req.sliceBytes;
    // Half of recursive doubling's latencies, but every rank moves and reduces the whole buffer per round: it wins
    // while one message is latency-bound (one slice), and needs pairs all the way down (2^k ranks).
    case Algorithm::Exchange:
      // (n & (n - 1)): std::has_single_bit becomes a libgcc popcount call without -mpopcnt, on every op.
      return req.nRanks > 1 && (req.nRanks & (req.nRanks - 1)) == 0 && req.bytes <= req.sliceBytes;
    // Two ranks have one neighbour: the bidirectional ring is the ring there. And each strand must carry at least a
    // slice: below that its steps are latency-bound, and a second strand only adds wake-ups
    // (docs/notes/algorithms.md, "The planner's constants").
    case Algorithm::BiRing: return req.nRanks >= 3 && req.bytes >= 2 * req.sliceBytes;
    // A broadcast's two levels need only several hosts; the reducing ones need the same ranks on every host.
    case Algorithm::Hier:
      return req.fabric != nullptr && (req.coll == Collective::Broadcast ? req.fabric->hosts > 1 : req.fabric->hier);
    // And each rank's part at least a slice: below that every level's step moves less than a slice, its wake-ups
    // are the cost, and the model's few long-latency steps do not show (docs/notes/algorithms.md, "The planner's
    // constants").
    case Algorithm::Hier3:
      return req.fabric != nullptr && req.fabric->hier3 &&
             req.bytes >= static_cast<size_t>(req.nRanks) * req.sliceBytes;
    case Algorithm::Tree: return req.nRanks > 1;
    case Algorithm::Rabenseifner:
    case Algorithm::Ring:
    case Algorithm::Chain:
    case Algorithm::Direct: return true;
    case Algorithm::QuantOnce:
    case Algorithm::SparseGather: return false;  // compressed forms only (planner_compress.cc)
    case Algorithm::Blelloch: return true;       // Scan only (planner_scan.cc)
    case Algorithm::IpcScratch:
    case Algorithm::IpcZeroCopy:
    case Algorithm::IpcOneShot: return false;  // device programs (planner_device.cc), never a host plan
  }
  return false;
}

bool usable(Algorithm a, const PlanRequest& req, const PlannerOptions* opts) {
  return hasAlgorithm(req.coll, a) && applicable(a, req) && (opts == nullptr || opts->allows(req.coll, a));
}

std::optional<Algorithm> pick(const PlanRequest& req, const PlannerOptions* opts) {
  if (req.coll == Collective::Scan) {
    return pickScan(req, opts);
  }
  // Variable shapes have one algorithm, every peer at once; their sizes say nothing a choice could use.
  if (variableShape(req.coll)) return usable(Algorithm::Direct, req, opts) ? std::optional(Algorithm::Direct) : std::nullopt;
  // On one host the shared-memory path was measured and tuned with these rules (Exchange or RecDouble up to one
  // slice, then Ring); the model's memory figures are too coarse to overrule them (it priced Rabenseifner 15 %
  // under Ring at 256 KiB on 4 ranks, which then took 1.8 times as long). Between hosts the model decides.
  const bool oneHost = req.fabric == nullptr || req.fabric->hosts == 1;
  const bool manyLocal = req.fabric != nullptr && oneHost && req.coll == Collective::AllReduce &&
                         req.nRanks >= kPricedLocalRanks;
  if (oneHost && !manyLocal) {
    // Where every receiver can read its senders' buffers in place, copying each block once straight to where it
    // belongs beats passing it along a ring or chain through FIFOs (measured: docs/notes/algorithms.md).
    // Where some buffer may not go direct, its blocks travel as slices: the ring's copy count for AllGather and
    // ReduceScatter, but a Broadcast root then fills every peer's FIFO itself, n - 1 copies on one rank against
    // the chain's two per rank; up to kDirectBroadcastSlicedRanks ranks that costs at most 1.5 times the chain.
    const size_t perPeer = req.coll == Collective::Broadcast ? req.bytes : req.bytes / static_cast<size_t>(req.nRanks);
    // (AllReduce's bytes is the whole buffer too: its blocks are bytes / n, as for the per-rank-count ones.)
    const bool rootBound =
        req.coll == Collective::Broadcast && !req.directAnyBuffer && req.nRanks > kDirectBroadcastSlicedRanks;
    const bool direct = req.directMinBytes > 0 && perPeer >= req.directMinBytes && req.coll != Collective::AlltoAll &&
                        !rootBound && usable(Algorithm::Direct, req, opts);
    // The latency algorithms move the whole buffer log2(n) times; from kDirectOverLatencyBytes Direct's one read
    // and one copy of each block win even within a slice.
    if (direct && req.bytes >= kDirectOverLatencyBytes) return Algorithm::Direct;
    for (Algorithm a : kLatencyFamily) {
      if (usable(a, req, opts)) return a;
    }
    if (direct) return Algorithm::Direct;
  }
  std::optional<Algorithm> best;
  double bestUs = -1;
  for (Algorithm a : kPricedFamily) {
    if (!usable(a, req, opts)) continue;
    if (oneHost && !manyLocal) return a;  // the first usable one, unpriced: no arithmetic on the shared-memory fast path
    const double us = estimateUs(req, a);
    // The first usable one is the fallback; a later one must be priced and clearly cheaper.
    if (!best || (us >= 0 && (bestUs < 0 || us < bestUs * (1 - kModelMargin)))) {
      best = a;
      bestUs = us;
    }
  }
  if (best) return best;
  for (Algorithm a : kFixedFamily) {
    if (usable(a, req, opts)) return a;
  }
  return std::nullopt;
}

// Per-flow figures of a set of flows that run at once; see the cost model in planner.h. With `rails` > 1 the flows
// between hosts take the rails as the TCP transport lays its links on them: a link belongs to its higher rank (the
// listener), and goes striped evenly over every rail where that rank's host has fewer ranks than rails, else on
// the rail of the listener's local index (TopologyView::routeBetween(a, b, rail)). A striped part loads its links
// with 1 / rails of a flow, and the flow moves at the pace of its slowest part.
topo::LinkFigures loadedFigures(const topo::TopologyView& view, const std::vector<std::pair<int, int>>& flows,
                                int rails) {
  std::vector<std::vector<std::vector<topo::TopologyView::Hop>>> routes;  // [flow][part]
  std::map<std::pair<topo::LinkId, bool>, double> load;
  std::map<int, int> copiesBy;  // per rank: its flows that are copies through one node's memory
  for (const auto& [a, b] : flows) {
    routes.emplace_back();
    const int listener = std::max(a, b);
    const bool striped = rails > 1 && static_cast<int>(view.ranksOnHost(view.hostOf(listener)).size()) < rails;
    const int parts = striped ? rails : 1;
    for (int k = 0; k < parts; ++k) {
      routes.back().push_back(a == b       ? std::vector<topo::TopologyView::Hop>{}
                              : rails <= 1 ? view.routeBetween(a, b)
                              : striped    ? view.routeBetween(a, b, k)
                                           : view.routeBetween(a, b, view.localRankOf(listener) % rails));
      for (const topo::TopologyView::Hop& hop : routes.back().back()) load[{hop.link, hop.forward}] += 1.0 / parts;
    }
    if (a != b && routes.back().front().empty()) ++copiesBy[a];
  }
  topo::LinkFigures out{std::numeric_limits<double>::infinity(), 0};
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& [a, b] = flows[i];
    if (a == b) continue;
    topo::LinkFigures f{std::numeric_limits<double>::infinity(), 0};
    if (routes[i].front().empty()) {
      // Two ranks on one node copy through its memory, and a copy runs on a rank's core (the Memory class is one
      // core's copy rate): a rank that feeds two such flows at once gives each half its core.
      const topo::PathFigures p = view.linkBetween(a, b);
      f = {p.gbps / copiesBy[a], p.latencyUs};
    }
    for (const auto& part : routes[i]) {
      double latency = 0;
      for (const topo::TopologyView::Hop& hop : part) {
        const topo::GraphLink& link = view.links()[static_cast<size_t>(hop.link)];
        f.gbps = std::min(f.gbps, link.figures.gbps / load[{hop.link, hop.forward}]);
        latency += link.figures.latencyUs;
      }
      f.latencyUs = std::max(f.latencyUs, latency);
    }
    out.gbps = std::min(out.gbps, f.gbps);
    out.latencyUs = std::max(out.latencyUs, f.latencyUs);
  }
  if (out.gbps == std::numeric_limits<double>::infinity()) out = view.figures(topo::LinkClass::Self);
  return out;
}

// What `stages` steps of a ring over blocks of `blockBytes` cost on `link` (ring.h; allreduce_ring.cc): the blocks
// go round in even loops of chunks of at most `chunkSlices` slices, and a rank takes a step only once its upstream
// neighbour has taken the one before, so every loop pays the ring's chain of hops again. Within a step the chunk's
// slices pipeline: a step costs the chunk's line time or one slice's hop, whichever is longer, and the last step
// also waits for its last slice to arrive. `strands`: rings run at once by every rank (the bidirectional ring's
// two), whose steps' overheads take turns on the rank's core while their links' latencies overlap.
double ringUs(const Fabric& f, const topo::LinkFigures& link, double stages, double blockBytes, size_t sliceBytes,
              int chunkSlices, double strands = 1) {
  const double slice = static_cast<double>(std::max<size_t>(sliceBytes, 1));
  const double loops = std::max(1.0, std::ceil(blockBytes / (slice * std::max(chunkSlices, 1))));
  const double chunk = blockBytes / loops;
  const double pieces = std::max(1.0, std::ceil(chunk / slice));
  const double hop = link.latencyUs + strands * f.stepUs;
  const double step = std::max(transferUs(link, chunk), hop + transferUs(link, chunk / pieces));
  return loops * ((stages - 1) * step + hop + transferUs(link, chunk));
}

uint32_t bit(Algorithm a) { return 1u << static_cast<unsigned>(a); }

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<Algorithm> algorithmByName(std::string_view name) {
  for (int i = 0; i < kNumAlgorithms; ++i) {
    const auto a = static_cast<Algorithm>(i);
    if (equalsIgnoreCase(name, algorithmName(a))) return a;
  }
  return std::nullopt;
}

std::optional<Collective> collectiveByName(std::string_view name) {
  for (int i = 0; i < kNumCollectives; ++i) {
    const auto c = static_cast<Collective>(i);
    if (equalsIgnoreCase(name, collectiveName(c))) return c;
  }
  return std::nullopt;
}

std::string algorithmsOf(std::optional<Collective> coll) {
  std::string names;
  for (int i = 0; i < kNumAlgorithms; ++i) {
    const auto a = static_cast<Algorithm>(i);
    if (coll && !hasAlgorithm(*coll, a) && !hasCompressedAlgorithm(*coll, a, compress::Format::Int8) &&
        !hasCompressedAlgorithm(*coll, a, compress::Format::TopK) && !hasDeviceAlgorithm(*coll, a)) {
      continue;
    }
    names += names.empty() ? "" : ", ";
    names += algorithmName(a);
  }
  return names;
}

// One section of an NCCL_ALGO or NCCL_PROTO spec: the collective it is for (none: all), whether its list excludes
// (a leading '^'), and its names, trimmed and none empty.
struct SpecSection {
  std::optional<Collective> coll;
  bool exclude = false;
  std::vector<std::string_view> names;
  std::string_view text;  // the section as written, for error messages
};

// Walks `spec`, the value of `knob`, in NCCL's syntax: sections separated by ';', each "[collective:][^]name,name".
// `noun` names what the names are ("algorithm", "protocol"). Each section goes to apply(section), which returns an
// error text or "" when the section is fine. Every error (the walker's or apply's) is InvalidArgument, prefixed
// with knob="spec". An empty or blank spec has no sections.
template <typename Apply>
Status forEachSection(std::string_view knob, std::string_view spec, const char* noun, Apply apply) {
  auto error = [&](const std::string& what) {
    return Status::error(Errc::InvalidArgument, strprintf("%.*s=\"%.*s\": %s", static_cast<int>(knob.size()), knob.data(),
                                                          static_cast<int>(spec.size()), spec.data(), what.c_str()));
  };
  std::string_view rest = trim(spec);
  if (rest.empty()) return Status();
  for (;;) {
    const size_t semi = rest.find(';');
    SpecSection section;
    section.text = rest.substr(0, semi);
    std::string_view list = section.text;
    if (const size_t colon = list.find(':'); colon != std::string_view::npos) {
      const std::string_view collName = trim(list.substr(0, colon));
      section.coll = collectiveByName(collName);
      if (!section.coll) {
        std::string known;
        for (int i = 0; i < kNumCollectives; ++i) {
          known += known.empty() ? "" : ", ";
          known += collectiveName(static_cast<Collective>(i));
        }
        return error(strprintf("unknown collective \"%.*s\" (known: %s)", static_cast<int>(collName.size()),
                               collName.data(), known.c_str()));
      }
      list = list.substr(colon + 1);
    }
    list = trim(list);
    section.exclude = !list.empty() && list.front() == '^';
    if (section.exclude) list.remove_prefix(1);
    for (;;) {
      const size_t comma = list.find(',');
      const std::string_view name = trim(list.substr(0, comma));
      if (name.empty()) return error(strprintf("empty %s name in \"%.*s\"", noun, static_cast<int>(section.text.size()),
                                               section.text.data()));
      section.names.push_back(name);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    if (const std::string what = apply(section); !what.empty()) return error(what);
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  return Status();
}

// NCCL's algorithms that this library does not have. Settings written for NCCL name them ("^NVLS" is common, and
// PyTorch's deterministic mode sets it), so they are skipped, and the rest of the spec still applies.
constexpr std::string_view kNcclOnlyAlgorithms[] = {"CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};

std::optional<std::string_view> ncclOnlyAlgorithm(std::string_view name) {
  for (std::string_view n : kNcclOnlyAlgorithms) {
    if (equalsIgnoreCase(name, n)) return n;
  }
  return std::nullopt;
}

// Applies one NCCL_ALGO section to `opts`, adding NCCL's names it skipped to `skipped` (each once); returns an
// error text or "".
std::string applyAlgoSection(const SpecSection& section, PlannerOptions& opts, std::vector<std::string>& skipped) {
  uint32_t named = 0;
  for (std::string_view name : section.names) {
    const std::optional<Algorithm> a = algorithmByName(name);
    if (!a) {
      if (const std::optional<std::string_view> nccl = ncclOnlyAlgorithm(name)) {
        if (std::find(skipped.begin(), skipped.end(), *nccl) == skipped.end()) skipped.emplace_back(*nccl);
        continue;
      }
      return strprintf(
          "unknown algorithm \"%.*s\" (this library has: %s; NCCL's CollNetDirect, CollNetChain, NVLS, "
          "NVLSTree and PAT are accepted and skipped)",
          static_cast<int>(name.size()), name.data(), algorithmsOf(std::nullopt).c_str());
    }
    if (section.coll && !hasAlgorithm(*section.coll, *a) &&
        !hasCompressedAlgorithm(*section.coll, *a, compress::Format::Int8) &&
        !hasCompressedAlgorithm(*section.coll, *a, compress::Format::TopK) && !hasDeviceAlgorithm(*section.coll, *a)) {
      return strprintf("%s has no %s algorithm (it has: %s)", collectiveName(*section.coll), algorithmName(*a),
                       algorithmsOf(section.coll).c_str());
    }
    named |= bit(*a);
  }
  // The device programs replace staging, not a host algorithm: a list of algorithms to use that names none of them
  // ("ring") leaves them allowed.
  const uint32_t device = bit(Algorithm::IpcScratch) | bit(Algorithm::IpcZeroCopy) | bit(Algorithm::IpcOneShot);
  const uint32_t excluded = section.exclude ? named : (named & device) != 0 ? ~named : ~(named | device);
  for (int i = 0; i < kNumCollectives; ++i) {
    if (!section.coll || *section.coll == static_cast<Collective>(i)) opts.excluded[static_cast<size_t>(i)] = excluded;
  }
  return "";
}

// Applies one NCCL_PROTO section to `opts`; returns an error text or "".
std::string applyProtoSection(const SpecSection& section, PlannerOptions& opts) {
  constexpr std::string_view kProtocols[] = {"Simple", "LL", "LL128"};
  bool namesSimple = false;
  for (std::string_view name : section.names) {
    bool known = false;
    for (std::string_view p : kProtocols) known = known || equalsIgnoreCase(name, p);
    if (!known) return "unknown protocol \"" + std::string(name) + "\" (NCCL's are Simple, LL, LL128)";
    namesSimple = namesSimple || equalsIgnoreCase(name, "Simple");
  }
  const bool simpleAllowed = section.exclude ? !namesSimple : namesSimple;
  for (int c = 0; c < kNumCollectives; ++c) {
    if (section.coll && *section.coll != static_cast<Collective>(c)) continue;
    const uint32_t bitC = 1u << static_cast<unsigned>(c);
    opts.simpleExcluded = simpleAllowed ? (opts.simpleExcluded & ~bitC) : (opts.simpleExcluded | bitC);
  }
  return "";
}

}  // namespace

double transferUs(const topo::LinkFigures& f, double bytes) {
  return f.gbps > 0 ? bytes / (f.gbps * 1e3) : std::numeric_limits<double>::infinity();
}

Result<PlannerOptions> parseAlgoSpec(std::string_view spec, std::vector<std::string>* skipped) {
  PlannerOptions opts;
  opts.algoSpec = std::string(trim(spec));
  std::vector<std::string> ncclOnly;
  CFX_TRY(forEachSection("NCCL_ALGO", spec, "algorithm",
                         [&](const SpecSection& section) { return applyAlgoSection(section, opts, ncclOnly); }));
  if (skipped != nullptr) *skipped = std::move(ncclOnly);
  return opts;
}

Layout layoutOf(const topo::TopologyView& view) {
  std::vector<uint64_t> hosts;
  std::vector<int64_t> devices;
  for (int r = 0; r < view.nRanks(); ++r) {
    const topo::RankPlace& place = view.placeOf(r);
    int numa = place.numa;
    const topo::Host& host = view.host(place.host);
    if (numa < 0 && !host.numaNodes.empty()) numa = host.numaNodes.front().osIndex;
    hosts.push_back(static_cast<uint64_t>(place.host));
    // GPUs as themselves, NUMA nodes below -1: the two never share an id.
    devices.push_back(place.gpu >= 0 ? int64_t{place.gpu} : -2 - int64_t{numa});
  }
  return Layout::fromPlaces(hosts, devices);
}

Fabric fabricOf(const topo::TopologyView& view, const Layout& layout, int rails) {
  Fabric fabric;
  const int n = layout.nRanks();
  std::vector<std::pair<int, int>> ring;
  std::vector<std::pair<int, int>> both;
  for (int r = 0; r < n; ++r) {
    ring.emplace_back(r, mod(r + 1, n));
    both.emplace_back(r, mod(r + 1, n));
    both.emplace_back(r, mod(r - 1, n));
  }
  fabric.ring = loadedFigures(view, ring, rails);
  fabric.biRing = n >= 3 ? loadedFigures(view, both, rails) : fabric.ring;
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  for (int mask = 1; mask < p; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    for (int r = 0; r < p; ++r) round.emplace_back(r, r ^ mask);
    fabric.butterfly.push_back(loadedFigures(view, round, rails));
  }
  fabric.hosts = layout.nHosts();
  fabric.localRanks = static_cast<int>(layout.hostRanks.front().size());
  fabric.contiguousHosts = true;
  for (int h = 0, next = 0; h < fabric.hosts; ++h) {
    for (int r : layout.hostRanks[static_cast<size_t>(h)]) fabric.contiguousHosts = fabric.contiguousHosts && r == next++;
  }
  fabric.hier = layout.hierarchical();
  if (fabric.hier) {
    std::vector<std::pair<int, int>> host;
    std::vector<std::pair<int, int>> cross;
    const int nLocal = fabric.localRanks;
    for (int h = 0; h < fabric.hosts; ++h) {
      const std::vector<int>& ranks = layout.hostRanks[static_cast<size_t>(h)];
      const std::vector<int>& nextHost = layout.hostRanks[static_cast<size_t>(mod(h + 1, fabric.hosts))];
      for (int l = 0; l < nLocal; ++l) {
        host.emplace_back(ranks[static_cast<size_t>(l)], ranks[static_cast<size_t>(mod(l + 1, nLocal))]);
        cross.emplace_back(ranks[static_cast<size_t>(l)], nextHost[static_cast<size_t>(l)]);
      }
    }
    fabric.host = loadedFigures(view, host, rails);
    fabric.cross = loadedFigures(view, cross, rails);
  }
  fabric.hier3 = layout.threeLevel();
  if (fabric.hier3) {
    fabric.devices = static_cast<int>(layout.hostDevices.front().size());
    fabric.deviceRanks = static_cast<int>(layout.deviceRanks.front().size());
    std::vector<std::pair<int, int>> device;
    std::vector<std::pair<int, int>> mid;
    std::vector<std::pair<int, int>> cross;
    for (int r = 0; r < n; ++r) {  // each rank to its successor on each of its three rings (allreduce_hier3.cc)
      const Hier3Rings rings = hier3Rings(layout, r);
      device.emplace_back(r, rings.device.next());
      mid.emplace_back(r, rings.host.next());
      cross.emplace_back(r, rings.cross.next());
    }
    fabric.device = loadedFigures(view, device, rails);
    fabric.midHost = loadedFigures(view, mid, rails);
    fabric.crossDev = loadedFigures(view, cross, rails);
  }
  return fabric;
}

double stepOverheadUs(double ranksPerCpu) { return ranksPerCpu > 1 ? kSharedCpuStepOverheadUs : kStepOverheadUs; }

double estimateUs(const PlanRequest& req, Algorithm algorithm) {
  if (req.codec != nullptr) return estimateCompressedUs(req, algorithm);
  if (req.coll == Collective::Scan) return estimateScanUs(req, algorithm);
  if (req.fabric == nullptr || !applicable(algorithm, req) || !hasAlgorithm(req.coll, algorithm)) return -1;
  const Fabric& f = *req.fabric;
  // The latency a step over `link` costs.
  auto step = [&f](const topo::LinkFigures& link) { return link.latencyUs + f.stepUs; };
  const double n = req.nRanks;
  const double bytes = static_cast<double>(req.bytes);
  // An all-reduce is a reduce-scatter and an all-gather: two passes round its ring.
  const double passes = req.coll == Collective::AllReduce ? 2 : 1;
  // Only the all-reduce ring runs chunks of several slices; the all-gather and reduce-scatter rings go a slice
  // per loop (allgather_ring.cc, reducescatter_ring.cc).
  const int chunkSlices = req.coll == Collective::AllReduce ? req.ringChunkSlices : 1;
  switch (algorithm) {
    case Algorithm::Ring:
      if (req.nRanks == 1) return 0;
      return ringUs(f, f.ring, passes * (n - 1), bytes / n, req.sliceBytes, chunkSlices);
    case Algorithm::BiRing:
      // Two strands, each step moving half the bytes; but a rank runs both strands' verbs on one core, so their
      // steps' overheads take turns, and the model charges them one after the other.
      return ringUs(f, f.biRing, passes * (n - 1), bytes / n / 2, req.sliceBytes, chunkSlices, 2);
    case Algorithm::Hier: {
      // Segments pipeline the host-local steps with the cross-host one: the slower hides all but one segment of
      // the faster.
      const double local = f.localRanks;
      const double hosts = f.hosts;
      if (req.coll == Collective::Broadcast) {
        // Pieces of two slices down a chain of hosts, then chains within hosts: a pipeline whose depth is
        // (H - 1) + (L - 1) hops and whose slowest stage is a cross-host piece.
        const double piece = std::min(bytes, 2.0 * static_cast<double>(std::max<size_t>(req.sliceBytes, 1)));
        const double pieces = std::max(1.0, std::ceil(bytes / std::max(piece, 1.0)));
        // With one rank per host there is no host level (and no host figures): just the chain of hosts.
        const topo::LinkFigures& crossLink = f.hier ? f.cross : f.ring;
        const double crossHop = step(crossLink) + transferUs(crossLink, piece);
        const double hostHop = local > 1 ? step(f.host) + transferUs(f.host, piece) : 0;
        return (hosts - 1) * crossHop + (local - 1) * hostHop + (pieces - 1) * std::max(crossHop, hostHop);
      }
      if (req.coll == Collective::AllGather || req.coll == Collective::ReduceScatter) {
        // Cross: a ring of H over each rank's block; host: H rings of L, one per source (all-gather) or destination
        // (reduce-scatter) host (allgather_hier.cc, reducescatter_hier.cc: the same steps, run the other way).
        const size_t block = req.bytes / static_cast<size_t>(req.nRanks);
        const double k = static_cast<double>(hierBlockSegments(block, 1, f.hosts, req.sliceBytes));
        const double cross = (hosts - 1) * (step(f.cross) + transferUs(f.cross, block / k));
        const double host = hosts * (local - 1) * (step(f.host) + transferUs(f.host, block / k));
        return k * std::max(host, cross) + std::min(host, cross);
      }
      const double k = static_cast<double>(hierSegments(req.bytes, f.localRanks, req.sliceBytes));
      const double host = 2 * (local - 1) * (step(f.host) + transferUs(f.host, bytes / local / k));
      const double cross = 2 * (hosts - 1) * (step(f.cross) + transferUs(f.cross, bytes / local / hosts / k));
      return k * std::max(host, cross) + std::min(host, cross);
    }
    case Algorithm::Hier3: {
      // Three pipelined levels (allreduce_hier3.cc): the slowest runs once per segment, the other two add about
      // one segment's worth each while the pipeline fills and drains.
      const double g = f.deviceRanks;
      const double d = f.devices;
      const double h = f.hosts;
      if (req.coll == Collective::AllGather || req.coll == Collective::ReduceScatter) {
        // Blocks per rank: H - 1 across hosts, H (D - 1) between devices, H D (G - 1) within a device
        // (allgather_hier3.cc, reducescatter_hier3.cc).
        const size_t block = req.bytes / static_cast<size_t>(req.nRanks);
        const double k = static_cast<double>(hierBlockSegments(block, 1, f.hosts, req.sliceBytes));
        const double cross = (h - 1) * (step(f.crossDev) + transferUs(f.crossDev, block / k));
        const double mid = h * (d - 1) * (step(f.midHost) + transferUs(f.midHost, block / k));
        const double device = h * d * (g - 1) * (step(f.device) + transferUs(f.device, block / k));
        const double slowest = std::max({device, mid, cross});
        return k * slowest + (device + mid + cross - slowest);
      }
      const double k = static_cast<double>(hierSegments(req.bytes, f.deviceRanks, req.sliceBytes));
      const double device = 2 * (g - 1) * (step(f.device) + transferUs(f.device, bytes / g / k));
      const double mid = 2 * (d - 1) * (step(f.midHost) + transferUs(f.midHost, bytes / g / d / k));
      const double cross = 2 * (h - 1) * (step(f.crossDev) + transferUs(f.crossDev, bytes / g / d / h / k));
      const double slowest = std::max({device, mid, cross});
      return k * slowest + (device + mid + cross - slowest);
    }
    case Algorithm::Exchange:
    case Algorithm::RecDouble:
    case Algorithm::Rabenseifner: {
      if (req.nRanks == 1) return 0;
      const double p = static_cast<double>(std::bit_floor(static_cast<unsigned>(req.nRanks)));
      double us = 0;
      for (size_t round = 0; round < f.butterfly.size(); ++round) {
        const topo::LinkFigures& b = f.butterfly[round];
        const double mask = static_cast<double>(size_t{1} << round);
        switch (algorithm) {
          // One message of the whole buffer each way per round.
          case Algorithm::Exchange: us += step(b) + transferUs(b, bytes); break;
          // The lower rank's buffer up, the combined one back: two messages in turn.
          case Algorithm::RecDouble: us += 2 * (step(b) + transferUs(b, bytes)); break;
          // Halving then doubling: the round of mask m moves m / p of the buffer, twice.
          default: us += 2 * (step(b) + transferUs(b, bytes * mask / p)); break;
        }
      }
      // Ranks above 2^k fold in and get the result back: two messages of the whole buffer.
      if (req.nRanks != static_cast<int>(p)) us += 2 * (step(f.ring) + transferUs(f.ring, bytes));
      return us;
    }
    case Algorithm::Tree: {
      if (req.nRanks == 1) return 0;
      // Per segment (a slice of each half), up and down the deeper tree, one message per hop, store-and-forward.
      // Tree edges join ranks far apart in rank order: priced on the slowest butterfly round's figures.
      topo::LinkFigures hop = f.ring;
      for (const topo::LinkFigures& b : f.butterfly) {
        if (step(b) + transferUs(b, 1 << 20) > step(hop) + transferUs(hop, 1 << 20)) hop = b;
      }
      const double half = bytes / 2;
      const double slice = static_cast<double>(std::max<size_t>(req.sliceBytes, 1));
      const double segments = std::max(1.0, std::ceil(half / slice));
      return segments * 2 * treeDepth(req.nRanks) * (step(hop) + transferUs(hop, half / segments));
    }
    default: return -1;
  }
}

Status parseProtoSpec(std::string_view spec, PlannerOptions& opts) {
  opts.protoSpec = std::string(trim(spec));
  opts.simpleExcluded = 0;
  return forEachSection("NCCL_PROTO", spec, "protocol",
                        [&](const SpecSection& section) { return applyProtoSection(section, opts); });
}

Plan choosePlan(const PlanRequest& req, const PlannerOptions& opts) {
  PlanRequest plain = req;
  plain.codec = nullptr;
  Plan plan{pick(plain, &opts).value_or(pick(plain, nullptr).value_or(Algorithm::Ring))};
  if (req.codec != nullptr && req.compressMode != CompressArgs::Mode::Never) {
    if (std::optional<Plan> compressed = chooseCompressed(req, opts, estimateUs(plain, plan.algorithm))) {
      return *compressed;
    }
  }
  return plan;
}

std::string describePlan(const PlanRequest& req, const Plan& plan, const PlannerOptions& opts) {
  std::string line = strprintf("%s %zu B on %d ranks: %s, slice %zu B", collectiveName(req.coll), req.bytes, req.nRanks,
                               algorithmName(plan.algorithm), req.sliceBytes);
  if (plan.codec != nullptr) line += ", codec " + compress::codecText(plan.codec->spec());
  PlanRequest plain = req;
  plain.codec = nullptr;
  std::string prices;
  const std::vector<Algorithm> priced = req.coll == Collective::Scan
                                            ? std::vector<Algorithm>{Algorithm::Chain, Algorithm::RecDouble,
                                                                     Algorithm::Blelloch, Algorithm::Hier}
                                            : std::vector<Algorithm>(std::begin(kPricedFamily), std::end(kPricedFamily));
  for (Algorithm a : priced) {
    const double us = estimateUs(plain, a);
    if (us >= 0) prices += strprintf("%s%s %.0f us", prices.empty() ? "" : ", ", algorithmName(a), us);
  }
  if (req.codec != nullptr) {
    for (Algorithm a : {Algorithm::SparseGather, Algorithm::QuantOnce, Algorithm::Hier, Algorithm::Chain, Algorithm::Ring}) {
      const double us = estimateCompressedUs(req, a);
      if (us >= 0) prices += strprintf("%s%s+%s %.0f us", prices.empty() ? "" : ", ", algorithmName(a),
                                       compress::formatName(req.codec->format()), us);
    }
    if (plan.codec == nullptr) {
      line += req.compressMode == CompressArgs::Mode::Never ? ", plain (compression off)"
                                                            : ", plain (compressing does not pay on these links)";
    }
  }
  if (!prices.empty()) line += " (model: " + prices + ")";
  if (opts.simpleExcluded & (1u << static_cast<unsigned>(req.coll))) {
    line += strprintf(" (NCCL_PROTO=%s excludes Simple, the only protocol here; using it)", opts.protoSpec.c_str());
  }
  if (plan.codec == nullptr && !pick(plain, &opts)) {
    line += strprintf(" (NCCL_ALGO=%s allows no algorithm for this op; using the default)", opts.algoSpec.c_str());
  } else if (plan.codec == nullptr && pick(plain, nullptr) != plan.algorithm) {
    line += strprintf(" (chosen by NCCL_ALGO=%s)", opts.algoSpec.c_str());
  }
  return line;
}

}  // namespace cfx::coll
