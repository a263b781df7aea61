// SPDX-License-Identifier: Apache-2.0
// Codecs (compress layer): what a transfer may carry instead of a buffer's own bytes.
//
// A codec turns `count` values (fp32, bf16 or fp16) into wire bytes and back into fp32. Every codec works in
// self-contained *pieces*: a piece of n elements is encoded alone, into pieceBytes(n) bytes that hold everything
// needed to decode it (its scales, its indices). So the verbs (primitives/prims.h) can cut a message into FIFO slices
// of pieceElems(slotBytes) elements, and a receiver decodes each slice the moment it arrives, without the rest of the
// message. A piece is a whole number of blocks except for a message's last one. Both ends of a transfer compute the
// same pieces from (codec, count, slot size) alone; nothing about the framing travels.
//
// Formats (block = elements sharing one scale or one selection; error bounds are per element of one encoding):
//   Bf16, Fp16     casts, round to nearest even (Bf16 also stochastically). |err| <= 2^-8 |x| (bf16; 2^-7 |x|
//                  stochastic), 2^-11 |x| + 2^-25 (fp16; past 65504 it becomes inf). IEEE inf and NaN are kept.
//   Int8, Int4     absmax per block (default 256): fp32 scale s = absmax / Q (Q = 127, 7), q = round(x / s).
//                  |err| <= s / 2 (nearest), < s (stochastic).
//   Fp8            E4M3 with an fp32 absmax scale per block (default 256): |err| <= 2^-4 |x| + 2^-10 s.
//   MxInt8         OCP MX: block of 32, one E8M0 (power-of-two) scale X = 2^(floor(log2 absmax)), elements int8
//                  in units of X / 64 (so up to 127/64 X). |err| <= X / 128 <= absmax / 128 (nearest) for
//                  |x| <= 127/64 X, and the values above clamp there (|err| < X / 64); < X / 64 (stochastic).
//   MxFp8          OCP MX: block of 32, X = 2^(floor(log2 absmax) - 8), elements E4M3 (saturating at 448 X).
//                  |err| <= 2^-4 |x| + 2^-10 X for |x| <= 448 X; the few values above saturate to 448 X
//                  (|err| < 64 X = absmax / 8 at most), as the OCP specification has it.
//   TopK           per block (default 4096), the k = ceil(fraction * n) entries of largest magnitude (ties to the
//                  lower index) as (index, value) pairs; the others decode to 0. Indices are 16-bit within a block
//                  of up to 65536, else 32-bit. Values fp32, bf16, int8 (absmax of the kept values / 127) or
//                  2-bit (levels {-3, -1, 1, 3} * absmax / 3 of the kept values): the kept entries carry that
//                  value format's error (fp32 0, bf16 2^-8 |x|, int8 s / 2, 2-bit s); the dropped ones their whole
//                  value, which error feedback returns later.
// MX blocks whose largest magnitude is below 2^-100 are sent as zero: |err| < 2^-100 there.
// Non-finite inputs of the lossy block formats become NaN at their own position (quantize_math.h); a TopK block
// holding one keeps it as NaN (it ranks first).
//
// Error feedback: with a residual e (fp32, one per element, indexed like the input), encoding sends the code of
// (e + x) and leaves e = (e + x) - decode(code): what was not sent is sent later. Any lossy format may use it.
//
// Thread safety: a Codec is immutable; encode and decode may run on any threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/types.h"

