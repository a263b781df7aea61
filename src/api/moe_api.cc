// SPDX-License-Identifier: Apache-2.0
// MoE dispatch and combine entry points (api layer): conflux.h "MoE dispatch and combine". A handle holds the
// configuration and the routing state its ops share (collectives/moe.h), and what the calls themselves must remember
// to size the next call's buffers (the rows counted, the tokens dispatched).
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "api/api_call.h"
#include "api/collective_call.h"
#include "collectives/moe.h"
#include "common/cuda_driver.h"
#include "conflux.h"
#include "core/group.h"

namespace cfx::api {
namespace {

using coll::MoeArgs;

struct MoeHandle {
  ncclComm_t comm = nullptr;
  int nRanks = 0;
  int localExperts = 0;
  std::shared_ptr<coll::MoeState> state;
  // Call-time facts (the ops' own state may not have run yet on a stream).
  bool counted = false;        // normal mode: an exchange completed
  size_t countedTokens = 0;
  size_t countedRows = 0;
  bool dispatched = false;     // a dispatch was issued
  size_t dispatchedTokens = 0;
  size_t dispatchedRows = 0;   // rows of its receive buffer: what the combine's expertOut holds
  bool dispatchedWeights = false;
};

std::mutex gHandlesMutex;
std::unordered_set<const MoeHandle*>& liveHandles() {
  static auto* s = new std::unordered_set<const MoeHandle*>();  // leaked: usable during static destruction
  return *s;
}

Result<MoeHandle*> checkHandle(cfxMoe_t moe) {
  auto* h = reinterpret_cast<MoeHandle*>(moe);
  std::lock_guard<std::mutex> lock(gHandlesMutex);
  if (h == nullptr || liveHandles().count(h) == 0) {
    return Status::error(Errc::InvalidArgument, "moe is not a live cfxMoe_t handle (NULL, destroyed, or garbage)");
  }
  return h;
}

Status checkConfig(const cfxMoeConfig& c, int nRanks) {
  auto bad = [](const std::string& what) { return Status::error(Errc::InvalidArgument, "cfxMoeConfig: " + what); };
  if (c.numExperts < 1) return bad(strprintf("numExperts %d must be at least 1", c.numExperts));
  if (c.topk < 1 || c.topk > c.numExperts) {
    return bad(strprintf("topk %d must be between 1 and numExperts (%d)", c.topk, c.numExperts));
  }
  const int token = rawEnum(c.tokenType);
  const int out = rawEnum(c.outType);
  const int id = rawEnum(c.idType);
  const bool floatRow = token == ncclBfloat16 || token == ncclFloat16 || token == ncclFloat32;
  if (!floatRow && token != ncclFloat8e4m3) {
    return bad(strprintf("tokenType %d is not ncclBfloat16, ncclFloat16, ncclFloat32 or ncclFloat8e4m3", token));
  }
  if (out != ncclBfloat16 && out != ncclFloat16 && out != ncclFloat32) {
    return bad(strprintf("outType %d is not ncclBfloat16, ncclFloat16 or ncclFloat32", out));
  }
  if (id != ncclInt32 && id != ncclInt64) return bad(strprintf("idType %d is not ncclInt32 or ncclInt64", id));
  if (c.hidden == 0 || c.hidden > (size_t{1} << 32)) return bad(strprintf("hidden %zu must be 1..2^32", c.hidden));
  if (token == ncclFloat8e4m3 && c.hidden % coll::MoeConfig::kScaleBlock != 0) {
    return bad(strprintf("hidden %zu is not a multiple of %zu, the fp8 scale block", c.hidden,
                         coll::MoeConfig::kScaleBlock));
  }
  if (c.mode != cfxMoeNormal && c.mode != cfxMoeBounded) return bad(strprintf("unknown mode %d", c.mode));
  if (c.mode == cfxMoeBounded && (c.maxRecvTokens == 0 || c.maxRecvTokens > (size_t{1} << 40))) {
    return bad(strprintf("maxRecvTokens %zu must be 1..2^40 in bounded mode", c.maxRecvTokens));
  }
  for (int e = 0; c.expertToRank != nullptr && e < c.numExperts; ++e) {
    if (c.expertToRank[e] < 0 || c.expertToRank[e] >= nRanks) {
      return bad(strprintf("expertToRank[%d] = %d is not a rank (0..%d)", e, c.expertToRank[e], nRanks - 1));
    }
  }
  return Status();
}

// Routing entries carry token indices as int32.
Status checkTokens(size_t numTokens) {
  if (numTokens > static_cast<size_t>(INT32_MAX)) {
    return Status::error(Errc::InvalidArgument, strprintf("numTokens %zu is above 2^31 - 1", numTokens));
  }
  return Status();
}

// Bytes of `rows` rows of `rowBytes`, refusing what overflows.
Result<size_t> rowsBytes(size_t rows, size_t rowBytes, const char* what) {
  if (rowBytes != 0 && rows > (size_t{1} << 62) / rowBytes) {
    return Status::error(Errc::InvalidArgument, strprintf("%zu rows of %s overflow", rows, what));
  }
  return rows * rowBytes;
}

bool overlap(const MoeArgs::Span& a, const MoeArgs::Span& b) {
  const auto pa = reinterpret_cast<uintptr_t>(a.p);
  const auto pb = reinterpret_cast<uintptr_t>(b.p);
  return a.p != nullptr && b.p != nullptr && a.bytes > 0 && b.bytes > 0 && pa < pb + b.bytes && pb < pa + a.bytes;
}

// One buffer of an op: NULL refused where it must hold bytes.
Status setSpan(MoeArgs* a, MoeArgs::Buffer b, const void* p, size_t bytes, bool in, const char* name) {
  CFX_TRY(checkByteRange("MoE", name, p, bytes));
  a->buffers[b] = MoeArgs::Span{const_cast<void*>(p), bytes, in, !in};
  return Status();
}

// A blocking call's wait: the op may have been enqueued on a stream (device buffers, a cfx host stream).
Status waitFor(cudaStream_t stream) {
  if (core::HostStream* hs = core::findHostStream(stream)) return hs->synchronize();
  if (stream != nullptr && cuda::driver() != nullptr) {
    return cuda::check(cuda::driver()->streamSynchronize(reinterpret_cast<cuda::CUstream>(stream)),
                       "cuStreamSynchronize (cfxMoeExchangeCounts waits for its counts)");
  }
  return Status();
}

Status submitMoe(MoeHandle& h, cudaStream_t stream, coll::Collective coll, std::shared_ptr<MoeArgs> args) {
  return submitOp(h.comm, stream, [&](core::Communicator& comm, core::Op& op) -> Status {
    CFX_TRY(comm.checkUsable());
    op.args.coll = coll;
    op.args.type = h.state->config.tokenType;
    op.args.op = ReduceOp::builtin(DataType::Float32, RedOpKind::Sum, comm.nRanks());
    op.args.moe = std::move(args);
    CFX_INFO(log::Sys::Coll, "%s: %zu tokens, phase %d, comm %p [nranks=%d] stream %p", coll::collectiveName(coll),
             op.args.moe->nTokens, static_cast<int>(op.args.moe->phase), static_cast<void*>(h.comm), comm.nRanks(),
             static_cast<void*>(stream));
    return Status();
  });
}

}  // namespace
}  // namespace cfx::api

