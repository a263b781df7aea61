// SPDX-License-Identifier: Apache-2.0
// Codec: validation, names, piece sizes, and the per-block loop that feeds every format fp32 blocks (compress layer).
//
// Encoding a piece walks it block by block. A block's values reach the format as fp32: read in place when the input
// is fp32 and there is no error feedback (the common case, and no copy), else converted into a thread-local block
// buffer with the residual added. With feedback the block is decoded again right away, while it is in cache, to
// leave the residual what was not sent.
#include "compress/codec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/formats.h"

namespace cfx::compress {

namespace {

constexpr uint32_t kMaxBlock = 1u << 20;

uint32_t defaultBlock(Format f) {
  switch (f) {
    case Format::MxInt8:
    case Format::MxFp8: return 32;
    case Format::TopK: return 4096;
    case Format::Bf16:
    case Format::Fp16: return 1024;  // casts have no blocks; this only sets the encode loop's step
    default: return 256;
  }
}

bool isCast(Format f) { return f == Format::Bf16 || f == Format::Fp16; }
bool isAbsmax(Format f) { return f == Format::Int8 || f == Format::Int4 || f == Format::Fp8; }
bool isMx(Format f) { return f == Format::MxInt8 || f == Format::MxFp8; }

// FNV-1a over the fields that change the bytes.
uint32_t digest(const CodecSpec& s, DataType type) {
  uint32_t h = 2166136261u;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint8_t>(v >> (8 * i));
      h *= 16777619u;
    }
  };
  uint32_t fractionBits;
  std::memcpy(&fractionBits, &s.fraction, 4);
  mix(static_cast<uint64_t>(s.format));
  mix(s.block);
  mix(static_cast<uint64_t>(s.rounding));
  mix(s.format == Format::TopK ? static_cast<uint64_t>(s.values) : 0);
  mix(s.format == Format::TopK ? fractionBits : 0);
  mix(s.rounding == Rounding::Stochastic ? s.seed : 0);
  mix(static_cast<uint64_t>(type));
  return h;
}

const char* valuesName(SparseValues v) {
  switch (v) {
    case SparseValues::Fp32: return "fp32";
    case SparseValues::Bf16: return "bf16";
    case SparseValues::Int8: return "int8";
    case SparseValues::Bits2: return "2bit";
  }
  return "?";
}

Status bad(const std::string& what) { return Status::error(Errc::InvalidArgument, what); }

// The block buffer of one encode call: fp32 values, and their decoded form for error feedback.
struct BlockBuffers {
  std::vector<float> values;
  std::vector<float> decoded;
};
BlockBuffers& blockBuffers(size_t n) {
  thread_local BlockBuffers b;
  if (b.values.size() < n) {
    b.values.resize(n);
    b.decoded.resize(n);
  }
  return b;
}

}  // namespace

const char* formatName(Format f) {
  switch (f) {
    case Format::None: return "none";
    case Format::Bf16: return "bf16";
    case Format::Fp16: return "fp16";
    case Format::Int8: return "int8";
    case Format::MxInt8: return "mxint8";
    case Format::MxFp8: return "mxfp8";
    case Format::Int4: return "int4";
    case Format::TopK: return "topk";
    case Format::Fp8: return "fp8";
  }
  return "unknown";
}

