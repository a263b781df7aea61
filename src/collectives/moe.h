// SPDX-License-Identifier: Apache-2.0
// MoE dispatch and combine (collectives layer): what the two algorithms (moe_dispatch.cc, moe_combine.cc) share, and
// the routing arithmetic (moe_routing.cc), a pure function of the ids and the messages that can be tested alone.
//
// A dispatch sends every token (a row of `hidden` values) to the ranks of its top-k experts and leaves, on every
// rank, the rows its own experts received in expert-major order: local expert 0's rows first, each expert's rows
// ordered by (source rank, source token, k). A token whose k experts include several on one rank crosses the wire to
// that rank once, and the receiver copies it to each of its positions. A combine sends every expert output row back
// to its token's rank, which sums weight x output over the token's k experts in fp32 and rounds once.
//
// The messages of a dispatch, between every pair of ranks (zero-row messages are not sent; both ends know when):
//   1. header  MoeHeader: the configuration the sender runs with, how many token rows it sends, and whether its ids
//              were in range. Every rank receives every header, so every rank sees every disagreement and fails the
//              same way (InvalidArgument, naming the field and the rank), before any token moves.
//   2. routing topk + 1 int32 per row: the row's token, then its experts on the receiver as local indices in k order,
//              -1 after the last.
//   3. rows    the token rows, gathered straight from the caller's tensor into the transport's slots, scattered from
//              them straight into their expert-major positions (prims::Region), and the fp8 scales likewise; where
//              the transport can read the sender's memory, each row is copied once, straight from the tensor to its
//              position (the receiver knows the sender's rows: the tokens in the routing entries). With them, each
//              rank tells every source where it keeps the source's assignments (backRows), for the combine.
// The normal mode runs 1-2 as one op (cfxMoeExchangeCounts, so the caller learns the sizes before it allocates) and 3
// as the next; the bounded mode runs all three as one op into a buffer of `capacity` rows, dropping (and counting) the
// rows whose expert-major position falls past it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "common/status.h"
#include "primitives/prims.h"

namespace cfx::coll {

// What every rank of a dispatch must agree on (conflux.h cfxMoeConfig, validated by the api).
struct MoeConfig {
  int nExperts = 0;
  int topk = 0;
  size_t hidden = 0;
  DataType tokenType = DataType::Bfloat16;  // bf16, fp16, fp32, or fp8 e4m3 with a scale per kScaleBlock values
  DataType outType = DataType::Bfloat16;    // the combine's rows: bf16, fp16 or fp32
  DataType idType = DataType::Int32;        // Int32 or Int64
  bool bounded = false;
  size_t capacity = 0;          // bounded: rows this rank's receive buffer holds
  std::vector<int> expertRank;  // per expert: the rank that holds it
  // The combine's fp32 sums of one chunk of tokens take at most this many bytes (foldChunkTokens). A test knob: every
  // rank must use the same value; the api leaves the default.
  size_t foldChunkBytes = size_t{512} << 10;

