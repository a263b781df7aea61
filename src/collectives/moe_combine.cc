// SPDX-License-Identifier: Apache-2.0
// MoE combine (collectives layer): the experts' output rows back to their tokens, weighted and summed in fp32.
//
// Every rank sends each source rank the output rows of that source's assignments, gathered from the expert-major
// buffer in the order the source routed them (token, then k; moe.h backRows), zeros for assignments the bounded mode
// dropped. Every rank receives in one strand, in a fixed order, folding each row on arrival into its token's fp32 sum
// with its weight (prims::RowFold): the first contribution sets the sum, the last adds and rounds straight into the
// output row, a token with one expert is written at once. The order is per chunk of the receiver's tokens
// (foldChunkTokens): its own experts' rows of the chunk first (read in place, no wire), then rank r - 1's message for
// the chunk, r - 2's, ... (mod n). So the same routing gives the same bits whatever order the messages arrive in, no
// row is copied into a packed buffer on either side, and the sums of one chunk at a time live in the caches (a sum
// per token of the whole op went through memory twice: as much traffic as the rows themselves).
//
// Why one receiving strand: the order of the fp32 additions is what fixes the result's bits. Senders run a strand
// per peer that sends its chunks in order and never waits for another strand, and a receiver's strand only waits for
// the peer and chunk it is at, whose send strand waits only for that receiver, so the schedule cannot deadlock. One
// thread runs all of a rank's strands, so taking the messages in turn costs no parallelism; r - s in step s spreads
// the first receives over every sender. A chunk's message to a rank is skipped on both sides when it has no rows:
// each side knows the tokens of the rows (moe.h backChunks, foldChunks).
// Traffic per rank: one row per (token, expert) assignment each way, minus this rank's own; latency one message per
// chunk, pipelined.
#include <algorithm>
#include <vector>

#include "collectives/moe.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

using prims::Region;
using prims::RowFold;

// The part of `fold` (every row of one peer's message) that chunk [begin, end) of its rows holds, summing into acc
// rows from token firstToken on.
RowFold chunkOf(const RowFold& fold, size_t begin, size_t end, int64_t firstToken) {
  RowFold f = fold;
  f.tokens += begin;
  f.steps += begin;
  if (f.weights != nullptr) f.weights += begin;
  f.nRows = end - begin;
  f.accFirstToken = firstToken;
  return f;
}

// One peer's messages, chunk by chunk.
Coro sendChunks(prims::Prims& prims, int q, const char* expertOut, size_t rowBytes, const std::vector<int64_t>* rows,
                const std::vector<size_t>* chunks) {
  for (size_t c = 0; c + 1 < chunks->size(); ++c) {
    const size_t begin = (*chunks)[c];
    const size_t end = (*chunks)[c + 1];
    if (begin == end) continue;
    const Region region{const_cast<char*>(expertOut), rowBytes, rowBytes, rows->data() + begin, end - begin};
    CFX_CO_TRY(co_await prims.sendRows(q, region, /*receiverKnowsRows=*/true));
  }
  co_return Status();
}

// The receiving strand: per chunk, own rows, then each peer's message in the fixed order.
Coro foldAll(const MoeArgs& a, const std::vector<RowFold>* folds, prims::Prims& prims) {
  const MoeState& st = *a.state;
  const MoeRouting& m = st.routing;
  const int n = prims.nRanks();
  const auto r = static_cast<size_t>(prims.rank());
  const std::vector<int64_t>& positions = m.backRows[r];
  const auto* expertOut = a.at<const char>(MoeArgs::ExpertOut);
  const size_t rowBytes = st.config.outRowBytes();
  const size_t chunk = foldChunkTokens(st.config);
  std::vector<char> zeros;
  for (size_t c = 0; c * chunk < m.nTokens; ++c) {
    const auto firstToken = static_cast<int64_t>(c * chunk);
    auto range = [&](size_t p, size_t* begin, size_t* end) {
      const std::vector<size_t>& starts = m.foldChunks[p];
      *begin = c < starts.size() ? starts[c] : 0;
      *end = c + 1 < starts.size() ? starts[c + 1] : *begin;
    };
    size_t begin = 0;
    size_t end = 0;
    range(r, &begin, &end);
    const RowFold own = chunkOf((*folds)[r], begin, end, firstToken);
    for (size_t i = begin; i < end; ++i) {
      if (positions[i] < 0 && zeros.empty()) zeros.assign(rowBytes, 0);
      own.foldRow(i - begin, positions[i] >= 0 ? expertOut + static_cast<size_t>(positions[i]) * rowBytes : zeros.data());
    }
    for (int s = 1; s < n; ++s) {
      const int p = mod(static_cast<int>(r) - s, n);
      range(static_cast<size_t>(p), &begin, &end);
      if (begin == end) continue;
      const RowFold fold = chunkOf((*folds)[static_cast<size_t>(p)], begin, end, firstToken);
      // Where p keeps these rows (it told this rank during the dispatch): read in place when p posts them direct.
      const Region src{nullptr, rowBytes, rowBytes, m.foldSrc[static_cast<size_t>(p)].data() + begin, end - begin};
      CFX_CO_TRY(co_await prims.recvFoldRows(p, fold, &src));
    }
  }
  co_return Status();
}

}  // namespace

Coro moeCombineDirect(const CollArgs& args, Plan, prims::Prims& prims) {
  const MoeArgs& a = *args.moe;
  MoeState& st = *a.state;
  const MoeConfig& c = st.config;
  const MoeRouting& m = st.routing;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const auto un = static_cast<size_t>(n);
  if (!m.dispatched) {
    co_return Status::error(Errc::InvalidUsage, strprintf("MoE combine on rank %d: this handle's last dispatch did not "
                                                          "complete; dispatch before combining", r));
  }
  const size_t rowBytes = c.outRowBytes();
  if (c.topk > 1) st.acc.resize(std::min(m.nTokens, foldChunkTokens(c)) * c.hidden);
  const bool weighted = !a.unweighted && !st.weights.empty();
  // Per rank: the weights of its assignments in message order, and the fold of all its rows (cut into chunks).
  std::vector<std::vector<float>> weights(un);
  std::vector<RowFold> folds(un);
  for (size_t p = 0; p < un; ++p) {
    RowFold& f = folds[p];
    f.valueType = c.outType;
    f.rowElems = c.hidden;
    f.acc = st.acc.data();
    f.accStride = c.hidden;
    f.out = a.at<char>(MoeArgs::Out);
    f.outStride = rowBytes;
    f.tokens = m.foldTokens[p].data();
    f.steps = m.foldSteps[p].data();
    f.nRows = m.foldTokens[p].size();
    if (weighted) {
      weights[p].resize(f.nRows);
      for (size_t i = 0; i < f.nRows; ++i) weights[p][i] = st.weights[static_cast<size_t>(m.foldWeights[p][i])];
      f.weights = weights[p].data();
    }
  }
  std::vector<Coro> strands;
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r + s, n));
    if (m.backRows[q].empty()) continue;
    strands.push_back(sendChunks(prims, static_cast<int>(q), a.at<const char>(MoeArgs::ExpertOut), rowBytes,
                                 &m.backRows[q], &m.backChunks[q]));
  }
  strands.push_back(foldAll(a, &folds, prims));
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
