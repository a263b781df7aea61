// SPDX-License-Identifier: Apache-2.0
// scan_perf: cfxScan (cfxExScan with --exclusive 1), nccl-tests' table and flags; -o sum|prod|max|min|affine (the
// affine op on groups of --rows decays and a --rows x --cols state). busbw = algbw * (n - 1) / n: every rank but the
// first must receive a state's worth of bytes from the ranks before it, which is what a link carries per rank in the
// cheapest schedule (the chain), so busbw near a link's rate means the state moved at line rate. -c 1 compares every
// rank's result with a sequential fold of the inputs in rank order (exact for the built-in ops, whose inputs are small
// integers; within fp32 rounding for the affine op).
#include <cmath>
#include <vector>

#include "common/datatypes.h"
#include "common/harness.h"
#include "common/options.h"
#include "common/verify.h"

namespace {

using namespace cfx::perf;

Layout layout(size_t count, size_t, int) { return {count, count, count, 0, 0}; }

void bandwidth(size_t count, size_t eltSize, double sec, int n, double* algBw, double* busBw) {
  *algBw = static_cast<double>(count * eltSize) / 1.0e9 / sec;
  *busBw = *algBw * (n - 1) / n;
}

ncclResult_t run(const OpArgs& a) {
  return a.options->exclusive ? cfxExScan(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, nullptr)
                              : cfxScan(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, nullptr);
}

size_t groupElems(const Options& o) { return static_cast<size_t>(o.rows) * (1 + static_cast<size_t>(o.cols)); }

size_t unitElems(int opIndex, const Options& o) { return opIndex == kAffine ? groupElems(o) : 1; }

uint64_t mix(uint64_t seed, int rank, size_t i) {
  uint64_t z = seed + (static_cast<uint64_t>(rank) << 40) + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 31);
}

// Built-in ops: small integers whose every prefix is exact in every type (|sum| <= n, products +-1); max and min
// compare unsigned types as unsigned, so they get 0..6 there and -3..3 elsewhere.
double builtinInput(int opIndex, ncclDataType_t type, uint64_t seed, int rank, size_t i) {
  const uint64_t h = mix(seed, rank, i);
  if (opIndex == ncclProd) return (h & 1) ? -1.0 : 1.0;
  if (opIndex == ncclSum) return static_cast<double>(h % 3) - 1.0;
  const bool unsignedType = !typeInfo(type).isFloat && !typeInfo(type).isSigned;
  return static_cast<double>(h % 7) - (unsignedType ? 0.0 : 3.0);
}

double combine(int opIndex, double a, double b) {
  switch (opIndex) {
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return a + b;
  }
}

double identity(int opIndex) {
  switch (opIndex) {
    case ncclProd: return 1.0;
    case ncclMax: return -INFINITY;
    case ncclMin: return INFINITY;
    default: return 0.0;
  }
}

// Affine: decays in [0.9, 1), states in [-1, 1].
double affineInput(uint64_t seed, int rank, size_t i, const Options& o) {
  const uint64_t h = mix(seed, rank, i);
  const double u = static_cast<double>(h >> 11) / 9007199254740992.0;
  return i % groupElems(o) < static_cast<size_t>(o.rows) ? 0.9 + 0.1 * u : 2.0 * u - 1.0;
}

void prepare(const CheckArgs& c) {
  const Options& o = *c.options;
  const size_t count = c.layout.recvCount;
  const size_t elt = typeInfo(c.type).size;
  auto* in = static_cast<char*>(c.input);
  auto* want = static_cast<char*>(c.expected);
  const int upTo = o.exclusive ? c.rank : c.rank + 1;  // ranks folded into this rank's result
  if (c.opIndex != kAffine) {
    for (size_t i = 0; i < count; ++i) {
      storeElement(c.type, builtinInput(c.opIndex, c.type, c.seed, c.rank, i), in + i * elt);
      double acc = identity(c.opIndex);
      for (int r = 0; r < upTo; ++r) acc = combine(c.opIndex, acc, builtinInput(c.opIndex, c.type, c.seed, r, i));
      // max/min identities of integer types are their extremes, not +-inf: store what the library writes.
      if (std::isinf(acc) && !typeInfo(c.type).isFloat) {
        const bool lowest = acc < 0;
        const TypeInfo& t = typeInfo(c.type);
        const double lo = t.isSigned ? -std::ldexp(1.0, 8 * static_cast<int>(elt) - 1) : 0.0;
        const double hi = std::ldexp(1.0, 8 * static_cast<int>(elt) - (t.isSigned ? 1 : 0)) - 1.0;
        acc = lowest ? lo : hi;
      }
      storeElement(c.type, acc, want + i * elt);
    }
    return;
  }
  const size_t group = groupElems(o);
  const size_t rows = static_cast<size_t>(o.rows);
  std::vector<double> acc(count), x(count);
  for (size_t i = 0; i < count; ++i) acc[i] = i % group < rows ? 1.0 : 0.0;
  for (int r = 0; r < upTo; ++r) {
    for (size_t i = 0; i < count; ++i) {
      // Through the type, as the ranks hold it.
      char tmp[8];
      storeElement(c.type, affineInput(c.seed, r, i, o), tmp);
      x[i] = loadElement(c.type, tmp);
    }
    for (size_t i = 0; i < count; ++i) {
      const size_t g = i / group * group;
      const size_t pos = i % group;
      acc[i] = pos < rows ? acc[i] * x[i] : x[g + (pos - rows) / static_cast<size_t>(o.cols)] * acc[i] + x[i];
    }
  }
  for (size_t i = 0; i < count; ++i) {
    storeElement(c.type, affineInput(c.seed, c.rank, i, o), in + i * elt);
    storeElement(c.type, acc[i], want + i * elt);
  }
}

// Affine results are exact only to fp32 rounding per combine: a few ulps of the largest state per rank.
double tolerance(const CheckArgs& c) {
  if (c.opIndex != kAffine) return 0;
  const double ulp = c.type == ncclFloat32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -7);
  return ulp * c.nRanks * std::max(1.0, maxAbs(c.type, c.expected, c.layout.recvCount));
}

const Collective kScan = [] {
  Collective c{OpColumn::Reduction, true, false, true, false, layout, bandwidth, run, prepare};
  c.opMask = (1u << ncclSum) | (1u << ncclProd) | (1u << ncclMax) | (1u << ncclMin) | (1u << kAffine);
  c.tolerance = tolerance;
  c.unitElems = unitElems;
  return c;
}();

}  // namespace

int main(int argc, char** argv) { return runBenchmark(argc, argv, kScan); }
