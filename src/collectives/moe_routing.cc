// SPDX-License-Identifier: Apache-2.0
// MoE routing arithmetic (collectives layer): from top-k ids to the rows each rank sends, from the routing entries
// each rank received to expert-major positions, and the header check. No I/O; moe.h has the contract.
#include <algorithm>
#include <cstring>

#include "collectives/moe.h"

namespace cfx::coll {

namespace {

int64_t idAt(const MoeConfig& c, const void* ids, size_t i) {
  if (c.idType == DataType::Int64) {
    int64_t v;
    std::memcpy(&v, static_cast<const char*>(ids) + i * sizeof v, sizeof v);
    return v;
  }
  int32_t v;
  std::memcpy(&v, static_cast<const char*>(ids) + i * sizeof v, sizeof v);
  return v;
}

// Where each chunk of `chunk` tokens starts in a list whose entries belong to ascending tokens: starts[c] is the
// first entry of a token >= c * chunk, for c = 0 .. chunks (the last is the list's size).
std::vector<size_t> chunkStarts(const std::vector<int64_t>& tokenOfEntry, size_t chunk) {
  std::vector<size_t> starts;
  const size_t chunks = tokenOfEntry.empty() ? 0 : static_cast<size_t>(tokenOfEntry.back()) / chunk + 1;
  for (size_t c = 0; c <= chunks; ++c) {
    const auto first = static_cast<int64_t>(c * chunk);
    starts.push_back(static_cast<size_t>(std::lower_bound(tokenOfEntry.begin(), tokenOfEntry.end(), first) -
                                         tokenOfEntry.begin()));
  }
  return starts;
}


void fnv(uint64_t* h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    *h ^= static_cast<uint8_t>(v >> (8 * i));
    *h *= 1099511628211ull;
  }
}

}  // namespace

size_t foldChunkTokens(const MoeConfig& config) {
  // L2 caches hold half a megabyte of sums (the default) beside the rows in flight.
  return std::max<size_t>(1, config.foldChunkBytes / (config.hidden * sizeof(float)));
}

void MoeConfig::derive(int nRanks) {
  localIndex.assign(expertRank.size(), 0);
  localCount.assign(static_cast<size_t>(nRanks), 0);
  for (size_t e = 0; e < expertRank.size(); ++e) {
    localIndex[e] = localCount[static_cast<size_t>(expertRank[e])]++;
  }
}

uint64_t MoeConfig::mapDigest() const {
  uint64_t h = 1469598103934665603ull;
  for (int rank : expertRank) fnv(&h, static_cast<uint64_t>(rank));
  return h;
}

void routeTokens(const MoeConfig& c, int r, int n, const void* ids, size_t nTokens, MoeRouting* routing,
                 int64_t* badToken, int64_t* badId) {
  const auto un = static_cast<size_t>(n);
  const auto k = static_cast<size_t>(c.topk);
  const size_t stride = metaStride(c.topk);
  MoeRouting& m = *routing;
  m.nTokens = nTokens;
  for (auto* v : {&m.sendRows, &m.foldTokens, &m.foldWeights}) v->assign(un, {});
  m.sendMeta.assign(un, {});
  m.foldSteps.assign(un, {});
  m.sentPerRank.assign(un, 0);
  m.sentPerExpert.assign(static_cast<size_t>(c.nExperts), 0);
  *badToken = -1;
  *badId = -1;
  for (size_t i = 0; i < nTokens * k; ++i) {
    const int64_t e = idAt(c, ids, i);
    if (e < 0 || e >= c.nExperts) {
      *badToken = static_cast<int64_t>(i / k);
      *badId = e;
      m.nTokens = 0;
      return;
    }
  }
  std::vector<int> ranks(k);
  std::vector<size_t> keys(k);
  std::vector<int64_t> lastToken(un, -1);
  std::vector<size_t> filled(un, 0);
  for (size_t t = 0; t < nTokens; ++t) {
    size_t first = 0;
    size_t last = 0;
    for (size_t j = 0; j < k; ++j) {
      const auto e = static_cast<size_t>(idAt(c, ids, t * k + j));
      const int p = c.expertRank[e];
      const auto up = static_cast<size_t>(p);
      ranks[j] = p;
      ++m.sentPerExpert[e];
      if (lastToken[up] != static_cast<int64_t>(t)) {  // the token's first expert on p: one row to p
        lastToken[up] = static_cast<int64_t>(t);
        filled[up] = 0;
        m.sendRows[up].push_back(static_cast<int64_t>(t));
        m.sendMeta[up].resize(m.sendMeta[up].size() + stride, -1);
        m.sendMeta[up][m.sendMeta[up].size() - stride] = static_cast<int32_t>(t);
        ++m.sentPerRank[up];
      }
      m.sendMeta[up][m.sendMeta[up].size() - k + filled[up]++] = c.localIndex[e];
      // The fold order: own experts first, then rank r - 1, r - 2, ...; within a rank, k order.
      keys[j] = static_cast<size_t>(mod(r - p, n)) * k + j;
      if (keys[j] < keys[first]) first = j;
      if (keys[j] > keys[last]) last = j;
    }
    for (size_t j = 0; j < k; ++j) {
      const auto up = static_cast<size_t>(ranks[j]);
      using Step = prims::RowFold::Step;
      const Step step = k == 1 ? Step::Only : j == first ? Step::First : j == last ? Step::Last : Step::Middle;
      m.foldTokens[up].push_back(static_cast<int64_t>(t));
      m.foldWeights[up].push_back(static_cast<int64_t>(t * k + j));
      m.foldSteps[up].push_back(step);
    }
  }
  m.foldChunks.assign(un, {});
  for (size_t p = 0; p < un; ++p) m.foldChunks[p] = chunkStarts(m.foldTokens[p], foldChunkTokens(c));
}

