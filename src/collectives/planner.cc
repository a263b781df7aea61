// SPDX-License-Identifier: Apache-2.0
// Algorithm choice and NCCL_ALGO parsing (collectives layer). Pure: no logging, no environment.
#include "collectives/planner.h"

#include <cctype>
#include <optional>

namespace cfx::coll {

namespace {

// Most preferred first. Each collective has exactly one always-applicable algorithm besides Exchange and
// RecDouble, so the first entry that implements the op, can run it and is allowed is the choice. The alpha-beta model replaces
// this order with a cost per candidate; the candidate filters below stay.
constexpr Algorithm kPreference[] = {Algorithm::Exchange, Algorithm::RecDouble, Algorithm::Ring, Algorithm::Chain,
                                     Algorithm::Direct};

// Whether `a` can run this op at all, whatever it costs.
bool applicable(Algorithm a, const PlanRequest& req) {
  switch (a) {
    case Algorithm::RecDouble: return req.nRanks > 1 && req.bytes <= req.sliceBytes;
    // Half of recursive doubling's latencies, but every rank moves and reduces the whole buffer per round: it wins
    // while one message is latency-bound (one slice), and needs pairs all the way down (2^k ranks).
    case Algorithm::Exchange:
      // (n & (n - 1)): std::has_single_bit becomes a libgcc popcount call without -mpopcnt, on every op.
      return req.nRanks > 1 && (req.nRanks & (req.nRanks - 1)) == 0 && req.bytes <= req.sliceBytes;
    case Algorithm::Ring:
    case Algorithm::Chain:
    case Algorithm::Direct: return true;
  }
  return false;
}

std::optional<Algorithm> pick(const PlanRequest& req, const PlannerOptions* opts) {
  for (Algorithm a : kPreference) {
    if (!hasAlgorithm(req.coll, a) || !applicable(a, req)) continue;
    if (opts && !opts->allows(req.coll, a)) continue;
    return a;
  }
  return std::nullopt;
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
    if (coll && !hasAlgorithm(*coll, a)) continue;
    names += names.empty() ? "" : ", ";
    names += algorithmName(a);
  }
  return names;
}

Status specError(std::string_view spec, const std::string& what) {
  return Status::error(Errc::InvalidArgument,
                       strprintf("NCCL_ALGO=\"%.*s\": %s", static_cast<int>(spec.size()), spec.data(), what.c_str()));
}

// Applies one section ("[collective:][^]name,name") to `opts`.
Status applySection(std::string_view spec, std::string_view section, PlannerOptions& opts) {
  std::optional<Collective> coll;
  std::string_view list = section;
  if (const size_t colon = section.find(':'); colon != std::string_view::npos) {
    const std::string_view collName = trim(section.substr(0, colon));
    coll = collectiveByName(collName);
    if (!coll) {
      std::string known;
      for (int i = 0; i < kNumCollectives; ++i) {
        known += known.empty() ? "" : ", ";
        known += collectiveName(static_cast<Collective>(i));
      }
      return specError(spec, strprintf("unknown collective \"%.*s\" (known: %s)", static_cast<int>(collName.size()),
                                       collName.data(), known.c_str()));
    }
    list = section.substr(colon + 1);
  }
  list = trim(list);
  const bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.remove_prefix(1);
  uint32_t named = 0;
  for (;;) {
    const size_t comma = list.find(',');
    const std::string_view name = trim(list.substr(0, comma));
    if (name.empty()) return specError(spec, "empty algorithm name in \"" + std::string(section) + "\"");
    const std::optional<Algorithm> a = algorithmByName(name);
    if (!a) {
      return specError(spec, strprintf("unknown algorithm \"%.*s\" (this library has: %s)",
                                       static_cast<int>(name.size()), name.data(), algorithmsOf(std::nullopt).c_str()));
    }
    if (coll && !hasAlgorithm(*coll, *a)) {
      return specError(spec, strprintf("%s has no %s algorithm (it has: %s)", collectiveName(*coll), algorithmName(*a),
                                       algorithmsOf(coll).c_str()));
    }
    named |= bit(*a);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  const uint32_t excluded = exclude ? named : ~named;
  for (int i = 0; i < kNumCollectives; ++i) {
    if (!coll || *coll == static_cast<Collective>(i)) opts.excluded[static_cast<size_t>(i)] = excluded;
  }
  return Status();
}

}  // namespace

Result<PlannerOptions> parseAlgoSpec(std::string_view spec) {
  PlannerOptions opts;
  opts.algoSpec = std::string(trim(spec));
  std::string_view rest = trim(spec);
  if (rest.empty()) return opts;
  for (;;) {
    const size_t semi = rest.find(';');
    CFX_TRY(applySection(spec, rest.substr(0, semi), opts));
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  return opts;
}

Plan choosePlan(const PlanRequest& req, const PlannerOptions& opts) {
  if (std::optional<Algorithm> a = pick(req, &opts)) return Plan{*a};
  return Plan{pick(req, nullptr).value_or(Algorithm::Ring)};
}

std::string describePlan(const PlanRequest& req, const Plan& plan, const PlannerOptions& opts) {
  std::string line = strprintf("%s %zu B on %d ranks: %s, slice %zu B", collectiveName(req.coll), req.bytes, req.nRanks,
                               algorithmName(plan.algorithm), req.sliceBytes);
  if (!pick(req, &opts)) {
    line += strprintf(" (NCCL_ALGO=%s allows no algorithm for this op; using the default)", opts.algoSpec.c_str());
  } else if (pick(req, nullptr) != plan.algorithm) {
    line += strprintf(" (chosen by NCCL_ALGO=%s)", opts.algoSpec.c_str());
  }
  return line;
}

}  // namespace cfx::coll
