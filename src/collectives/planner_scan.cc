// SPDX-License-Identifier: Apache-2.0
// The planner's All-Scan side (collectives layer): which scan algorithm, by the cost model. Pure.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "collectives/planner.h"

namespace cfx::coll {

namespace {

double log2Ceil(int n) { return n <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(n))); }

// Chain over g ranks on `link`: pieces of two slices pipeline down the chain, and each rank combines as it forwards.
double chainUs(const PlanRequest& req, const topo::LinkFigures& link, double g, double bytes) {
  if (g <= 1) return 0;
  const Fabric& f = *req.fabric;
  const double piece = std::min(bytes, 2.0 * static_cast<double>(std::max<size_t>(req.sliceBytes, 1)));
  const double pieces = std::max(1.0, std::ceil(bytes / std::max(piece, 1.0)));
  const double combine = piece / (scanCombineGBs(req) * 1e3);
  const double hop = link.latencyUs + f.stepUs + transferUs(link, piece) + combine;
  return (g - 1 + pieces - 1) * hop;
}

// Recursive doubling over g ranks: every round a message of the whole state each way and a combine (two when
// exclusive: the prefix and the partial).
double doublingUs(const PlanRequest& req, double g, double bytes, const topo::LinkFigures& fallback) {
  const Fabric& f = *req.fabric;
  double us = 0;
  const int rounds = static_cast<int>(log2Ceil(static_cast<int>(g)));
  for (int k = 0; k < rounds; ++k) {
    const topo::LinkFigures& b = static_cast<size_t>(k) < f.butterfly.size() && g == req.nRanks ? f.butterfly[static_cast<size_t>(k)] : fallback;
    us += b.latencyUs + f.stepUs + transferUs(b, bytes) + 2 * bytes / (scanCombineGBs(req) * 1e3);
  }
  return us;
}

}  // namespace

double scanCombineGBs(const PlanRequest& req) {
  // One core combining two operands into a third: the reduction kernels run at several GB/s (perf/bench/reduce_bench);
  // an ordered combine is an element loop with conversions (primitives/ordered_combine.cc).
  return req.orderedCombine ? 1.0 : 4.0;
}

double estimateScanUs(const PlanRequest& req, Algorithm algorithm) {
  if (req.fabric == nullptr || !hasAlgorithm(Collective::Scan, algorithm)) return -1;
  const Fabric& f = *req.fabric;
  const double n = req.nRanks;
  const double bytes = static_cast<double>(req.bytes);
  if (req.nRanks == 1) return 0;
  switch (algorithm) {
    case Algorithm::Chain: return chainUs(req, f.ring, n, bytes);
    case Algorithm::RecDouble: return doublingUs(req, n, bytes, f.ring);
    case Algorithm::Blelloch: {
      // 2 ceil(log2 n) rounds of one message (the down-sweep's exchange runs both ways at once) and a combine each,
      // on uncontended flows: only a few pairs talk in a round.
      const double rounds = 2 * log2Ceil(req.nRanks);
      return rounds * (f.ring.latencyUs + f.stepUs + transferUs(f.ring, bytes) + bytes / (scanCombineGBs(req) * 1e3));
    }
    case Algorithm::Hier: {
      if (f.hosts <= 1 || !f.contiguousHosts) return -1;
      const double local = static_cast<double>(req.nRanks) / f.hosts;
      const topo::LinkFigures& host = f.hier ? f.host : f.ring;
      const topo::LinkFigures& cross = f.hier ? f.cross : f.ring;
      const double carry = local > 1 ? host.latencyUs + f.stepUs + transferUs(host, bytes) : 0;
      return chainUs(req, host, local, bytes) + doublingUs(req, f.hosts, bytes, cross) + carry +
             bytes / (scanCombineGBs(req) * 1e3);
    }
    default: return -1;
  }
}

std::optional<Algorithm> pickScan(const PlanRequest& req, const PlannerOptions* opts) {
  auto allowed = [opts](Algorithm a) { return opts == nullptr || opts->allows(Collective::Scan, a); };
  constexpr Algorithm kFamily[] = {Algorithm::Chain, Algorithm::RecDouble, Algorithm::Blelloch, Algorithm::Hier};
  if (req.fabric == nullptr) {
    const Algorithm first = req.bytes <= req.sliceBytes ? Algorithm::RecDouble : Algorithm::Chain;
    if (allowed(first)) return first;
    for (Algorithm a : kFamily) {
      if (allowed(a) && a != Algorithm::Hier) return a;
    }
    return std::nullopt;
  }
  std::optional<Algorithm> best;
  double bestUs = -1;
  for (Algorithm a : kFamily) {
    if (!allowed(a)) continue;
    const double us = estimateScanUs(req, a);
    if (us < 0) continue;
    if (!best || us < bestUs) {
      best = a;
      bestUs = us;
    }
  }
  return best;
}

}  // namespace cfx::coll
