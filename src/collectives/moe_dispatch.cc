// SPDX-License-Identifier: Apache-2.0
// MoE dispatch, every peer at once (collectives layer). moe.h describes the messages and the expert-major order.
//
//   exchange  every pair swaps headers (one round), then the routing entries of the rows it will send (one round);
//             every rank then places every arriving row (moe_routing.cc placeRows)
//   rows      per peer, one message of token rows gathered from the caller's tensor (prims::Region over the token
//             indices) and scattered on arrival to each row's first expert-major position; fp8 scales follow as a
//             second message the same way; this rank's own rows are copied locally; rows bound for several local
//             experts are then copied to their other positions
//
// Every send and every receive is a strand of its own, as in alltoall_direct.cc's strand form: no strand waits for
// another of its rank, so the schedule cannot deadlock, and a rank waits for its peers once per round. Token bytes
// cross each pair once per (token, rank), never once per (token, expert), and are copied twice on the way (into the
// slot, out of it) with no packed buffer on either side.
// Traffic per rank: its tokens' rows times the distinct ranks of their experts, plus 64 bytes and topk x 4 bytes per
// row of routing; latency three messages (two rounds, then the rows), the normal mode's third in a second op.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/moe.h"
#include "common/log.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

using prims::Region;

// Headers and routing entries, and the routing that follows from them.
Coro exchange(const MoeArgs& a, prims::Prims& prims) {
  MoeState& st = *a.state;
  const MoeConfig& c = st.config;
  MoeRouting& m = st.routing;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const auto un = static_cast<size_t>(n);
  m.placed = false;
  m.dispatched = false;
  int64_t badToken = -1;
  int64_t badId = -1;
  routeTokens(c, r, n, a.at<const void>(MoeArgs::Ids), a.nTokens, &m, &badToken, &badId);
  std::vector<MoeHeader> out(un);
  std::vector<MoeHeader> in(un);
  for (size_t p = 0; p < un; ++p) out[p] = headerFor(c, m, static_cast<int>(p), badToken, badId);
  in[static_cast<size_t>(r)] = out[static_cast<size_t>(r)];
  std::vector<Coro> strands;
  for (int s = 1; s < n; ++s) {
    const int q = mod(r + s, n);
    strands.push_back(verbStrand(prims.send(q, &out[static_cast<size_t>(q)], sizeof(MoeHeader))));
  }
  for (int s = 1; s < n; ++s) {
    const int q = mod(r - s, n);
    strands.push_back(verbStrand(prims.recv(q, &in[static_cast<size_t>(q)], sizeof(MoeHeader))));
  }
  CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
  // Every rank holds every header now: a disagreement fails every rank alike, before anything else moves.
  CFX_CO_TRY(checkHeaders(c, r, in));
  m.recvMeta.assign(un, {});
  m.recvMeta[static_cast<size_t>(r)] = m.sendMeta[static_cast<size_t>(r)];
  strands.clear();
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r + s, n));
    if (m.sendMeta[q].empty()) continue;
    strands.push_back(verbStrand(prims.send(static_cast<int>(q), m.sendMeta[q].data(), m.sendMeta[q].size() * 4)));
  }
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r - s, n));
    if (in[q].rows == 0) continue;
    m.recvMeta[q].resize(in[q].rows * metaStride(c.topk));
    strands.push_back(verbStrand(prims.recv(static_cast<int>(q), m.recvMeta[q].data(), m.recvMeta[q].size() * 4)));
  }
  CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
  CFX_CO_TRY(placeRows(c, r, n, &m));
  m.placed = true;
  co_return Status();
}

// What one pair's strand moves in one direction, in this order: the sender's token rows and (fp8) their scales, then
// where the sender keeps the receiver's assignments (for the combine). The receiving strand takes them in the same
// order; either side skips what has no rows.
struct Flow {
  Region tokens, scales;        // rows (send: the tensor's; receive: expert-major positions)
  Region srcTokens, srcScales;  // receive: where those rows lie in the sender's tensor (a direct message's span)
  bool scaled = false;
  const int64_t* positions = nullptr;  // backRows out, or foldSrc in
  size_t nPositions = 0;
};

Coro sendFlow(prims::Prims& prims, int q, const Flow* f) {
  if (f->tokens.nRows > 0) {
    CFX_CO_TRY(co_await prims.sendRows(q, f->tokens, /*receiverKnowsRows=*/true));
    if (f->scaled) CFX_CO_TRY(co_await prims.sendRows(q, f->scales, /*receiverKnowsRows=*/true));
  }
  if (f->nPositions > 0) CFX_CO_TRY(co_await prims.send(q, f->positions, f->nPositions * sizeof(int64_t)));
  co_return Status();
}

Coro recvFlow(prims::Prims& prims, int q, const Flow* f) {
  if (f->tokens.nRows > 0) {
    CFX_CO_TRY(co_await prims.recvRows(q, f->tokens, &f->srcTokens));
    if (f->scaled) CFX_CO_TRY(co_await prims.recvRows(q, f->scales, &f->srcScales));
  }
  if (f->nPositions > 0) {
    CFX_CO_TRY(co_await prims.recv(q, const_cast<int64_t*>(f->positions), f->nPositions * sizeof(int64_t)));
  }
  co_return Status();
}

// Rows from `from` (row list) to `to` (position list, -1: dropped), both with rows of rowBytes.
void copyRows(const char* from, const std::vector<int64_t>& rows, char* to, const std::vector<int64_t>& positions,
              size_t rowBytes) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (positions[i] >= 0) {
      std::memcpy(to + static_cast<size_t>(positions[i]) * rowBytes, from + static_cast<size_t>(rows[i]) * rowBytes,
                  rowBytes);
    }
  }
}

