// SPDX-License-Identifier: Apache-2.0
// Absmax block formats, host side (compress layer): Int8, Int4 and Fp8 (E4M3) with one fp32 scale per block.
//
// Per block: one pass for the absmax of the finite values, one to scale, round and store, with the block in L1
// between the two. Int8 with nearest rounding, the common case, runs the vector loops of int8_kernels.cc.
#include "compress/block_quant.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "compress/formats.h"

namespace cfx::compress {

namespace detail {
namespace {

quant::Codec quantCodec(Format f) {
  return f == Format::Int4 ? quant::Codec::Int4 : f == Format::Fp8 ? quant::Codec::Fp8E4M3 : quant::Codec::Int8;
}

}  // namespace

size_t absmaxPieceBytes(Format f, size_t count, size_t block) {
  return quant::quantizedBytes(quantCodec(f), count, block);
}

void absmaxEncode(Format f, const float* v, size_t n, const BlockOut& o) {
  const quant::Codec c = quantCodec(f);
  const float scale = absmaxFinite(v, n) / quant::codecMax(c);
  const float inv = quant::reciprocalScale(scale);
  std::memcpy(o.wire + o.block * sizeof(float), &scale, sizeof(float));
  unsigned char* payload = o.wire + o.nBlocks * sizeof(float);
  if (c == quant::Codec::Int8 && !o.stochastic) {
    int8Encode(v, n, inv, payload + o.first);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t e = o.first + i;
    const float dither = o.stochastic ? quant::stochasticUnit(o.seed, o.firstElem + e) : -1.0f;
    const uint8_t q = quant::quantizeOne(c, v[i], inv, dither);
    if (c == quant::Codec::Int4) {
      // Blocks are even-sized, so a byte's two nibbles belong to one block and the low one is written first.
      if (e % 2 == 0) payload[e / 2] = q;
      else payload[e / 2] = static_cast<uint8_t>(payload[e / 2] | (q << 4));
    } else {
      payload[e] = q;
    }
  }
}

void absmaxDecode(Format f, const unsigned char* wire, size_t count, size_t block, float* out, bool accumulate) {
  const quant::Codec c = quantCodec(f);
  const size_t nBlocks = quant::scaleCount(count, block);
  const unsigned char* payload = wire + nBlocks * sizeof(float);
  for (size_t b = 0, first = 0; b < nBlocks; ++b, first += block) {
    float scale;
    std::memcpy(&scale, wire + b * sizeof(float), sizeof(float));
    const size_t n = std::min(block, count - first);
    float* o = out + first;
    if (c == quant::Codec::Int8) {
      int8Decode(payload + first, n, scale, o, accumulate);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t e = first + i;
      const uint8_t stored = c == quant::Codec::Int4
                                 ? static_cast<uint8_t>(e % 2 == 0 ? payload[e / 2] & 0x0F : payload[e / 2] >> 4)
                                 : payload[e];
      const float v = quant::dequantizeOne(c, stored, scale);
      o[i] = accumulate ? o[i] + v : v;
    }
  }
}

}  // namespace detail

namespace quant {

size_t scaleCount(size_t count, size_t block) { return block == 0 ? 0 : (count + block - 1) / block; }

size_t payloadBytes(Codec codec, size_t count) { return codec == Codec::Int4 ? (count + 1) / 2 : count; }

size_t quantizedBytes(Codec codec, size_t count, size_t block) {
  return scaleCount(count, block) * sizeof(float) + payloadBytes(codec, count);
}

Status checkQuantize(Codec codec, DataType inType, size_t block) {
  if (codec != Codec::Int8 && codec != Codec::Fp8E4M3 && codec != Codec::Int4) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown quantisation codec %d", static_cast<int>(codec)));
  }
  if (block == 0 || block > (1u << 20) || (codec == Codec::Int4 && block % 2 != 0)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("quantisation block of %zu elements: must be 1..2^20, and even for int4", block));
  }
  if (inType != DataType::Float32 && inType != DataType::Bfloat16 && inType != DataType::Float16) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("quantisation input must be fp32, bf16 or fp16, not %s", dataTypeName(inType)));
  }
  return Status();
}

namespace {
compress::Format formatOf(Codec c) {
  return c == Codec::Int4 ? compress::Format::Int4 : c == Codec::Fp8E4M3 ? compress::Format::Fp8 : compress::Format::Int8;
}
}  // namespace

Status quantize(Codec codec, DataType inType, const void* in, size_t count, size_t block, void* out) {
  CFX_TRY(checkQuantize(codec, inType, block));
  std::vector<float> values(std::min(block, count));
  detail::BlockOut o;
  o.wire = static_cast<unsigned char*>(out);
  o.nBlocks = scaleCount(count, block);
  for (size_t b = 0; b < o.nBlocks; ++b) {
    o.block = b;
    o.first = b * block;
    const size_t n = std::min(block, count - o.first);
    detail::loadFloats(inType, static_cast<const char*>(in) + o.first * dataTypeSize(inType), n, values.data());
    detail::absmaxEncode(formatOf(codec), values.data(), n, o);
  }
  return Status();
}

Status dequantize(Codec codec, const void* in, size_t count, size_t block, float* out, bool accumulate) {
  CFX_TRY(checkQuantize(codec, DataType::Float32, block));
  detail::absmaxDecode(formatOf(codec), static_cast<const unsigned char*>(in), count, block, out, accumulate);
  return Status();
}

}  // namespace quant
}  // namespace cfx::compress
