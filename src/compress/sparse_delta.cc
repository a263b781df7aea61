// SPDX-License-Identifier: Apache-2.0
// Lossless sparse deltas (compress layer); see sparse_delta.h.
//
// applyDelta validates everything before it writes anything: a delta arrives from the network, and a malformed one
// must leave the state as it was (the caller then resends the whole buffer).
#include "compress/sparse_delta.h"

#include <cstring>
#include <limits>

namespace cfx::compress {

namespace {

size_t indexBytes(uint64_t count) { return count >= (uint64_t{1} << 32) ? 8 : 4; }

uint64_t readIndex(const unsigned char* p, size_t width) {
  if (width == 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void writeIndex(unsigned char* p, uint64_t i, size_t width) {
  if (width == 4) {
    const auto v = static_cast<uint32_t>(i);
    std::memcpy(p, &v, 4);
  } else {
    std::memcpy(p, &i, 8);
  }
}

bool differs(const unsigned char* a, const unsigned char* b, size_t e) { return std::memcmp(a, b, e) != 0; }

// The first element from `i` on that differs, or count. Equal 64-byte stretches are skipped whole (element sizes
// are powers of two up to 8, so a stretch that starts on an element holds whole elements).
size_t nextChange(const unsigned char* s, const unsigned char* p, size_t i, size_t count, size_t e) {
  constexpr size_t kStretch = 64;
  while (i < count) {
    if ((i * e) % kStretch == 0 && (count - i) * e >= kStretch && std::memcmp(s + i * e, p + i * e, kStretch) == 0) {
      i += kStretch / e;
      continue;
    }
    if (differs(s + i * e, p + i * e, e)) return i;
    ++i;
  }
  return count;
}

}  // namespace

const char* deltaModeName(DeltaMode mode) {
  switch (mode) {
    case DeltaMode::Full: return "full";
    case DeltaMode::Indices: return "indices";
    case DeltaMode::Bitmap: return "bitmap";
  }
  return "unknown";
}

uint64_t deltaBytes(DeltaMode mode, uint64_t changed, uint64_t count, size_t eltSize) {
  switch (mode) {
    case DeltaMode::Full: return count * eltSize;
    case DeltaMode::Indices: return changed * (indexBytes(count) + eltSize);
    case DeltaMode::Bitmap: return (count + 7) / 8 + changed * eltSize;
  }
  return std::numeric_limits<uint64_t>::max();
}

DeltaPlan planDelta(const void* state, const void* previous, size_t count, size_t eltSize) {
  const auto* s = static_cast<const unsigned char*>(state);
  const auto* p = static_cast<const unsigned char*>(previous);
  DeltaPlan plan;
  for (size_t i = nextChange(s, p, 0, count, eltSize); i < count; i = nextChange(s, p, i + 1, count, eltSize)) {
    ++plan.changed;
  }
  plan.mode = DeltaMode::Full;
  plan.bytes = deltaBytes(DeltaMode::Full, plan.changed, count, eltSize);
  for (DeltaMode m : {DeltaMode::Indices, DeltaMode::Bitmap}) {
    const uint64_t b = deltaBytes(m, plan.changed, count, eltSize);
    if (b < plan.bytes) {
      plan.mode = m;
      plan.bytes = b;
    }
  }
  return plan;
}

void encodeDelta(const DeltaPlan& plan, const void* state, const void* previous, size_t count, size_t eltSize,
                 void* out) {
  const auto* s = static_cast<const unsigned char*>(state);
  const auto* p = static_cast<const unsigned char*>(previous);
  auto* o = static_cast<unsigned char*>(out);
  if (plan.mode == DeltaMode::Full) {
    if (count != 0) std::memcpy(o, s, count * eltSize);
    return;
  }
  const size_t width = indexBytes(count);
  unsigned char* values = o + (plan.mode == DeltaMode::Indices ? plan.changed * width : (count + 7) / 8);
  if (plan.mode == DeltaMode::Bitmap) std::memset(o, 0, (count + 7) / 8);
  uint64_t j = 0;
  for (size_t i = nextChange(s, p, 0, count, eltSize); i < count; i = nextChange(s, p, i + 1, count, eltSize), ++j) {
    if (plan.mode == DeltaMode::Indices) writeIndex(o + j * width, i, width);
    else o[i / 8] = static_cast<unsigned char>(o[i / 8] | (1u << (i % 8)));
    std::memcpy(values + j * eltSize, s + i * eltSize, eltSize);
  }
}

Status applyDelta(DeltaMode mode, const void* encoded, uint64_t encodedBytes, uint64_t changed, void* state,
                  size_t count, size_t eltSize) {
  const auto* in = static_cast<const unsigned char*>(encoded);
  auto* st = static_cast<unsigned char*>(state);
  if (mode != DeltaMode::Full && mode != DeltaMode::Indices && mode != DeltaMode::Bitmap) {
    return Status::error(Errc::InvalidArgument, strprintf("unknown delta encoding %d", static_cast<int>(mode)));
  }
  if (changed > count || encodedBytes != deltaBytes(mode, changed, count, eltSize)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("a %s delta of %llu changed elements out of %zu cannot be %llu bytes",
                                   deltaModeName(mode), static_cast<unsigned long long>(changed), count,
                                   static_cast<unsigned long long>(encodedBytes)));
  }
  if (mode == DeltaMode::Full) {
    if (count != 0) std::memcpy(st, in, count * eltSize);
    return Status();
  }
  const size_t width = indexBytes(count);
  if (mode == DeltaMode::Indices) {
    for (uint64_t j = 0; j < changed; ++j) {  // validate first: nothing is written unless all of it is sound
      const uint64_t i = readIndex(in + j * width, width);
      if (i >= count || (j > 0 && i <= readIndex(in + (j - 1) * width, width))) {
        return Status::error(Errc::InvalidArgument,
                             strprintf("delta index %llu (entry %llu) is out of range or not ascending",
                                       static_cast<unsigned long long>(i), static_cast<unsigned long long>(j)));
      }
    }
    const unsigned char* values = in + changed * width;
    for (uint64_t j = 0; j < changed; ++j) {
      std::memcpy(st + readIndex(in + j * width, width) * eltSize, values + j * eltSize, eltSize);
    }
    return Status();
  }
  const size_t mapBytes = (count + 7) / 8;
  uint64_t bits = 0;
  for (size_t b = 0; b < mapBytes; ++b) bits += static_cast<uint64_t>(__builtin_popcount(in[b]));
  const bool straysPastEnd = count % 8 != 0 && (in[mapBytes - 1] >> (count % 8)) != 0;
  if (bits != changed || straysPastEnd) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("delta bitmap marks %llu elements%s, but %llu were announced",
                                   static_cast<unsigned long long>(bits), straysPastEnd ? " (some past the end)" : "",
                                   static_cast<unsigned long long>(changed)));
  }
  const unsigned char* values = in + mapBytes;
  uint64_t j = 0;
  for (size_t b = 0; b < mapBytes; ++b) {
    for (unsigned m = in[b]; m != 0; m &= m - 1) {
      const size_t i = b * 8 + static_cast<size_t>(__builtin_ctz(m));
      std::memcpy(st + i * eltSize, values + j++ * eltSize, eltSize);
    }
  }
  return Status();
}

}  // namespace cfx::compress