using cfx::Errc;
using cfx::Status;
using cfx::strprintf;
using cfx::api::MoeHandle;
using cfx::coll::MoeArgs;

CFX_API ncclResult_t cfxMoeCreate(ncclComm_t comm, const cfxMoeConfig* config, cfxMoe_t* moe) {
  return cfx::api::call("cfxMoeCreate", [&]() -> Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    if (config == nullptr || moe == nullptr) return Status::error(Errc::InvalidArgument, "config and moe must not be NULL");
    const int n = c->nRanks();
    CFX_TRY(cfx::api::checkConfig(*config, n));
    auto h = std::make_unique<MoeHandle>();
    h->comm = comm;
    h->nRanks = n;
    h->state = std::make_shared<cfx::coll::MoeState>();
    cfx::coll::MoeConfig& m = h->state->config;
    m.nExperts = config->numExperts;
    m.topk = config->topk;
    m.hidden = config->hidden;
    m.tokenType = static_cast<cfx::DataType>(cfx::api::rawEnum(config->tokenType));
    m.outType = static_cast<cfx::DataType>(cfx::api::rawEnum(config->outType));
    m.idType = static_cast<cfx::DataType>(cfx::api::rawEnum(config->idType));
    m.bounded = config->mode == cfxMoeBounded;
    m.capacity = m.bounded ? config->maxRecvTokens : 0;
    m.expertRank.resize(static_cast<size_t>(m.nExperts));
    const cfx::coll::EvenSplit blocks{static_cast<size_t>(m.nExperts), n};
    for (int p = 0; p < n; ++p) {
      for (size_t e = blocks.begin(p); e < blocks.begin(p + 1); ++e) m.expertRank[e] = p;
    }
    if (config->expertToRank != nullptr) m.expertRank.assign(config->expertToRank, config->expertToRank + m.nExperts);
    m.derive(n);
    h->localExperts = m.localCount[static_cast<size_t>(c->rank())];
    std::lock_guard<std::mutex> lock(cfx::api::gHandlesMutex);
    cfx::api::liveHandles().insert(h.get());
    *moe = reinterpret_cast<cfxMoe_t>(h.release());
    return Status();
  });
}

