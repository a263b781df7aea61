// SPDX-License-Identifier: Apache-2.0
// perf/compare: what mpi_bench.cc and gloo_bench.cc share. Flags, the nccl-tests buffer layout of each
// collective, the input values and expected outputs used for the correctness check, per-iteration statistics and
// the one machine-readable result line the driver (compare.py) parses. Header-only so that each benchmark builds
// with a single compiler call (mpicxx or g++ -lgloo) and no CMake.
//
// Measurement contract, the same as nccl-tests' out-of-place column: per size, `warmup` untimed ops, then
// `iters` ops back to back with no barrier in between, each timed on every rank. time_us is the mean time of one
// op averaged over ranks (nccl-tests' default `-a 1`); median_us is the median over iterations of the slowest
// rank's time (nccl-tests' `-I` view). The check runs one extra op on fresh inputs before the timed loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cfxcmp {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, ExScan };

struct Options {
  Coll coll = Coll::AllReduce;
  std::string collName = "all_reduce";
  std::vector<size_t> sizes;  // nominal bytes, as given to nccl-tests' -b/-e/-f
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::string algo = "default";  // gloo: algorithm; mpi: a label for the transport (vader, ucx, tcp)
};

inline bool parseColl(const std::string& name, Coll* coll) {
  static const struct { const char* name; Coll coll; } kColls[] = {
      {"all_reduce", Coll::AllReduce}, {"all_gather", Coll::AllGather},
      {"reduce_scatter", Coll::ReduceScatter}, {"broadcast", Coll::Broadcast}, {"alltoall", Coll::AllToAll},
      {"exscan", Coll::ExScan}};
  for (const auto& c : kColls) {
    if (name == c.name) {
      *coll = c.coll;
      return true;
    }
  }
  return false;
}

// Returns an empty string on success, else the error.
inline std::string parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return "missing value for " + flag;
    std::string value = argv[++i];
    if (flag == "--coll") {
      if (!parseColl(value, &o->coll)) return "unknown collective " + value;
      o->collName = value;
    } else if (flag == "--sizes") {
      for (size_t pos = 0; pos < value.size();) {
        size_t end = value.find(',', pos);
        if (end == std::string::npos) end = value.size();
        o->sizes.push_back(std::strtoull(value.substr(pos, end - pos).c_str(), nullptr, 10));
        pos = end + 1;
      }
    } else if (flag == "--iters") {
      o->iters = std::atoi(value.c_str());
    } else if (flag == "--warmup") {
      o->warmup = std::atoi(value.c_str());
    } else if (flag == "--check") {
      o->check = std::atoi(value.c_str()) != 0;
    } else if (flag == "--algo") {
      o->algo = value;
    } else {
      return "unknown flag " + flag;
    }
  }
  if (o->sizes.empty()) return "--sizes is required";
  if (o->iters < 1 || o->warmup < 0) return "--iters must be >= 1 and --warmup >= 0";
  return "";
}

// Element counts for one nominal size, float32, following perf/<coll>.cc (nccl-tests' GetCollByteCount).
struct Layout {
  size_t sendCount;  // elements this rank sends from
  size_t recvCount;  // elements this rank receives into
  size_t block;      // per-rank block (split collectives) or the whole count
  size_t bytes;      // nccl-tests' size column: the larger of one rank's send and receive bytes
};

inline Layout layoutFor(Coll coll, size_t nominalBytes, int nRanks) {
  size_t count = nominalBytes / sizeof(float);
  size_t n = static_cast<size_t>(nRanks);
  size_t perRank = (count / n) & ~static_cast<size_t>(16 / sizeof(float) - 1);  // 16-byte blocks
  switch (coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::ExScan:
      return {count, count, count, count * sizeof(float)};
    case Coll::AllGather:
      return {perRank, perRank * n, perRank, perRank * n * sizeof(float)};
    case Coll::ReduceScatter:
      return {perRank * n, perRank, perRank, perRank * n * sizeof(float)};
    case Coll::AllToAll:
      return {perRank * n, perRank * n, perRank, perRank * n * sizeof(float)};
  }
  return {};
}

// Input element `index` of `rank`'s send buffer: a small integer, so every sum is exact in any order.
inline float inputValue(int rank, size_t index) {
  return static_cast<float>(static_cast<int>((rank * 7 + index * 3) % 11) - 5);
}

inline void fillInput(Coll coll, int rank, const Layout& l, float* send) {
  size_t n = coll == Coll::Broadcast && rank != 0 ? 0 : l.sendCount;  // non-roots get zeros
  for (size_t i = 0; i < l.sendCount; ++i) send[i] = i < n ? inputValue(rank, i) : 0.0f;
}

inline void fillExpected(Coll coll, int rank, int nRanks, const Layout& l, float* expected) {
  for (size_t i = 0; i < l.recvCount; ++i) {
    float v = 0;
    switch (coll) {
      case Coll::AllReduce:
        for (int r = 0; r < nRanks; ++r) v += inputValue(r, i);
        break;
      case Coll::Broadcast:
        v = inputValue(0, i);
        break;
      case Coll::AllGather:  // block r of the output is rank r's input
        v = inputValue(static_cast<int>(i / l.block), i % l.block);
        break;
      case Coll::ReduceScatter:  // block `rank` of everyone's input, summed
        for (int r = 0; r < nRanks; ++r) v += inputValue(r, rank * l.block + i);
        break;
      case Coll::AllToAll:  // block q of the output is block `rank` of rank q's input
        v = inputValue(static_cast<int>(i / l.block), rank * l.block + i % l.block);
        break;
      case Coll::ExScan:  // the ranks before this one (rank 0: untouched by MPI_Exscan, zero from the start)
        for (int r = 0; r < rank; ++r) v += inputValue(r, i);
        break;
    }
    expected[i] = v;
  }
}

inline size_t countWrong(const float* got, const float* expected, size_t count) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += std::memcmp(&got[i], &expected[i], sizeof(float)) != 0;
  return wrong;
}

// busbw factor of nccl-tests' PERFORMANCE.md.
inline double busFactor(Coll coll, int nRanks) {
  double n = nRanks;
  switch (coll) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::Broadcast:
      return 1.0;
    default:  // the split collectives; ExScan as scan_perf defines it (every rank but the first receives a state)
      return (n - 1) / n;
  }
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The result line (rank 0 only). `meanSeconds` is the rank-averaged mean op time; `iterMaxSeconds` the
// per-iteration maximum over ranks.
inline void printResult(const char* lib, const Options& o, size_t nominal, const Layout& l, int nRanks,
                        double meanSeconds, const std::vector<double>& iterMaxSeconds, size_t wrong) {
  double t = meanSeconds;
  double algbw = t > 0 ? static_cast<double>(l.bytes) / 1e9 / t : 0;
  std::printf(
      "CFXCMP lib=%s algo=%s coll=%s nominal=%zu bytes=%zu ranks=%d iters=%d warmup=%d time_us=%.3f "
      "median_us=%.3f algbw=%.4f busbw=%.4f wrong=%zu\n",
      lib, o.algo.c_str(), o.collName.c_str(), nominal, l.bytes, nRanks, o.iters, o.warmup, t * 1e6,
      median(iterMaxSeconds) * 1e6, algbw, algbw * busFactor(o.coll, nRanks), wrong);
  std::fflush(stdout);
}

}  // namespace cfxcmp