Coro selfRows(const MoeArgs& a, int r) {
  const MoeState& st = *a.state;
  const MoeRouting& m = st.routing;
  const auto ur = static_cast<size_t>(r);
  copyRows(a.at<const char>(MoeArgs::Tokens), m.sendRows[ur], a.at<char>(MoeArgs::RecvTokens), m.recvFirst[ur],
           st.config.tokenRowBytes());
  if (st.config.scaled()) {
    copyRows(a.at<const char>(MoeArgs::Scales), m.sendRows[ur], a.at<char>(MoeArgs::RecvScales), m.recvFirst[ur],
             st.config.scaleRowBytes());
  }
  co_return Status();
}

// What the caller learns in stream order: rows per local expert, then the rows dropped past the bound.
void writeCounts(const MoeArgs& a, const MoeRouting& m) {
  auto* counts = a.at<int32_t>(MoeArgs::RecvCounts);
  if (counts == nullptr) return;
  for (size_t e = 0; e < m.perLocalExpert.size(); ++e) counts[e] = static_cast<int32_t>(m.perLocalExpert[e]);
  counts[m.perLocalExpert.size()] = static_cast<int32_t>(m.dropped);
}

Coro moveRows(const MoeArgs& a, prims::Prims& prims) {
  MoeState& st = *a.state;
  const MoeConfig& c = st.config;
  MoeRouting& m = st.routing;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const auto un = static_cast<size_t>(n);
  if (!m.placed || m.nTokens != a.nTokens) {
    co_return Status::error(Errc::InvalidUsage,
                            strprintf("MoE dispatch of %zu tokens on rank %d: the routing counted for it is missing "
                                      "or was for %zu tokens (call cfxMoeExchangeCounts with the same ids first)",
                                      a.nTokens, r, m.nTokens));
  }
  const bool scaled = c.scaled();
  auto* tokens = const_cast<char*>(a.at<const char>(MoeArgs::Tokens));
  auto* scales = const_cast<char*>(a.at<const char>(MoeArgs::Scales));
  auto* recvTokens = a.at<char>(MoeArgs::RecvTokens);
  auto* recvScales = a.at<char>(MoeArgs::RecvScales);
  const size_t tokenRow = c.tokenRowBytes();
  const size_t scaleRow = c.scaleRowBytes();
  // The flows live in this frame while the strands run; sized once, so the strands' pointers stay valid.
  std::vector<Flow> out(un);
  std::vector<Flow> in(un);
  m.foldSrc.assign(un, {});
  std::vector<Coro> strands;
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r + s, n));
    Flow& f = out[q];
    f.tokens = Region{tokens, tokenRow, tokenRow, m.sendRows[q].data(), m.sendRows[q].size()};
    f.scales = Region{scales, scaleRow, scaleRow, m.sendRows[q].data(), m.sendRows[q].size()};
    f.scaled = scaled;
    f.positions = m.backRows[q].data();
    f.nPositions = m.backRows[q].size();
    if (f.tokens.nRows > 0 || f.nPositions > 0) strands.push_back(sendFlow(prims, static_cast<int>(q), &f));
  }
  if (!m.sendRows[static_cast<size_t>(r)].empty()) strands.push_back(selfRows(a, r));
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r - s, n));
    Flow& f = in[q];
    const size_t rows = m.recvFirst[q].size();
    f.tokens = Region{recvTokens, tokenRow, tokenRow, m.recvFirst[q].data(), rows};
    f.scales = Region{recvScales, scaleRow, scaleRow, m.recvFirst[q].data(), rows};
    f.srcTokens = Region{nullptr, tokenRow, tokenRow, m.recvTokens[q].data(), rows};
    f.srcScales = Region{nullptr, scaleRow, scaleRow, m.recvTokens[q].data(), rows};
    f.scaled = scaled;
    m.foldSrc[q].resize(m.foldTokens[q].size());
    f.positions = m.foldSrc[q].data();
    f.nPositions = m.foldSrc[q].size();
    if (rows > 0 || f.nPositions > 0) strands.push_back(recvFlow(prims, static_cast<int>(q), &f));
  }
  CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
  for (const auto& [from, to] : m.copies) {
    std::memcpy(recvTokens + static_cast<size_t>(to) * tokenRow, recvTokens + static_cast<size_t>(from) * tokenRow,
                tokenRow);
    if (scaled) {
      std::memcpy(recvScales + static_cast<size_t>(to) * scaleRow, recvScales + static_cast<size_t>(from) * scaleRow,
                  scaleRow);
    }
  }
  const auto* weights = a.at<const float>(MoeArgs::Weights);
  if (weights != nullptr) {
    st.weights.assign(weights, weights + a.nTokens * static_cast<size_t>(c.topk));
  } else {
    st.weights.clear();
  }
  writeCounts(a, m);
  if (m.dropped > 0) {
    CFX_WARN("rank %d: MoE dispatch dropped %zu token assignments past its bound of %zu rows (they were not "
             "delivered, and the combine adds zero for them); raise cfxMoeConfig.maxRecvTokens",
             r, m.dropped, c.capacity);
  }
  m.dispatched = true;
  co_return Status();
}

}  // namespace

Coro moeDispatchDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const MoeArgs& a = *args.moe;
  if (a.phase == MoeArgs::Phase::Exchange || a.phase == MoeArgs::Phase::Both) CFX_CO_TRY(co_await exchange(a, prims));
  if (a.phase == MoeArgs::Phase::Dispatch || a.phase == MoeArgs::Phase::Both) CFX_CO_TRY(co_await moveRows(a, prims));
  co_return Status();
}

}  // namespace cfx::coll
