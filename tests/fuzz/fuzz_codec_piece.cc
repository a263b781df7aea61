// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a codec piece as a receiver decodes it (compress/codec.h). The verbs hand a decoder exactly
// pieceBytes(count) bytes of a slice whose size they checked, and the bytes themselves are the sender's: any scale,
// code, index or value. So the header bytes pick a codec and a count, and the rest, cut to the piece's size, is
// decoded every way a receiver decodes: into fp32, accumulated, and into bf16. Nothing may be read or written
// outside the piece and the output, whatever the bytes say (ASan checks), and an index past its block is ignored.
//   byte 0: format (1..8), 1: block choice, 2: top-k values, 3: top-k fraction choice, 4-5: count (0..8191 values)
#include <cstring>
#include <vector>

#include "compress/codec.h"
#include "fuzz_common.h"

namespace compress = cfx::compress;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  compress::CodecSpec spec;
  spec.format = static_cast<compress::Format>(1 + data[0] % 8);
  constexpr uint32_t kBlocks[] = {0, 2, 32, 64, 100, 256, 4096, 70000};
  spec.block = kBlocks[data[1] % 8];
  spec.values = static_cast<compress::SparseValues>(data[2] % 4);
  constexpr float kFractions[] = {0.01f, 0.1f, 0.5f, 1.0f};
  spec.fraction = kFractions[data[3] % 4];
  const size_t count = (static_cast<size_t>(data[4]) | static_cast<size_t>(data[5]) << 8) % 8192;
  auto made = compress::Codec::make(spec, cfx::DataType::Float32);
  if (!made.ok()) return 0;
  const compress::Codec& codec = *made;
  const size_t bytes = codec.pieceBytes(count);
  if (size - 6 < bytes) return 0;
  // Exactly the piece, in a buffer of its own size: a read past it is a heap overflow ASan reports.
  const std::vector<uint8_t> piece(data + 6, data + 6 + bytes);
  std::vector<float> out(count, 1.0f);
  codec.decode(piece.data(), count, out.data(), false);
  codec.decode(piece.data(), count, out.data(), true);
  std::vector<uint16_t> half(count);
  codec.decodeTo(piece.data(), count, cfx::DataType::Bfloat16, half.data());
  return 0;
}