  static constexpr size_t kScaleBlock = 128;
  bool scaled() const { return tokenType == DataType::Fp8E4M3; }
  size_t tokenRowBytes() const { return hidden * dataTypeSize(tokenType); }
  size_t scaleRowBytes() const { return scaled() ? hidden / kScaleBlock * sizeof(float) : 0; }
  size_t outRowBytes() const { return hidden * dataTypeSize(outType); }
  // Derived from expertRank: per expert its index among its rank's experts, per rank how many it holds.
  std::vector<int> localIndex;
  std::vector<int> localCount;
  void derive(int nRanks);
  // A digest of the expert-to-rank table, carried in the header.
  uint64_t mapDigest() const;
};

// The first message of a dispatch, identical in size on every rank. Trivially copyable: it travels as bytes.
struct MoeHeader {
  uint64_t magic;
  uint64_t mapDigest;
  uint64_t hidden;
  uint64_t capacity;
  uint64_t rows;      // token rows the sender sends to the receiver
  int64_t badToken;   // -1, or the sender's first token with an expert id out of range
  int64_t badId;      // ... and that id
  int32_t nExperts;
  int32_t topk;
  uint8_t tokenType;
  uint8_t outType;
  uint8_t idType;
  uint8_t bounded;
  uint32_t reserved;
};
inline constexpr uint64_t kMoeMagic = 0x3130524448454f4dull;  // "MOEHDR01"

// One dispatch's routing on this rank: written by the dispatch, read by the combine that follows it.
struct MoeRouting {
  size_t nTokens = 0;
  // This rank's tokens, per destination rank: the tokens (ascending) with an expert there, and for each such row
  // kMetaStride(topk) entries: the token, then the local indices of its experts there, in k order, -1 after the last.
  std::vector<std::vector<int64_t>> sendRows;
  std::vector<std::vector<int32_t>> sendMeta;
  // What arrived, per source rank: its rows' entries as it sent them, where each row is received (its first position
  // that is not dropped; -1 when all are), and where each of its (row, entry) assignments lies in expert-major order
  // (-1: dropped), which is also the order the combine sends the outputs back in; and where each fold chunk of the
  // source's tokens (foldChunkTokens) starts in backRows: chunk c is backRows[backChunks[c]..backChunks[c + 1]).
  std::vector<std::vector<int32_t>> recvMeta;
  std::vector<std::vector<int64_t>> recvTokens;  // the source's token of each row: where it lies in its tensor
  std::vector<std::vector<int64_t>> recvFirst;
  std::vector<std::vector<int64_t>> backRows;
  std::vector<std::vector<size_t>> backChunks;
  std::vector<std::pair<int64_t, int64_t>> copies;  // (from, to) positions of rows that go to several local experts
  // The combine's folds, per rank that holds experts of this rank's tokens (this rank included): per assignment, in
  // the order that rank sends them (token ascending, then k), the token, the weight's index (token * topk + k) and
  // the fold step. Every token's contributions are folded in one fixed order: this rank's own experts first, then
  // those of rank r - 1, r - 2, ... (mod n), each rank's in k order.
  std::vector<std::vector<int64_t>> foldTokens;
  std::vector<std::vector<int64_t>> foldWeights;
  std::vector<std::vector<prims::RowFold::Step>> foldSteps;
  // Where each fold chunk of this rank's tokens starts in foldTokens[p], as backChunks above.
  std::vector<std::vector<size_t>> foldChunks;
  // Where rank p keeps the output row of each of those assignments (its backRows for this rank, which it sends during
  // the dispatch), so the combine can read them straight out of p's memory where the transport allows.
  std::vector<std::vector<int64_t>> foldSrc;
  // Counts, for cfxMoeGetCounts and the dispatch's recvCounts.
  std::vector<int64_t> perLocalExpert;
  std::vector<int64_t> sentPerRank;    // token rows sent to each rank (a token once per rank)
  std::vector<int64_t> recvPerRank;    // token rows received from each rank
  std::vector<int64_t> sentPerExpert;  // this rank's assignments to each expert
  size_t recvRows = 0;                 // rows in the expert-major buffer (after drops)
  size_t dropped = 0;                  // assignments past the bound (bounded mode)
  bool placed = false;                 // the exchange completed: the rows may move
  bool dispatched = false;             // the rows moved: a combine may follow
};

// A dispatch handle's state, shared by its ops (which run in call order on the communicator).
struct MoeState {
  MoeConfig config;
  MoeRouting routing;
  std::vector<float> weights;  // nTokens * topk, from the last dispatch; empty: none given
  std::vector<float> acc;      // the combine's fp32 sums, one row per token
};

// One MoE op's arguments. The pointers are host memory (device buffers are staged by core, which rewrites them).
struct MoeArgs {
  enum class Phase : uint8_t {
    Exchange,  // normal mode, cfxMoeExchangeCounts: headers and routing
    Dispatch,  // normal mode, cfxMoeDispatch: rows, by the routing the exchange left
    Both,      // bounded mode, cfxMoeDispatch: all three
    Combine,   // cfxMoeCombine
  };
  // The buffers an op may touch, by index into `buffers` (core stages them, api fills their extents).
  enum Buffer : uint8_t { Ids, Tokens, Scales, Weights, RecvTokens, RecvScales, RecvCounts, ExpertOut, Out, kBuffers };
  struct Span {
    void* p = nullptr;
    size_t bytes = 0;
    bool in = false;
    bool out = false;
  };
  Phase phase = Phase::Exchange;
  std::shared_ptr<MoeState> state;
  size_t nTokens = 0;
  bool unweighted = false;  // combine: every weight is 1
  std::array<Span, kBuffers> buffers{};

  template <class T>
  T* at(Buffer b) const {
    return static_cast<T*>(buffers[b].p);
  }
};

// Routing entries per row: the token, then topk local experts.
inline size_t metaStride(int topk) { return static_cast<size_t>(topk) + 1; }
// The combine folds a source's tokens in chunks of this many, every rank's rows of one chunk before the next, so the
// fp32 sums of one chunk at a time stay in the caches instead of one row per token of the whole op going through
// memory twice. Both ends of every message derive the same chunks from the configuration.
size_t foldChunkTokens(const MoeConfig& config);

// Routing arithmetic (moe_routing.cc).
// The send side of `ids` (nTokens x topk of config.idType) on rank r of n: sendRows, sendMeta, sentPerRank,
// sentPerExpert and the combine's folds. Returns the first out-of-range id through *badToken / *badId (-1: none),
// leaving the routing empty.
void routeTokens(const MoeConfig& config, int r, int n, const void* ids, size_t nTokens, MoeRouting* routing,
                 int64_t* badToken, int64_t* badId);
// The receive side, once recvMeta holds every source's entries (this rank's own from sendMeta[r]): per local expert
// counts, every assignment's position (dropping those past config.capacity in bounded mode), recvFirst, backRows
// and copies. InvalidUsage naming the source when an entry is no local expert of this rank (a corrupted message).
Status placeRows(const MoeConfig& config, int r, int n, MoeRouting* routing);
// The header this rank sends to `peer`.
MoeHeader headerFor(const MoeConfig& config, const MoeRouting& routing, int peer, int64_t badToken, int64_t badId);
// Every rank's headers against this rank's configuration: InvalidArgument naming the first disagreement or the first
// rank with out-of-range ids (own = the header this rank sent itself, with its own ids' verdict).
Status checkHeaders(const MoeConfig& config, int r, const std::vector<MoeHeader>& received);

}  // namespace cfx::coll
