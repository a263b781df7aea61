// SPDX-License-Identifier: Apache-2.0
// Compressed collectives and codecs (api layer): cfx*Compressed, cfxCodecParse, the communicator's default codec,
// library-kept residuals and statistics (conflux.h, "Compressed collectives").
#include <cstring>

#include "api/api_call.h"
#include "api/collective_call.h"
#include "common/cuda_driver.h"
#include "conflux.h"

namespace cfx::api {

namespace {

using coll::Collective;

// A C caller's codec, every field checked before it is trusted.
Result<core::CodecRequest> fromC(const cfxCodec& c) {
  if (c.format < cfxCodecNone || c.format > cfxCodecFp8) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown codec format %d (cfxCodecFormat)", c.format));
  }
  if (c.block < 0) return Status::error(Errc::InvalidArgument, strprintf("codec block %d is negative", c.block));
  if (c.rounding != cfxRoundNearest && c.rounding != cfxRoundStochastic) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown codec rounding %d (cfxRounding)", c.rounding));
  }
  if (c.topkValues < cfxTopKFp32 || c.topkValues > cfxTopK2Bit) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown top-k value format %d (cfxTopKValues)", c.topkValues));
  }
  if (c.mode < cfxCompressAuto || c.mode > cfxCompressNever) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown compression mode %d (cfxCompressMode)", c.mode));
  }
  if (c.feedback < cfxFeedbackNone || c.feedback > cfxFeedbackCaller) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown error feedback %d (cfxFeedback)", c.feedback));
  }
  core::CodecRequest r;
  r.spec.format = static_cast<compress::Format>(c.format);
  r.spec.block = static_cast<uint32_t>(c.block);
  r.spec.rounding = static_cast<compress::Rounding>(c.rounding);
  r.spec.values = static_cast<compress::SparseValues>(c.topkValues);
  r.spec.fraction = c.topkFraction;
  r.spec.seed = c.seed;
  r.mode = static_cast<coll::CompressArgs::Mode>(c.mode);
  r.feedback = static_cast<core::CodecRequest::Feedback>(c.feedback);
  r.residual = c.residual;
  r.measureError = c.measureError != 0;
  if (r.feedback == core::CodecRequest::Feedback::Caller) {
    if (c.residual == nullptr) {
      return Status::error(Errc::InvalidArgument, "cfxFeedbackCaller needs the caller's residual (codec->residual)");
    }
    if (cuda::driver() != nullptr && cuda::classify(c.residual).kind != cuda::MemKind::Host) {
      return Status::error(Errc::InvalidArgument, "the codec's residual must be host memory (the codec runs there)");
    }
  }
  return r;
}

bool carries(DataType t) { return t == DataType::Float32 || t == DataType::Bfloat16 || t == DataType::Float16; }

Status submitCompressed(CollCall c, const cfxCodec* codec) {
  std::optional<core::CodecRequest> request;
  if (codec != nullptr) {
    CFX_TRY_ASSIGN(request, fromC(*codec));
    c.codec = &*request;
  }
  return submitCollective(c);
}

}  // namespace

Result<std::shared_ptr<const coll::CompressArgs>> codecFor(const CollCall& c, core::Communicator& comm) {
  if (c.coll == Collective::BroadcastDelta) return std::shared_ptr<const coll::CompressArgs>();  // lossless, no codec
  const bool compressible = c.coll == Collective::AllReduce || c.coll == Collective::ReduceScatter ||
                            c.coll == Collective::AllGather || c.coll == Collective::Broadcast;
  const auto type = static_cast<DataType>(c.type);
  const bool average = c.reducing && c.op == ncclAvg;
  const bool sumOrAvg = !c.reducing || c.op == ncclSum || c.op == ncclAvg;
  std::optional<core::CodecRequest> request;
  if (c.codec != nullptr) {
    if (c.codec->spec.format == compress::Format::None) return std::shared_ptr<const coll::CompressArgs>();
    if (!sumOrAvg) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("%s: a codec sums values in fp32; it carries ncclSum and ncclAvg, not op %d",
                                     c.name, c.op));
    }
    request = *c.codec;
  } else {
    // The default applies where it can; everything else runs plain, as without it.
    request = comm.compression().defaultCodec();
    if (!request || !compressible || !sumOrAvg || !carries(type)) return std::shared_ptr<const coll::CompressArgs>();
  }
  const size_t n = static_cast<size_t>(comm.nRanks());
  const size_t sendValues = c.coll == Collective::ReduceScatter ? c.count * n : c.count;
  return core::makeCompressArgs(*request, type, average, c.sendbuff, sendValues, comm.sliceBytes(),
                                comm.compression());
}

}  // namespace cfx::api

using cfx::api::CollCall;
using cfx::api::rawEnum;
using cfx::coll::Collective;

