// SPDX-License-Identifier: Apache-2.0
// A communicator's compression state (core layer): its default codec for the nccl* calls (CFX_CODEC and
// CFX_CODEC_MODE at creation, cfxCommSetCodec later), the error-feedback residuals the library keeps per send buffer
// (cfxFeedbackLibrary), and what the last compressed op did (cfxCommGetCompressStats).
//
// Threading: every method may be called from any thread (the user's, the progress thread); one mutex guards all.
// The residual a call hands out stays valid until freeFeedback for its buffer or the communicator's end, and only
// one op at a time may use it: ops of one queue run in call order, ops on different host lanes that use one residual
// are put in call order by core/host_lanes.h, and NCCL's one-thread rule covers calls. A communicator's lanes use
// its state (Communicator::compression()), so statistics are the last op's to finish.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "common/status.h"

namespace cfx::core {

// What a caller asked for: a codec spec, where to use it, whose residual, and whether to measure the error.
struct CodecRequest {
  compress::CodecSpec spec;
  coll::CompressArgs::Mode mode = coll::CompressArgs::Mode::Auto;
  enum class Feedback : uint8_t { None, Library, Caller };
  Feedback feedback = Feedback::None;
  float* residual = nullptr;  // Caller
  bool measureError = false;
};

struct CompressStats {
  bool compressed = false;
  std::string codec;
  std::string algorithm;
  uint64_t bufferBytes = 0;
  uint64_t wireBytes = 0;
  double relL2Error = -1;
};

class CompressState {
 public:
  // Reads CFX_CODEC and CFX_CODEC_MODE; a bad value WARNs once and leaves no default.
  void loadDefaults();
  std::optional<CodecRequest> defaultCodec() const;
  void setDefaultCodec(std::optional<CodecRequest> codec);

  // The library's residual for `values` floats of `sendbuff`, zeroed when first made for that (buffer, count).
  float* residualFor(const void* sendbuff, size_t values);
  void freeFeedback(const void* sendbuff);

  // The state of the last delta broadcast (cfxBroadcastDelta) of `recvbuff`: made empty the first time, and again
  // when the count or element size changes. Ops of one communicator run in order, so one op at a time uses it.
  std::shared_ptr<coll::DeltaArgs> deltaFor(const void* recvbuff, size_t count, size_t eltSize);
  void resetDelta(const void* recvbuff);

  void recordStats(CompressStats stats);
  std::optional<CompressStats> lastStats() const;

 private:
  mutable std::mutex mutex_;
  std::optional<CodecRequest> default_;
  std::map<std::pair<const void*, size_t>, std::unique_ptr<std::vector<float>>> residuals_;
  std::optional<CompressStats> last_;
  struct DeltaEntry {
    size_t count = 0;
    size_t eltSize = 0;
    std::vector<char> previous;
    std::shared_ptr<coll::DeltaArgs> args;
  };
  std::map<const void*, DeltaEntry> deltas_;
};

// The arguments a compressed op carries down (coll::CompressArgs) for `request` on buffers of `type`: validates the
// codec for the type (InvalidArgument as Codec::make says), resolves the residual (the library's for `sendbuff`
// and `sendValues`, or the caller's), and checks a block fits `sliceBytes`.
Result<std::shared_ptr<const coll::CompressArgs>> makeCompressArgs(const CodecRequest& request, DataType type,
                                                                   bool average, const void* sendbuff,
                                                                   size_t sendValues, size_t sliceBytes,
                                                                   CompressState& state);

}  // namespace cfx::core
