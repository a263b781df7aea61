// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark of the host reduction kernels (primitives layer): reduceLocal in place (partial += pre(local)),
// the inner step of a ring all-reduce. bytes_per_second counts memory traffic: two reads and one write per element.
// Not wired into perf/CMakeLists.txt; build by hand against cfx_primitives and Google Benchmark.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/types.h"
#include "primitives/reduce.h"

namespace {

using cfx::DataType;
using cfx::RedOpKind;
using cfx::prims::ReduceIsa;

void reduceInPlace(benchmark::State& state, DataType type, RedOpKind kind, ReduceIsa isa) {
  if (!cfx::prims::reduceIsaSupported(isa)) {
    state.SkipWithError("instruction set not supported on this CPU");
    return;
  }
  cfx::prims::setReduceIsa(isa);
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / cfx::dataTypeSize(type);
  // Small integers are exact in every type, so repeated sums stay finite and the loop does real arithmetic.
  std::vector<unsigned char> partial(bytes), local(bytes);
  const cfx::ReduceOp one = cfx::ReduceOp::builtin(type, RedOpKind::Sum, 1);
  const cfx::ReduceOp op = cfx::ReduceOp::builtin(type, kind, 8);
  std::memset(partial.data(), 0, bytes);
  std::memset(local.data(), 0, bytes);
  cfx::prims::prepareLocal(one, partial.data(), local.data(), count, false);
  for (auto _ : state) {
    cfx::prims::reduceLocal(op, partial.data(), partial.data(), local.data(), count, false);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}

void registerAll() {
  struct Case {
    const char* name;
    DataType type;
    RedOpKind kind;
  };
  const Case cases[] = {
      {"f32_sum", DataType::Float32, RedOpKind::Sum},  {"f64_sum", DataType::Float64, RedOpKind::Sum},
      {"i32_sum", DataType::Int32, RedOpKind::Sum},    {"i64_sum", DataType::Int64, RedOpKind::Sum},
      {"f32_avg", DataType::Float32, RedOpKind::Avg},  {"f32_max", DataType::Float32, RedOpKind::Max},
      {"f16_sum", DataType::Float16, RedOpKind::Sum},  {"bf16_sum", DataType::Bfloat16, RedOpKind::Sum},
      {"e4m3_sum", DataType::Fp8E4M3, RedOpKind::Sum}, {"i32_avg", DataType::Int32, RedOpKind::Avg},
  };
  for (const Case& c : cases) {
    for (ReduceIsa isa : {ReduceIsa::Portable, ReduceIsa::Avx2}) {
      const std::string name = std::string(c.name) + (isa == ReduceIsa::Avx2 ? "/avx2" : "/portable");
      benchmark::RegisterBenchmark(name.c_str(), reduceInPlace, c.type, c.kind, isa)
          ->Arg(32 << 10)
          ->Arg(1 << 20)
          ->Arg(64 << 20);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