Result<CodecSpec> parseCodec(std::string_view text) {
  CodecSpec spec;
  auto next = [&text]() {
    const size_t colon = text.find(':');
    std::string_view part = text.substr(0, colon);
    text = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
    return part;
  };
  const std::string_view name = next();
  bool found = false;
  for (int f = 0; f < kNumFormats; ++f) {
    if (name == formatName(static_cast<Format>(f))) {
      spec.format = static_cast<Format>(f);
      found = true;
    }
  }
  if (!found) {
    return bad(strprintf("unknown codec '%.*s': expected none, bf16, fp16, int8, mxint8, mxfp8, int4, fp8 or "
                         "topk:FRACTION", static_cast<int>(name.size()), name.data()));
  }
  if (spec.format == Format::TopK) {
    const std::string fraction(next());
    char* end = nullptr;
    const double f = std::strtod(fraction.c_str(), &end);
    if (fraction.empty() || end != fraction.c_str() + fraction.size() || !(f > 0.0 && f <= 1.0)) {
      return bad(strprintf("codec topk needs its kept fraction in (0, 1], as topk:0.01; got '%s'", fraction.c_str()));
    }
    spec.fraction = static_cast<float>(f);
  }
  while (!text.empty()) {
    const std::string_view opt = next();
    auto number = [&opt](std::string_view key, uint64_t* out) {
      if (opt.substr(0, key.size()) != key) return false;
      const std::string_view digits = opt.substr(key.size());
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
      return ec == std::errc() && p == digits.data() + digits.size() && !digits.empty();
    };
    uint64_t v = 0;
    if (opt == "sr") {
      spec.rounding = Rounding::Stochastic;
    } else if (number("block=", &v)) {
      if (v > kMaxBlock) return bad(strprintf("codec block of %llu elements: at most 2^20", static_cast<unsigned long long>(v)));
      spec.block = static_cast<uint32_t>(v);
    } else if (number("seed=", &v)) {
      spec.seed = v;
    } else if (opt.substr(0, 7) == "values=") {
      const std::string_view val = opt.substr(7);
      bool ok = false;
      for (int i = 0; i < 4; ++i) {
        if (val == valuesName(static_cast<SparseValues>(i))) {
          spec.values = static_cast<SparseValues>(i);
          ok = true;
        }
      }
      if (!ok) return bad(strprintf("codec values '%.*s': expected fp32, bf16, int8 or 2bit", static_cast<int>(val.size()), val.data()));
    } else {
      return bad(strprintf("unknown codec option '%.*s': expected block=N, values=..., sr or seed=N",
                           static_cast<int>(opt.size()), opt.data()));
    }
  }
  return spec;
}

std::string codecText(const CodecSpec& spec) {
  std::string s = formatName(spec.format);
  if (spec.format == Format::TopK) s += strprintf(":%g:values=%s", static_cast<double>(spec.fraction), valuesName(spec.values));
  if (spec.block != 0) s += strprintf(":block=%u", spec.block);
  if (spec.rounding == Rounding::Stochastic) s += ":sr";
  if (spec.seed != 0) s += strprintf(":seed=%llu", static_cast<unsigned long long>(spec.seed));
  return s;
}

Result<Codec> Codec::make(const CodecSpec& given, DataType valueType) {
  CodecSpec spec = given;
  const auto f = static_cast<int>(spec.format);
  if (f <= 0 || f >= kNumFormats) {
    return bad(strprintf("codec format %d is not a codec (bf16, fp16, int8, mxint8, mxfp8, int4, fp8, topk)", f));
  }
  if (spec.rounding != Rounding::Nearest && spec.rounding != Rounding::Stochastic) {
    return bad(strprintf("codec rounding %d: expected nearest (0) or stochastic (1)", static_cast<int>(spec.rounding)));
  }
  if (valueType != DataType::Float32 && valueType != DataType::Bfloat16 && valueType != DataType::Float16) {
    return bad(strprintf("codec %s cannot carry %s values: codecs take fp32, bf16 or fp16 buffers",
                         formatName(spec.format), dataTypeName(valueType)));
  }
  if (spec.block == 0) spec.block = defaultBlock(spec.format);
  if (spec.block > kMaxBlock) return bad(strprintf("codec block of %u elements: at most 2^20", spec.block));
  if (isMx(spec.format) && spec.block != 32) {
    return bad(strprintf("codec %s has blocks of 32 elements (OCP MX), not %u", formatName(spec.format), spec.block));
  }
  if (spec.format == Format::Int4 && spec.block % 2 != 0) {
    return bad(strprintf("codec int4 needs an even block (two elements a byte), not %u", spec.block));
  }
  if (spec.format == Format::TopK) {
    if (!(spec.fraction > 0.0f && spec.fraction <= 1.0f)) {
      return bad(strprintf("codec topk keeps a fraction in (0, 1] of each block, not %g", static_cast<double>(spec.fraction)));
    }
    if (static_cast<unsigned>(spec.values) > 3u) {
      return bad(strprintf("codec topk value format %d: expected fp32 (0), bf16 (1), int8 (2) or 2-bit (3)",
                           static_cast<int>(spec.values)));
    }
  }
  const bool srCapable = spec.format == Format::Bf16 || spec.format == Format::Int8 || spec.format == Format::Int4 ||
                         spec.format == Format::MxInt8;
  if (spec.rounding == Rounding::Stochastic && !srCapable) {
    return bad(strprintf("codec %s has no stochastic rounding (bf16, int8, int4 and mxint8 do)", formatName(spec.format)));
  }
  Codec c;
  c.spec_ = spec;
  c.valueType_ = valueType;
  c.signature_ = digest(spec, valueType);
  return c;
}

size_t Codec::pieceBytes(size_t count) const {
  const Format f = spec_.format;
  if (isCast(f)) return 2 * count;
  if (isAbsmax(f)) return detail::absmaxPieceBytes(f, count, spec_.block);
  if (isMx(f)) return detail::mxPieceBytes(count, spec_.block);
  return detail::topkPieceBytes(spec_, count);
}