Status placeRows(const MoeConfig& c, int r, int n, MoeRouting* routing) {
  MoeRouting& m = *routing;
  const auto un = static_cast<size_t>(n);
  const auto k = static_cast<size_t>(c.topk);
  const size_t stride = metaStride(c.topk);
  const auto local = static_cast<size_t>(c.localCount[static_cast<size_t>(r)]);
  std::vector<int64_t> count(local, 0);
  for (size_t s = 0; s < un; ++s) {
    for (size_t i = 0; i < m.recvMeta[s].size(); ++i) {
      const int32_t e = m.recvMeta[s][i];
      const bool token = i % stride == 0;
      const bool ascending = !token || i == 0 || e > m.recvMeta[s][i - stride];
      if ((token && (e < 0 || !ascending)) || (!token && (e < -1 || e >= static_cast<int32_t>(local)))) {
        return Status::error(Errc::InvalidUsage,
                             strprintf("MoE dispatch: rank %zu sent routing entry %d at %zu, but rank %d holds %zu "
                                       "experts (a corrupted message, or ranks with different expert-to-rank maps)",
                                       s, static_cast<int>(e), i, r, local));
      }
      if (!token && e >= 0) ++count[static_cast<size_t>(e)];
    }
  }
  std::vector<int64_t> cursor(local, 0);
  int64_t total = 0;
  for (size_t e = 0; e < local; ++e) {
    cursor[e] = total;
    total += count[e];
  }
  const auto capacity = static_cast<int64_t>(c.capacity);
  m.perLocalExpert.assign(local, 0);
  for (size_t e = 0; e < local; ++e) {
    m.perLocalExpert[e] = c.bounded ? std::clamp<int64_t>(capacity - cursor[e], 0, count[e]) : count[e];
  }
  m.recvFirst.assign(un, {});
  m.recvTokens.assign(un, {});
  m.backRows.assign(un, {});
  m.backChunks.assign(un, {});
  m.recvPerRank.assign(un, 0);
  m.copies.clear();
  m.dropped = 0;
  const size_t chunk = foldChunkTokens(c);
  for (size_t s = 0; s < un; ++s) {
    const size_t rows = m.recvMeta[s].size() / stride;
    m.recvPerRank[s] = static_cast<int64_t>(rows);
    m.recvFirst[s].reserve(rows);
    for (size_t i = 0; i < rows; ++i) {
      m.recvTokens[s].push_back(m.recvMeta[s][i * stride]);
      const auto chunkOf = static_cast<size_t>(m.recvMeta[s][i * stride]) / chunk;
      while (m.backChunks[s].size() <= chunkOf) m.backChunks[s].push_back(m.backRows[s].size());
      int64_t first = -1;
      for (size_t j = 0; j < k; ++j) {
        const int32_t e = m.recvMeta[s][i * stride + 1 + j];
        if (e < 0) break;
        int64_t pos = cursor[static_cast<size_t>(e)]++;
        if (c.bounded && pos >= capacity) {
          pos = -1;
          ++m.dropped;
        }
        m.backRows[s].push_back(pos);
        if (pos < 0) continue;
        if (first < 0) {
          first = pos;
        } else {
          m.copies.emplace_back(first, pos);
        }
      }
      m.recvFirst[s].push_back(first);
    }
    m.backChunks[s].push_back(m.backRows[s].size());
  }
  m.recvRows = static_cast<size_t>(c.bounded ? std::min(total, capacity) : total);
  return Status();
}

