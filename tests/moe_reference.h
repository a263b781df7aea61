// SPDX-License-Identifier: Apache-2.0
// The MoE routing the tests check against (test support, header only): which (source, token, k) assignments each
// rank's experts receive in expert-major order, and the order a combine adds a token's contributions in, written from
// conflux.h's description alone, sequentially, without the library's code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cfx::moetest {

struct Setup {
  int nRanks = 1;
  int nExperts = 1;
  int topk = 1;
  std::vector<int> expertRank;  // empty: contiguous blocks
  bool bounded = false;
  size_t capacity = 0;  // bounded: rows a rank's receive buffer holds

  // Contiguous blocks: rank p holds [E / n * p + min(p, E % n), ...), the first E % n ranks one expert more.
  int rankOf(int e) const {
    if (!expertRank.empty()) return expertRank[static_cast<size_t>(e)];
    const int base = nExperts / nRanks;
    const int extra = nExperts % nRanks;
    for (int p = 0; p < nRanks; ++p) {
      const int begin = base * p + std::min(p, extra);
      const int end = base * (p + 1) + std::min(p + 1, extra);
      if (e >= begin && e < end) return p;
    }
    return -1;
  }
  // Rank p's experts in increasing id: its local experts 0, 1, ...
  std::vector<int> localExperts(int p) const {
    std::vector<int> local;
    for (int e = 0; e < nExperts; ++e) {
      if (rankOf(e) == p) local.push_back(e);
    }
    return local;
  }
};

// One row of an expert-major buffer.
struct Slot {
  int source;
  size_t token;
  int k;
  int localExpert;
};

// Rank p's expert-major rows: by local expert, then source rank, token and k. ids[s] holds rank s's tokens' topk ids.
// In bounded mode the rows at capacity and past it are dropped: counted in *dropped, not returned. perLocal (optional)
// gets the rows each local expert keeps.
inline std::vector<Slot> expertMajor(const Setup& s, const std::vector<std::vector<int64_t>>& ids, int p,
                                     size_t* dropped = nullptr, std::vector<long long>* perLocal = nullptr) {
  const std::vector<int> local = s.localExperts(p);
  const auto k = static_cast<size_t>(s.topk);
  std::vector<Slot> rows;
  size_t lost = 0;
  if (perLocal != nullptr) perLocal->assign(local.size(), 0);
  for (size_t j = 0; j < local.size(); ++j) {
    for (int src = 0; src < s.nRanks; ++src) {
      const std::vector<int64_t>& v = ids[static_cast<size_t>(src)];
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] != local[j]) continue;
        if (s.bounded && rows.size() >= s.capacity) {
          ++lost;
          continue;
        }
        rows.push_back({src, i / k, static_cast<int>(i % k), static_cast<int>(j)});
        if (perLocal != nullptr) ++(*perLocal)[j];
      }
    }
  }
  if (dropped != nullptr) *dropped = lost;
  return rows;
}

// The k indices of rank r's token (its topk ids at tokenIds) in the order the combine adds them: this rank's own
// experts first, then those of rank r - 1, r - 2, ... (mod n), each rank's in k order.
inline std::vector<int> foldOrder(const Setup& s, int r, const int64_t* tokenIds) {
  std::vector<int> order(static_cast<size_t>(s.topk));
  for (int j = 0; j < s.topk; ++j) order[static_cast<size_t>(j)] = j;
  auto step = [&](int j) {
    const int p = s.rankOf(static_cast<int>(tokenIds[j]));
    return ((r - p) % s.nRanks + s.nRanks) % s.nRanks;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return step(a) < step(b); });
  return order;
}

// Where every assignment (rank s, token t, k) landed: position[s][t * topk + k] on rank rankOf(id), -1 if dropped.
inline std::vector<std::vector<int64_t>> positions(const Setup& s, const std::vector<std::vector<int64_t>>& ids) {
  std::vector<std::vector<int64_t>> where(ids.size());
  for (size_t src = 0; src < ids.size(); ++src) where[src].assign(ids[src].size(), -1);
  for (int p = 0; p < s.nRanks; ++p) {
    const std::vector<Slot> rows = expertMajor(s, ids, p);
    for (size_t i = 0; i < rows.size(); ++i) {
      where[static_cast<size_t>(rows[i].source)][rows[i].token * static_cast<size_t>(s.topk) +
                                                  static_cast<size_t>(rows[i].k)] = static_cast<int64_t>(i);
    }
  }
  return where;
}

}  // namespace cfx::moetest