CFX_API ncclResult_t cfxMoeDestroy(cfxMoe_t moe) {
  return cfx::api::call("cfxMoeDestroy", [&]() -> Status {
    if (moe == nullptr) return Status();
    auto* h = reinterpret_cast<MoeHandle*>(moe);
    {
      std::lock_guard<std::mutex> lock(cfx::api::gHandlesMutex);
      if (cfx::api::liveHandles().erase(h) == 0) {
        return Status::error(Errc::InvalidArgument, "moe is not a live cfxMoe_t handle (destroyed twice?)");
      }
    }
    delete h;  // ops still queued hold the state themselves
    return Status();
  });
}

CFX_API ncclResult_t cfxMoeExchangeCounts(cfxMoe_t moe, const void* topkIds, size_t numTokens, size_t* numRecvTokens,
                                         cudaStream_t stream) {
  return cfx::api::call("cfxMoeExchangeCounts", [&]() -> Status {
    CFX_TRY_ASSIGN(MoeHandle * h, cfx::api::checkHandle(moe));
    const cfx::coll::MoeConfig& c = h->state->config;
    if (c.bounded) {
      return Status::error(Errc::InvalidUsage, "the handle is in bounded mode, whose dispatch "
                                               "exchanges the routing itself");
    }
    if (cfx::core::groupDepth() > 0) {
      return Status::error(Errc::InvalidUsage, "cfxMoeExchangeCounts cannot be called inside a group: it returns the "
                                               "counts, so it must run before it returns");
    }
    CFX_TRY(cfx::api::checkTokens(numTokens));
    auto args = std::make_shared<MoeArgs>();
    args->phase = MoeArgs::Phase::Exchange;
    args->state = h->state;
    args->nTokens = numTokens;
    CFX_TRY_ASSIGN(const size_t idBytes,
                   cfx::api::rowsBytes(numTokens, static_cast<size_t>(c.topk) * cfx::dataTypeSize(c.idType), "ids"));
    CFX_TRY(cfx::api::setSpan(args.get(), MoeArgs::Ids, topkIds, idBytes, true, "topkIds"));
    h->counted = false;
    CFX_TRY(cfx::api::submitMoe(*h, stream, cfx::coll::Collective::MoeDispatch, args));
    CFX_TRY(cfx::api::waitFor(stream));
    const cfx::coll::MoeRouting& m = h->state->routing;
    if (!m.placed) {
      CFX_TRY_ASSIGN(cfx::core::Communicator * comm, cfx::api::checkComm(h->comm));
      const Status async = comm->asyncStatus();
      return !async.ok() ? async
                         : Status::error(Errc::InternalError, "the exchange did not complete");
    }
    h->counted = true;
    h->countedTokens = numTokens;
    h->countedRows = m.recvRows;
    if (numRecvTokens != nullptr) *numRecvTokens = m.recvRows;
    return Status();
  });
}