size_t Codec::pieceElems(size_t slotBytes) const {
  if (isCast(spec_.format)) return slotBytes / 2;  // no blocks: any count of elements is a piece
  // Piece bytes grow with whole blocks, so divide and then step down over the few blocks rounding put too many.
  const size_t perBlock = pieceBytes(spec_.block);
  size_t blocks = perBlock == 0 ? 0 : slotBytes / perBlock;
  while (blocks > 0 && pieceBytes(blocks * spec_.block) > slotBytes) --blocks;
  return blocks * spec_.block;
}

size_t Codec::framedBytes(size_t count, size_t pieceElems) const {
  if (pieceElems == 0) return 0;
  return count / pieceElems * pieceBytes(pieceElems) + pieceBytes(count % pieceElems);
}

void Codec::encode(const void* in, DataType inType, size_t count, void* wire, const EncodeContext& ctx) const {
  const size_t block = spec_.block;
  const size_t elt = dataTypeSize(inType);
  detail::BlockOut o;
  o.wire = static_cast<unsigned char*>(wire);
  o.nBlocks = (count + block - 1) / block;
  o.stochastic = spec_.rounding == Rounding::Stochastic;
  o.seed = spec_.seed ^ (ctx.seed * 0xD1B54A32D192ED03ull);
  o.firstElem = ctx.firstElem;
  // fp32 input read in place: no copy, when no residual is added and the user's pointer is aligned for floats.
  const bool inPlace =
      inType == DataType::Float32 && ctx.residual == nullptr && reinterpret_cast<uintptr_t>(in) % alignof(float) == 0;
  BlockBuffers& buf = blockBuffers(inPlace ? 0 : std::min(block, count));
  unsigned char* record = o.wire;  // TopK: records back to back
  for (size_t b = 0; b < o.nBlocks; ++b) {
    o.block = b;
    o.first = b * block;
    const size_t n = std::min(block, count - o.first);
    const float* v = nullptr;
    if (inPlace) {
      v = static_cast<const float*>(in) + o.first;
    } else {
      detail::loadFloats(inType, static_cast<const char*>(in) + o.first * elt, n, buf.values.data());
      if (ctx.residual != nullptr) {
        float* e = ctx.residual + o.first;
        for (size_t i = 0; i < n; ++i) buf.values[i] += e[i];
      }
      v = buf.values.data();
    }
    const Format f = spec_.format;
    if (isCast(f)) detail::castEncode(f, v, n, o);
    else if (isAbsmax(f)) detail::absmaxEncode(f, v, n, o);
    else if (isMx(f)) detail::mxEncode(f, v, n, o);
    else record += detail::topkEncodeBlock(spec_, v, n, record);
  }
  if (ctx.residual != nullptr) {
    // Whatever the code did not carry stays in the residual: e = (e + x) - decode(code), block by block in cache.
    std::vector<float>& dec = buf.decoded;
    if (dec.size() < count) dec.resize(count);
    decode(wire, count, dec.data(), false);
    for (size_t first = 0; first < count; first += block) {
      const size_t n = std::min(block, count - first);
      detail::loadFloats(inType, static_cast<const char*>(in) + first * elt, n, buf.values.data());
      float* e = ctx.residual + first;
      for (size_t i = 0; i < n; ++i) e[i] = (e[i] + buf.values[i]) - dec[first + i];
    }
  }
}

void Codec::decode(const void* wire, size_t count, float* out, bool accumulate) const {
  const auto* w = static_cast<const unsigned char*>(wire);
  const Format f = spec_.format;
  if (isCast(f)) detail::castDecode(f, w, 0, count, out, accumulate);
  else if (isAbsmax(f)) detail::absmaxDecode(f, w, count, spec_.block, out, accumulate);
  else if (isMx(f)) detail::mxDecode(f, w, count, spec_.block, out, accumulate);
  else detail::topkDecode(spec_, w, count, out, accumulate);
}

void Codec::decodeTo(const void* wire, size_t count, DataType outType, void* out) const {
  if (outType == DataType::Float32 && reinterpret_cast<uintptr_t>(out) % alignof(float) == 0) {
    decode(wire, count, static_cast<float*>(out), false);
    return;
  }
  thread_local std::vector<float> tmp;
  if (tmp.size() < count) tmp.resize(count);
  decode(wire, count, tmp.data(), false);
  detail::storeFloats(outType, tmp.data(), count, out);
}

}  // namespace cfx::compress
