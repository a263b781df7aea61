// SPDX-License-Identifier: Apache-2.0
// The formats behind Codec (compress layer, internal): each works on one block of fp32 values at a time, and knows
// its piece layout. codec.cc turns a piece of user values (any input type, optional error feedback) into the fp32
// blocks these take.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"
#include "compress/codec.h"

namespace cfx::compress::detail {

// ---- values: conversions between fp32 and the input types (fp32, bf16, fp16), vectorisable ----

// out[i] = in[i] as fp32.
void loadFloats(DataType type, const void* in, size_t n, float* out);
// out[i] = v[i] rounded to nearest even in `type`.
void storeFloats(DataType type, const float* v, size_t n, void* out);

// ---- int8 inner loops shared by Int8 and MxInt8 (int8_kernels.cc; AVX2 where the CPU has it, same bytes) ----
// The largest magnitude of v's finite values (0 when none).
float absmaxFinite(const float* v, size_t n);
// out[i] = the int8 code of v[i] * inv: rounded to nearest even, clamped to +-127, -128 for non-finite v[i].
void int8Encode(const float* v, size_t n, float inv, uint8_t* out);
// out[i] = q[i] * scale (NaN for the code -128), or out[i] += that.
void int8Decode(const uint8_t* q, size_t n, float scale, float* out, bool accumulate);

// Where one block's values go in a piece and with which rounding: the arguments every block encoder takes.
struct BlockOut {
  unsigned char* wire = nullptr;  // the piece
  size_t nBlocks = 0;             // blocks in the piece
  size_t block = 0;               // index of this block in the piece
  size_t first = 0;               // index of its first element in the piece
  bool stochastic = false;
  uint64_t seed = 0;              // stochastic rounding: combined spec and op seed
  uint64_t firstElem = 0;         // index of the piece's first element in the op's buffer
};

// ---- casts: bf16, fp16 (2 bytes an element, no blocks) ----
void castEncode(Format f, const float* v, size_t n, const BlockOut& o);
void castDecode(Format f, const unsigned char* wire, size_t first, size_t n, float* out, bool accumulate);

// ---- absmax block formats: Int8, Int4, Fp8 (block_quant.cc). Piece: nBlocks fp32 scales, then the payload ----
size_t absmaxPieceBytes(Format f, size_t count, size_t block);
void absmaxEncode(Format f, const float* v, size_t n, const BlockOut& o);
void absmaxDecode(Format f, const unsigned char* wire, size_t count, size_t block, float* out, bool accumulate);

// ---- OCP MX formats: MxInt8, MxFp8, block 32 (mx_quant.cc). Piece: nBlocks E8M0 bytes, then one byte each ----
size_t mxPieceBytes(size_t count, size_t block);
void mxEncode(Format f, const float* v, size_t n, const BlockOut& o);
void mxDecode(Format f, const unsigned char* wire, size_t count, size_t block, float* out, bool accumulate);

// ---- TopK (topk.cc). Piece: one record per block, back to back ----
size_t topkKept(float fraction, size_t n);  // k of a block of n: ceil(fraction * n), at least 1 for n >= 1
size_t topkBlockBytes(const CodecSpec& spec, size_t n);
size_t topkPieceBytes(const CodecSpec& spec, size_t count);
// Encodes one block of n values into its record at `record`; returns the record's size.
size_t topkEncodeBlock(const CodecSpec& spec, const float* v, size_t n, unsigned char* record);
void topkDecode(const CodecSpec& spec, const unsigned char* wire, size_t count, float* out, bool accumulate);

}  // namespace cfx::compress::detail