CFX_API ncclResult_t cfxMoeDispatch(cfxMoe_t moe, const void* tokens, const float* scales, const void* topkIds,
                                   const float* topkWeights, size_t numTokens, void* recvTokens, float* recvScales,
                                   int* recvCounts, cudaStream_t stream) {
  return cfx::api::call("cfxMoeDispatch", [&]() -> Status {
    CFX_TRY_ASSIGN(MoeHandle * h, cfx::api::checkHandle(moe));
    const cfx::coll::MoeConfig& c = h->state->config;
    if (!c.bounded && (!h->counted || h->countedTokens != numTokens)) {
      return Status::error(Errc::InvalidUsage,
                           h->counted ? strprintf("%zu tokens, but the last cfxMoeExchangeCounts "
                                                  "counted %zu", numTokens, h->countedTokens)
                                      : std::string("cfxMoeDispatch in normal mode needs cfxMoeExchangeCounts first"));
    }
    CFX_TRY(cfx::api::checkTokens(numTokens));
    const size_t rows = c.bounded ? c.capacity : h->countedRows;
    const size_t k = static_cast<size_t>(c.topk);
    auto args = std::make_shared<MoeArgs>();
    args->phase = c.bounded ? MoeArgs::Phase::Both : MoeArgs::Phase::Dispatch;
    args->state = h->state;
    args->nTokens = numTokens;
    using cfx::api::rowsBytes;
    using cfx::api::setSpan;
    CFX_TRY_ASSIGN(const size_t tokenBytes, rowsBytes(numTokens, c.tokenRowBytes(), "tokens"));
    CFX_TRY_ASSIGN(const size_t recvBytes, rowsBytes(rows, c.tokenRowBytes(), "recvTokens"));
    CFX_TRY(setSpan(args.get(), MoeArgs::Tokens, tokens, tokenBytes, true, "tokens"));
    CFX_TRY(setSpan(args.get(), MoeArgs::RecvTokens, recvTokens, recvBytes, false, "recvTokens"));
    if (c.scaled()) {
      if ((scales == nullptr && numTokens > 0) || (recvScales == nullptr && rows > 0)) {
        return Status::error(Errc::InvalidArgument, "fp8 tokens need scales and recvScales");
      }
      CFX_TRY(setSpan(args.get(), MoeArgs::Scales, scales, numTokens * c.scaleRowBytes(), true, "scales"));
      CFX_TRY(setSpan(args.get(), MoeArgs::RecvScales, recvScales, rows * c.scaleRowBytes(), false, "recvScales"));
    }
    if (c.bounded) {
      CFX_TRY_ASSIGN(const size_t idBytes, rowsBytes(numTokens, k * cfx::dataTypeSize(c.idType), "topkIds"));
      CFX_TRY(setSpan(args.get(), MoeArgs::Ids, topkIds, idBytes, true, "topkIds"));
    }
    if (topkWeights != nullptr) {
      CFX_TRY_ASSIGN(const size_t weightBytes, rowsBytes(numTokens, k * sizeof(float), "topkWeights"));
      CFX_TRY(setSpan(args.get(), MoeArgs::Weights, topkWeights, weightBytes, true, "topkWeights"));
    }
    if (recvCounts != nullptr) {
      CFX_TRY(setSpan(args.get(), MoeArgs::RecvCounts, recvCounts,
                      (static_cast<size_t>(h->localExperts) + 1) * sizeof(int), false, "recvCounts"));
    }
    if (cfx::api::overlap(args->buffers[MoeArgs::Tokens], args->buffers[MoeArgs::RecvTokens])) {
      return Status::error(Errc::InvalidArgument, "tokens and recvTokens overlap");
    }
    CFX_TRY(cfx::api::submitMoe(*h, stream, cfx::coll::Collective::MoeDispatch, std::move(args)));
    h->dispatched = true;
    h->dispatchedTokens = numTokens;
    h->dispatchedRows = rows;
    h->dispatchedWeights = topkWeights != nullptr || numTokens == 0;  // no tokens need no weights
    return Status();
  });
}

