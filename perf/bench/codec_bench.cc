// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark of the codecs (compress layer): encode and decode throughput of one core, counted in bytes of fp32
// input (the figure that says on which links compression pays: a codec that encodes at G GB/s keeps up with a link
// of 8 G Gbit/s of fp32). Pieces of one 128 KiB slot's worth, as the verbs encode them.
//   build/perf/codec_bench --benchmark_filter=int8
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "compress/codec.h"

namespace {

using cfx::compress::Codec;

void run(benchmark::State& state, const char* name, bool decode) {
  auto spec = cfx::compress::parseCodec(name);
  auto made = Codec::make(*spec, cfx::DataType::Float32);
  const Codec& c = *made;
  const size_t count = static_cast<size_t>(state.range(0)) / 4;
  const size_t piece = c.pieceElems(size_t{128} << 10);
  std::vector<float> x(count), y(count);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<unsigned char> wire(c.framedBytes(count, piece));
  auto encodeAll = [&] {
    size_t off = 0;
    for (size_t first = 0; first < count; first += piece) {
      const size_t n = std::min(piece, count - first);
      c.encode(x.data() + first, cfx::DataType::Float32, n, wire.data() + off, {});
      off += c.pieceBytes(n);
    }
  };
  encodeAll();
  for (auto _ : state) {
    if (decode) {
      size_t off = 0;
      for (size_t first = 0; first < count; first += piece) {
        const size_t n = std::min(piece, count - first);
        c.decode(wire.data() + off, n, y.data() + first, true);
        off += c.pieceBytes(n);
      }
    } else {
      encodeAll();
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(count * 4));
}

const char* const kCodecs[] = {"bf16", "fp16", "int8", "mxint8", "mxfp8", "int4", "fp8", "topk:0.01"};

int registerAll() {
  for (const char* name : kCodecs) {
    for (bool decode : {false, true}) {
      benchmark::RegisterBenchmark((std::string(decode ? "decode_acc/" : "encode/") + name).c_str(),
                                   [name, decode](benchmark::State& s) { run(s, name, decode); })
          ->Arg(1 << 20)
          ->Arg(32 << 20);
    }
  }
  return 0;
}
const int kRegistered = registerAll();

}  // namespace
