// SPDX-License-Identifier: Apache-2.0
// MoE combine (collectives layer): the experts' output rows back to their tokens, weighted and summed in fp32.
//
// Every rank sends each source rank one message: the output rows of that source's assignments, gathered from the
// expert-major buffer in the order the source routed them (token, then k; moe.h backRows), zeros for assignments
// the bounded mode dropped. Every rank receives in one strand, in a fixed order: its own experts' rows first (read
// in place, no wire), then rank r - 1's message, r - 2's, ... (mod n), folding each row on arrival into its token's
// fp32 sum with its weight (prims::RowFold): the first contribution sets the sum, the last adds and rounds straight
// into the output row, a token with one expert is written at once. So the same routing gives the same bits whatever
// order the messages arrive in, and no row is copied into a packed buffer on either side.
//
// Why one receiving strand: the order of the fp32 additions is what fixes the result's bits. Senders run a strand
// per peer and never wait for each other, and a receiver's strand only waits for the peer it is at, whose send
// strand waits only for that receiver, so the schedule cannot deadlock. One thread runs all of a rank's strands, so
// taking the messages in turn costs no parallelism; r - s in step s spreads the first receives over every sender.
// Traffic per rank: one row per (token, expert) assignment each way, minus this rank's own; latency one message.
#include <algorithm>
#include <vector>

#include "collectives/moe.h"
#include "primitives/parallel.h"

namespace cfx::coll {

namespace {

using prims::RowFold;

// The receiving strand: own rows, then each peer's message in the fixed order.
Task foldAll(const MoeArgs& a, const std::vector<RowFold>* folds, prims::Prims& prims) {
  const MoeState& st = *a.state;
  const MoeRouting& m = st.routing;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const RowFold& own = (*folds)[static_cast<size_t>(r)];
  const std::vector<int64_t>& positions = m.backRows[static_cast<size_t>(r)];
  const auto* expertOut = a.at<const char>(MoeArgs::ExpertOut);
  const size_t rowBytes = st.config.outRowBytes();
  std::vector<char> zeros;
  for (size_t i = 0; i < own.nRows; ++i) {
    if (positions[i] < 0 && zeros.empty()) zeros.assign(rowBytes, 0);
    own.foldRow(i, positions[i] >= 0 ? expertOut + static_cast<size_t>(positions[i]) * rowBytes : zeros.data());
  }
  for (int s = 1; s < n; ++s) {
    const RowFold& fold = (*folds)[static_cast<size_t>(mod(r - s, n))];
    if (fold.nRows > 0) CFX_CO_TRY(co_await prims.recvFoldRows(mod(r - s, n), fold));
  }
  co_return Status();
}

}  // namespace

Task moeCombineDirect(const CollArgs& args, Plan, prims::Prims& prims) {
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
  if (c.topk > 1) st.acc.resize(m.nTokens * c.hidden);
  const bool weighted = !a.unweighted && !st.weights.empty();
  // Per rank: the weights of its assignments in message order, and the fold of its message.
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
  std::vector<prims::Region> back(un);
  std::vector<Task> strands;
  for (int s = 1; s < n; ++s) {
    const auto q = static_cast<size_t>(mod(r + s, n));
    if (m.backRows[q].empty()) continue;
    back[q] = prims::Region{const_cast<char*>(a.at<const char>(MoeArgs::ExpertOut)), rowBytes, rowBytes,
                            m.backRows[q].data(), m.backRows[q].size()};
    strands.push_back(verbStrand(prims.sendRows(static_cast<int>(q), back[q])));
  }
  strands.push_back(foldAll(a, &folds, prims));
  co_return co_await prims::Parallel(std::move(strands));
}

}  // namespace cfx::coll