CFX_API ncclResult_t cfxMoeCombine(cfxMoe_t moe, const void* expertOut, void* out, int flags, cudaStream_t stream) {
  return cfx::api::call("cfxMoeCombine", [&]() -> Status {
    CFX_TRY_ASSIGN(MoeHandle * h, cfx::api::checkHandle(moe));
    const cfx::coll::MoeConfig& c = h->state->config;
    if ((flags & ~CFX_MOE_UNWEIGHTED) != 0) {
      return Status::error(Errc::InvalidArgument, strprintf("unknown flags %#x", flags));
    }
    if (!h->dispatched) return Status::error(Errc::InvalidUsage, "no dispatch on this handle before");
    const bool unweighted = (flags & CFX_MOE_UNWEIGHTED) != 0;
    if (!unweighted && !h->dispatchedWeights) {
      return Status::error(Errc::InvalidArgument, "the dispatch had no topkWeights; pass "
                                                  "CFX_MOE_UNWEIGHTED, or weights to the dispatch");
    }
    auto args = std::make_shared<MoeArgs>();
    args->phase = MoeArgs::Phase::Combine;
    args->state = h->state;
    args->nTokens = h->dispatchedTokens;
    args->unweighted = unweighted;
    CFX_TRY_ASSIGN(const size_t inBytes, cfx::api::rowsBytes(h->dispatchedRows, c.outRowBytes(), "expertOut"));
    CFX_TRY_ASSIGN(const size_t outBytes, cfx::api::rowsBytes(h->dispatchedTokens, c.outRowBytes(), "out"));
    CFX_TRY(cfx::api::setSpan(args.get(), MoeArgs::ExpertOut, expertOut, inBytes, true, "expertOut"));
    CFX_TRY(cfx::api::setSpan(args.get(), MoeArgs::Out, out, outBytes, false, "out"));
    if (cfx::api::overlap(args->buffers[MoeArgs::ExpertOut], args->buffers[MoeArgs::Out])) {
      return Status::error(Errc::InvalidArgument, "out and expertOut overlap");
    }
    return cfx::api::submitMoe(*h, stream, cfx::coll::Collective::MoeCombine, std::move(args));
  });
}

CFX_API ncclResult_t cfxMoeGetCounts(cfxMoe_t moe, cfxMoeCounts* counts) {
  return cfx::api::call("cfxMoeGetCounts", [&]() -> Status {
    CFX_TRY_ASSIGN(MoeHandle * h, cfx::api::checkHandle(moe));
    if (counts == nullptr) return Status::error(Errc::InvalidArgument, "counts is NULL");
    const cfx::coll::MoeRouting& m = h->state->routing;
    if (!m.placed) return Status::error(Errc::InvalidUsage, "nothing was routed on this handle yet");
    counts->numLocalExperts = h->localExperts;
    counts->recvTokens = m.recvRows;
    counts->droppedTokens = m.dropped;
    auto fill = [](long long* to, const std::vector<int64_t>& from) {
      if (to != nullptr) std::copy(from.begin(), from.end(), to);
    };
    fill(counts->perLocalExpert, m.perLocalExpert);
    fill(counts->sentPerExpert, m.sentPerExpert);
    fill(counts->sentPerRank, m.sentPerRank);
    fill(counts->recvPerRank, m.recvPerRank);
    return Status();
  });
}