CFX_API ncclResult_t cfxCodecParse(const char* text, cfxCodec* codec) {
  return cfx::api::call("cfxCodecParse", [&]() -> cfx::Status {
    if (text == nullptr || codec == nullptr) {
      return cfx::Status::error(cfx::Errc::InvalidArgument, "cfxCodecParse: text and codec must not be NULL");
    }
    CFX_TRY_ASSIGN(const cfx::compress::CodecSpec spec, cfx::compress::parseCodec(text));
    *codec = cfxCodec CFX_CODEC_INIT(static_cast<int>(spec.format));
    codec->block = static_cast<int>(spec.block);
    codec->rounding = static_cast<int>(spec.rounding);
    codec->topkFraction = spec.fraction;
    codec->topkValues = static_cast<int>(spec.values);
    codec->seed = spec.seed;
    return cfx::Status();
  });
}

CFX_API ncclResult_t cfxAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           ncclRedOp_t op, const cfxCodec* codec, ncclComm_t comm,
                                           cudaStream_t stream) {
  return cfx::api::call("cfxAllReduceCompressed", [&] {
    return cfx::api::submitCompressed({"cfxAllReduceCompressed", Collective::AllReduce, sendbuff, recvbuff, count,
                                       rawEnum(datatype), rawEnum(op), -1, comm, stream, true},
                                      codec);
  });
}

CFX_API ncclResult_t cfxReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount,
                                               ncclDataType_t datatype, ncclRedOp_t op, const cfxCodec* codec,
                                               ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxReduceScatterCompressed", [&] {
    return cfx::api::submitCompressed({"cfxReduceScatterCompressed", Collective::ReduceScatter, sendbuff, recvbuff,
                                       recvcount, rawEnum(datatype), rawEnum(op), -1, comm, stream, true},
                                      codec);
  });
}

CFX_API ncclResult_t cfxAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, const cfxCodec* codec, ncclComm_t comm,
                                           cudaStream_t stream) {
  return cfx::api::call("cfxAllGatherCompressed", [&] {
    return cfx::api::submitCompressed({"cfxAllGatherCompressed", Collective::AllGather, sendbuff, recvbuff, sendcount,
                                       rawEnum(datatype), ncclSum, -1, comm, stream, false},
                                      codec);
  });
}

CFX_API ncclResult_t cfxBroadcastCompressed(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           int root, const cfxCodec* codec, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxBroadcastCompressed", [&] {
    return cfx::api::submitCompressed({"cfxBroadcastCompressed", Collective::Broadcast, sendbuff, recvbuff, count,
                                       rawEnum(datatype), ncclSum, root, comm, stream, false},
                                      codec);
  });
}

CFX_API ncclResult_t cfxCommSetCodec(ncclComm_t comm, const cfxCodec* codec) {
  return cfx::api::call("cfxCommSetCodec", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    if (codec == nullptr || codec->format == cfxCodecNone) {
      c->compression().setDefaultCodec(std::nullopt);
      return cfx::Status();
    }
    CFX_TRY_ASSIGN(const cfx::core::CodecRequest request, cfx::api::fromC(*codec));
    if (request.feedback == cfx::core::CodecRequest::Feedback::Caller) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                "cfxCommSetCodec: a caller's residual belongs to one buffer; use cfxFeedbackLibrary");
    }
    // Validate the spec now (with fp32; each op checks its own datatype), so a bad default fails here, by name.
    CFX_TRY(cfx::compress::Codec::make(request.spec, cfx::DataType::Float32).status());
    c->compression().setDefaultCodec(request);
    return cfx::Status();
  });
}

CFX_API ncclResult_t cfxCommFreeFeedback(ncclComm_t comm, const void* sendbuff) {
  return cfx::api::call("cfxCommFreeFeedback", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    c->compression().freeFeedback(sendbuff);
    return cfx::Status();
  });
}

CFX_API ncclResult_t cfxCommGetCompressStats(ncclComm_t comm, cfxCompressStats* stats) {
  return cfx::api::call("cfxCommGetCompressStats", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    if (stats == nullptr) return cfx::Status::error(cfx::Errc::InvalidArgument, "cfxCommGetCompressStats: stats is NULL");
    const std::optional<cfx::core::CompressStats> last = c->compression().lastStats();
    if (!last) {
      return cfx::Status::error(cfx::Errc::InvalidUsage, "no op with a codec has completed on this communicator yet");
    }
    std::memset(stats, 0, sizeof(*stats));
    stats->compressed = last->compressed ? 1 : 0;
    std::snprintf(stats->codec, sizeof(stats->codec), "%s", last->codec.c_str());
    std::snprintf(stats->algorithm, sizeof(stats->algorithm), "%s", last->algorithm.c_str());
    stats->bufferBytes = last->bufferBytes;
    stats->wireBytes = last->wireBytes;
    stats->relL2Error = last->relL2Error;
    return cfx::Status();
  });
}

CFX_API ncclResult_t cfxBroadcastDelta(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxBroadcastDelta", [&] {
    return cfx::api::submitCollective({"cfxBroadcastDelta", Collective::BroadcastDelta, sendbuff, recvbuff, count,
                                       rawEnum(datatype), ncclSum, root, comm, stream, false});
  });
}

CFX_API ncclResult_t cfxCommResetDelta(ncclComm_t comm, const void* recvbuff) {
  return cfx::api::call("cfxCommResetDelta", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    c->compression().resetDelta(recvbuff);
    return cfx::Status();
  });
}
