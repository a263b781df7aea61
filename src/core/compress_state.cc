// SPDX-License-Identifier: Apache-2.0
// A communicator's compression state (core layer); see compress_state.h.
#include "core/compress_state.h"

#include "common/log.h"
#include "common/param.h"

namespace cfx::core {

namespace {

CFX_PARAM(std::string, codecParam, "CFX_CODEC", "",
          "Default codec of every communicator's ncclAllReduce, ncclReduceScatter, ncclAllGather and ncclBroadcast "
          "on fp32, bf16 and fp16 buffers (sum and avg; other types and ops run plain); empty: plain. Every rank "
          "must set the same value. Formats, with the bound on one encoding's error per element (s = the block's "
          "absmax / Q, X = 2^floor(log2 absmax)): bf16 (2^-8 |x|), fp16 (2^-11 |x|), int8 (absmax scale per block "
          "of 256, Q = 127: s/2), int4 (Q = 7: s/2), fp8 (E4M3, absmax/448 scale: 2^-4 |x| + 2^-10 s), mxint8 (OCP, "
          "block 32, power-of-two scale: X/128), mxfp8 (OCP E4M3, block 32: 2^-4 |x| + 2^-18 X), topk:FRACTION "
          "(the largest entries of each block of 4096 as index/value pairs; the rest are dropped, or kept for later "
          "by error feedback). Options :block=N, :values=fp32|bf16|int8|2bit (top-k, default int8), :sr (stochastic "
          "rounding: bf16, int8, int4, mxint8), :seed=N. NaN and inf become NaN in the block formats. An all-reduce "
          "encodes each contribution once and each result once (quantise-once), so its error is at most the "
          "contributions' bounds plus the result's, and every rank gets the same bits (conflux.h, cfxCodecParse).",
          [](const std::string& v) -> std::optional<std::string> {
            if (v.empty()) return std::nullopt;
            auto spec = compress::parseCodec(v);
            if (!spec.ok()) return spec.status().message();
            return std::nullopt;
          });
CFX_PARAM(std::string, codecModeParam, "CFX_CODEC_MODE", "auto",
          "Where CFX_CODEC compresses: auto (on links where the planner's model says it pays: between hosts, not "
          "shared memory), always (every link), never.",
          [](const std::string& v) -> std::optional<std::string> {
            if (v == "auto" || v == "always" || v == "never") return std::nullopt;
            return "expected auto, always or never";
          });

}  // namespace

void CompressState::loadDefaults() {
  const std::string& text = codecParam.get();
  if (text.empty()) return;
  auto spec = compress::parseCodec(text);
  if (!spec.ok() || spec->format == compress::Format::None) return;  // the registry has already warned
  CodecRequest r;
  r.spec = *spec;
  const std::string& mode = codecModeParam.get();
  r.mode = mode == "always"  ? coll::CompressArgs::Mode::Always
           : mode == "never" ? coll::CompressArgs::Mode::Never
                             : coll::CompressArgs::Mode::Auto;
  std::lock_guard<std::mutex> lock(mutex_);
  default_ = r;
}

std::optional<CodecRequest> CompressState::defaultCodec() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return default_;
}

void CompressState::setDefaultCodec(std::optional<CodecRequest> codec) {
  std::lock_guard<std::mutex> lock(mutex_);
  default_ = codec;
}

float* CompressState::residualFor(const void* sendbuff, size_t values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = residuals_[{sendbuff, values}];
  if (!slot) slot = std::make_unique<std::vector<float>>(values, 0.0f);
  return slot->data();
}

void CompressState::freeFeedback(const void* sendbuff) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = residuals_.begin(); it != residuals_.end();) {
    it = it->first.first == sendbuff ? residuals_.erase(it) : std::next(it);
  }
}

std::shared_ptr<coll::DeltaArgs> CompressState::deltaFor(const void* recvbuff, size_t count, size_t eltSize) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeltaEntry& e = deltas_[recvbuff];
  if (!e.args || e.count != count || e.eltSize != eltSize) {
    e.count = count;
    e.eltSize = eltSize;
    e.previous.assign(count * eltSize, 0);
    e.args = std::make_shared<coll::DeltaArgs>();
    e.args->previous = e.previous.data();
  }
  return e.args;
}

void CompressState::resetDelta(const void* recvbuff) {
  std::lock_guard<std::mutex> lock(mutex_);
  deltas_.erase(recvbuff);
}

void CompressState::recordStats(CompressStats stats) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_ = std::move(stats);
}

std::optional<CompressStats> CompressState::lastStats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

Result<std::shared_ptr<const coll::CompressArgs>> makeCompressArgs(const CodecRequest& request, DataType type,
                                                                   bool average, const void* sendbuff,
                                                                   size_t sendValues, size_t sliceBytes,
                                                                   CompressState& state) {
  CFX_TRY_ASSIGN(const compress::Codec codec, compress::Codec::make(request.spec, type));
  if (codec.pieceElems(sliceBytes) == 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("codec %s: one block does not fit this communicator's FIFO slot of %zu bytes; use "
                                   "a smaller block",
                                   compress::codecText(codec.spec()).c_str(), sliceBytes));
  }
  auto args = std::make_shared<coll::CompressArgs>(codec);
  args->mode = request.mode;
  args->average = average;
  args->measureError = request.measureError;
  switch (request.feedback) {
    case CodecRequest::Feedback::None: break;
    case CodecRequest::Feedback::Caller: args->residual = request.residual; break;
    case CodecRequest::Feedback::Library: args->residual = state.residualFor(sendbuff, sendValues); break;
  }
  return std::shared_ptr<const coll::CompressArgs>(std::move(args));
}

}  // namespace cfx::core