namespace cfx::compress {

enum class Format : uint8_t { None = 0, Bf16 = 1, Fp16 = 2, Int8 = 3, MxInt8 = 4, MxFp8 = 5, Int4 = 6, TopK = 7, Fp8 = 8 };
inline constexpr int kNumFormats = 9;
enum class Rounding : uint8_t { Nearest = 0, Stochastic = 1 };
// TopK's value format.
enum class SparseValues : uint8_t { Fp32 = 0, Bf16 = 1, Int8 = 2, Bits2 = 3 };

// What a user asks for (conflux.h cfxCodec, CFX_CODEC, the perf tools' --codec).
struct CodecSpec {
  Format format = Format::None;
  uint32_t block = 0;  // 0: the format's default
  Rounding rounding = Rounding::Nearest;
  SparseValues values = SparseValues::Int8;  // TopK only
  float fraction = 0.0f;                     // TopK only: kept fraction of each block, in (0, 1]
  uint64_t seed = 0;                         // stochastic rounding
};

// Per encode call: error feedback, and where the input sits in the op's buffer (stochastic rounding's counter).
struct EncodeContext {
  float* residual = nullptr;  // count fp32 values aligned with the input, read and updated; null: no feedback
  uint64_t firstElem = 0;     // index of in[0] within the op's buffer
  uint64_t seed = 0;          // mixed with CodecSpec::seed: the op's sequence number, so ops draw fresh bits
};

const char* formatName(Format f);  // "none", "bf16", "fp16", "int8", "mxint8", "mxfp8", "int4", "topk", "fp8"

// Parses "none", "bf16", "fp16", "int8", "mxint8", "mxfp8", "int4", "fp8", "topk:FRACTION", each optionally followed
// by options ":block=N", ":values=fp32|bf16|int8|2bit" (topk), ":sr" (stochastic rounding), ":seed=N".
// InvalidArgument naming what is wrong.
Result<CodecSpec> parseCodec(std::string_view text);
// The canonical text of a spec, which parseCodec reads back ("topk:0.01:values=int8:block=4096").
std::string codecText(const CodecSpec& spec);

// out[i] = in[i] as fp32, for fp32, bf16 or fp16 values (the types a codec carries).
void toFloat(DataType type, const void* in, size_t n, float* out);
// out[i] = v[i] rounded to nearest even in `type` (fp32, bf16 or fp16).
void fromFloat(DataType type, const float* v, size_t n, void* out);

class Codec {
 public:
  // Validates `spec` for buffers of `valueType`. InvalidArgument: an unknown format, rounding or value format; a
  // block out of range (1..2^20; even for int4; 32 for the MX formats); a TopK fraction outside (0, 1]; stochastic
  // rounding where the format has none (fp16, fp8, mxfp8, topk); a value type other than fp32, bf16 or fp16
  // (integers and fp64 with any lossy codec). Format::None is not a codec: InvalidArgument too.
  static Result<Codec> make(const CodecSpec& spec, DataType valueType);

  const CodecSpec& spec() const { return spec_; }
  Format format() const { return spec_.format; }
  DataType valueType() const { return valueType_; }
  uint32_t block() const { return spec_.block; }
  // Wire bytes of a piece of `count` elements.
  size_t pieceBytes(size_t count) const;
  // Elements of a full piece in a slot of `slotBytes`: the most whole blocks whose piece fits (casts: as many
  // elements as fit). 0 when not even one block fits (the caller refuses the codec for that slot size).
  size_t pieceElems(size_t slotBytes) const;
  // Wire bytes of `count` elements cut into pieces of `pieceElems` (the last one shorter).
  size_t framedBytes(size_t count, size_t pieceElems) const;
  // A 32-bit digest of the spec and value type: folded into every message tag, so ranks that disagree on the
  // codec fail with a named mismatch instead of decoding garbage.
  uint32_t signature() const { return signature_; }

  // Encodes one piece: `count` values of `inType` (fp32, bf16 or fp16) into pieceBytes(count) bytes at `wire`.
  void encode(const void* in, DataType inType, size_t count, void* wire, const EncodeContext& ctx) const;
  // Decodes one piece into fp32: out[i] = value, or out[i] += value when `accumulate` (IEEE fp32 addition).
  void decode(const void* wire, size_t count, float* out, bool accumulate) const;
  // Decodes one piece into `count` elements of `outType` (fp32, bf16 or fp16; rounded to nearest even).
  void decodeTo(const void* wire, size_t count, DataType outType, void* out) const;
  // The documented bound (above) on |decode(encode(x))[i] - x[i]| of each element of one piece of fp32 values,
  // without error feedback, into out[i]; +inf where x[i] is not finite (it decodes to NaN or inf). For checking
  // results (tests, the perf tools' -c 1), not for the data path.
  void elementBounds(const float* x, size_t count, float* out) const;

 private:
  Codec() = default;
  CodecSpec spec_;
  DataType valueType_ = DataType::Float32;
  uint32_t signature_ = 0;
};

}  // namespace cfx::compress