namespace {

// The header's configuration fields, the same for every peer.
MoeHeader configHeader(const MoeConfig& c) {
  MoeHeader h{};
  h.magic = kMoeMagic;
  h.mapDigest = c.mapDigest();
  h.hidden = c.hidden;
  h.capacity = c.bounded ? c.capacity : 0;
  h.badToken = -1;
  h.badId = -1;
  h.nExperts = c.nExperts;
  h.topk = c.topk;
  h.tokenType = static_cast<uint8_t>(c.tokenType);
  h.outType = static_cast<uint8_t>(c.outType);
  h.idType = static_cast<uint8_t>(c.idType);
  h.bounded = c.bounded ? 1 : 0;
  return h;
}

}  // namespace

MoeHeader headerFor(const MoeConfig& c, const MoeRouting& routing, int peer, int64_t badToken, int64_t badId) {
  MoeHeader h = configHeader(c);
  h.rows = badToken >= 0 ? 0 : routing.sendRows[static_cast<size_t>(peer)].size();
  h.badToken = badToken;
  h.badId = badId;
  return h;
}

Status checkHeaders(const MoeConfig& c, int r, const std::vector<MoeHeader>& received) {
  const MoeHeader mine = configHeader(c);
  auto differ = [&](int p, const char* what, const std::string& theirs, const std::string& ours) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("MoE dispatch: ranks disagree on the configuration: rank %d has %s %s, this rank "
                                   "(%d) %s; every rank must create its handle with the same cfxMoeConfig",
                                   p, what, theirs.c_str(), r, ours.c_str()));
  };
  auto type = [](uint8_t t) { return std::string(dataTypeName(static_cast<DataType>(t))); };
  for (size_t p = 0; p < received.size(); ++p) {
    const MoeHeader& h = received[p];
    const int rank = static_cast<int>(p);
    if (h.magic != kMoeMagic) {
      return Status::error(Errc::InvalidUsage, strprintf("MoE dispatch: rank %d sent no MoE header (it called another "
                                                         "operation, or another library version)", rank));
    }
    if (h.hidden != mine.hidden) return differ(rank, "hidden", std::to_string(h.hidden), std::to_string(mine.hidden));
    if (h.tokenType != mine.tokenType) return differ(rank, "token type", type(h.tokenType), type(mine.tokenType));
    if (h.outType != mine.outType) return differ(rank, "output type", type(h.outType), type(mine.outType));
    if (h.idType != mine.idType) return differ(rank, "id type", type(h.idType), type(mine.idType));
    if (h.nExperts != mine.nExperts) {
      return differ(rank, "experts", std::to_string(h.nExperts), std::to_string(mine.nExperts));
    }
    if (h.topk != mine.topk) return differ(rank, "topk", std::to_string(h.topk), std::to_string(mine.topk));
    if (h.bounded != mine.bounded || h.capacity != mine.capacity) {
      auto mode = [](const MoeHeader& x) {
        return x.bounded ? "bounded mode (" + std::to_string(x.capacity) + " rows)" : std::string("normal mode");
      };
      return differ(rank, "mode", mode(h), mode(mine));
    }
    if (h.mapDigest != mine.mapDigest) return differ(rank, "expert-to-rank map", "one table", "another");
  }
  for (size_t p = 0; p < received.size(); ++p) {
    if (received[p].badToken >= 0) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("MoE dispatch: rank %zu's expert ids are out of range: its token %lld has "
                                     "expert id %lld (experts are 0..%d)",
                                     p, static_cast<long long>(received[p].badToken),
                                     static_cast<long long>(received[p].badId), c.nExperts - 1));
    }
  }
  return Status();
}

}  // namespace cfx::coll
