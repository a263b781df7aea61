// SPDX-License-Identifier: Apache-2.0
// What moe_perf (perf/moe.cc) and its Open MPI counterpart (perf/compare/mpi_moe_bench.cc) share, header only so the
// MPI benchmark builds with one mpicxx call: the routing each rank draws, and the unfused MoE pipeline, written once
// over a transport that supplies the two exchanges (an all-to-all of counts, an all-to-all-v of rows), so both
// libraries run the very same permute, unpack, pack-back and weighted sum around their own all-to-all-v.
//
//   dispatch: permute the (token, k) rows into a buffer grouped by expert (token order within each); all-to-all of
//             the per-expert counts; all-to-all-v of the rows; unpack them into expert-major order (local expert,
//             then source rank, then token), the order cfxMoeDispatch returns.
//   combine:  pack the experts' rows back into source-major blocks; all-to-all-v back; per token the sum over k of
//             weight x row in fp32, in k order, rounded once.
// Experts are dealt to ranks in contiguous blocks (conflux.h's default map).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cfxmoe {

struct Shape {
  size_t tokens = 0;  // per rank
  size_t hidden = 0;
  int topk = 1;
  int experts = 1;
  std::string routing = "uniform";
  int rank = 0;
  int nRanks = 1;
};

inline int firstExpert(int rank, int n, int experts) { return experts / n * rank + std::min(rank, experts % n); }
inline int rankOfExpert(int e, int n, int experts) {
  int r = 0;
  while (r + 1 < n && firstExpert(r + 1, n, experts) <= e) ++r;
  return r;
}

// topk distinct experts per token, by routing: uniform; zipf:S (expert e drawn with weight (e + 1)^-S); hot:F (the
// first expert of a fraction F of the tokens is expert 0). Weights 2^-(k+1), so every sum of weighted small integers
// is exact in fp32. The same (shape, rank) always draws the same routing.
struct Routing {
  std::vector<int32_t> ids;    // tokens x topk
  std::vector<float> weights;  // tokens x topk
};

inline Routing drawRouting(const Shape& s) {
  Routing out;
  const auto k = static_cast<size_t>(s.topk);
  out.ids.assign(s.tokens * k, 0);
  out.weights.assign(s.tokens * k, 0);
  std::mt19937_64 rng(0x6d6f65ull * 1000003u + static_cast<uint64_t>(s.rank) * 7919u + s.tokens);
  std::vector<double> popularity(static_cast<size_t>(s.experts), 1.0);
  double hot = 0;
  if (s.routing.rfind("zipf:", 0) == 0) {
    const double exponent = std::atof(s.routing.c_str() + 5);
    for (size_t e = 0; e < popularity.size(); ++e) popularity[e] = std::pow(static_cast<double>(e + 1), -exponent);
  } else if (s.routing.rfind("hot:", 0) == 0) {
    hot = std::atof(s.routing.c_str() + 4);
  }
  std::discrete_distribution<int> pick(popularity.begin(), popularity.end());
  std::uniform_real_distribution<double> unit(0, 1);
  for (size_t t = 0; t < s.tokens; ++t) {
    int32_t* row = out.ids.data() + t * k;
    size_t filled = 0;
    if (hot > 0 && unit(rng) < hot) row[filled++] = 0;
    while (filled < k) {
      const int e = pick(rng);
      if (std::find(row, row + filled, e) == row + filled) row[filled++] = e;
    }
    for (size_t j = 0; j < k; ++j) out.weights[t * k + j] = std::ldexp(1.0f, -static_cast<int>(j) - 1);
  }
  return out;
}

// Element types of the weighted sum: fp32, bf16 (2-byte storage, shifts each way, round to nearest even for finite
// values, as the library rounds) and fp16 (the compiler's _Float16).
struct F32 {
  using S = float;
  static float widen(float v) { return v; }
  static float narrow(float v) { return v; }
};
struct Bf16 {
  using S = uint16_t;
  static float widen(uint16_t v) {
    const uint32_t u = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t narrow(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};
struct F16 {
  using S = _Float16;
  static float widen(_Float16 v) { return static_cast<float>(v); }
  static _Float16 narrow(float v) { return static_cast<_Float16>(v); }
};

// out = round(sum over k of w[k] x rows[k]), fp32 in k order: one token of the unfused combine.
template <class T>
[[gnu::always_inline]] inline void weightedSum(const char* const* rows, const float* w, size_t k, size_t hidden,
                                               float* acc, char* out) {
  using S = typename T::S;
  for (size_t j = 0; j < k; ++j) {
    const auto* y = reinterpret_cast<const S*>(rows[j]);
    if (j == 0) {
      for (size_t h = 0; h < hidden; ++h) acc[h] = w[j] * T::widen(y[h]);
    } else {
      for (size_t h = 0; h < hidden; ++h) acc[h] = acc[h] + w[j] * T::widen(y[h]);
    }
  }
  auto* o = reinterpret_cast<S*>(out);
  for (size_t h = 0; h < hidden; ++h) o[h] = T::narrow(acc[h]);
}

// The same loop compiled for AVX2 where the CPU has it, as the library's kernels are: a slower baseline would
// flatter the fused path.
using SumFn = void (*)(const char* const*, const float*, size_t, size_t, float*, char*);
template <class T>
void weightedSumPortable(const char* const* rows, const float* w, size_t k, size_t hidden, float* acc, char* out) {
  weightedSum<T>(rows, w, k, hidden, acc, out);
}
template <class T>
[[gnu::target("avx2")]] void weightedSumAvx2(const char* const* rows, const float* w, size_t k, size_t hidden,
                                             float* acc, char* out) {
  weightedSum<T>(rows, w, k, hidden, acc, out);
}
// eltBytes 4: fp32; 2: bf16, or fp16 with half = true.
inline SumFn sumFor(size_t eltBytes, bool half) {
  const bool avx2 = __builtin_cpu_supports("avx2");
  if (eltBytes == 4) return avx2 ? weightedSumAvx2<F32> : weightedSumPortable<F32>;
  if (half) return weightedSumPortable<F16>;
  return avx2 ? weightedSumAvx2<Bf16> : weightedSumPortable<Bf16>;
}

// The unfused pipeline of one rank. Transport provides
//   int countsAlltoall(const int32_t* send, int32_t* recv, size_t perPeer)        (0 on success)
//   int rowsAlltoallv(const void* send, const size_t* sendBytes, const size_t* sendOffsets,
//                     void* recv, const size_t* recvBytes, const size_t* recvOffsets)
//   char* buffer(int which, size_t bytes)   scratch buffers 0..2 that persist between calls
template <class Transport>
class Unfused {
 public:
  Unfused(const Shape& shape, size_t eltBytes, bool half) : s_(shape), elt_(eltBytes), sum_(sumFor(eltBytes, half)) {}

  // The expert-major rows this rank's experts received (rows per local expert in perLocal()), valid until combine.
  char* expertMajor() const { return expertMajor_; }
  const std::vector<long long>& perLocal() const { return perLocal_; }

  int dispatch(Transport& t, const Routing& routing, const char* tokens) {
    const auto n = static_cast<size_t>(s_.nRanks);
    const auto k = static_cast<size_t>(s_.topk);
    const auto experts = static_cast<size_t>(s_.experts);
    const size_t rowBytes = s_.hidden * elt_;
    const size_t assignments = s_.tokens * k;
    std::vector<size_t> perExpert(experts, 0), at(experts, 0);
    for (int32_t e : routing.ids) ++perExpert[static_cast<size_t>(e)];
    for (size_t e = 1; e < experts; ++e) at[e] = at[e - 1] + perExpert[e - 1];
    perm_.resize(assignments);
    packed_ = t.buffer(0, std::max<size_t>(assignments, 1) * rowBytes);
    if (packed_ == nullptr) return 1;
    for (size_t i = 0; i < assignments; ++i) {
      const size_t row = at[static_cast<size_t>(routing.ids[i])]++;
      perm_[i] = row;
      std::memcpy(packed_ + row * rowBytes, tokens + (i / k) * rowBytes, rowBytes);
    }
    // Every rank learns how many rows of each of its experts every rank sends (blocks padded to the largest).
    maxLocal_ = (experts + n - 1) / n;
    std::vector<int32_t> countsOut(n * maxLocal_, 0);
    countsIn_.assign(n * maxLocal_, 0);
    for (size_t e = 0; e < experts; ++e) {
      const auto p = static_cast<size_t>(rankOfExpert(static_cast<int>(e), s_.nRanks, s_.experts));
      countsOut[p * maxLocal_ + e - static_cast<size_t>(firstExpert(static_cast<int>(p), s_.nRanks, s_.experts))] =
          static_cast<int32_t>(perExpert[e]);
    }
    if (int rc = t.countsAlltoall(countsOut.data(), countsIn_.data(), maxLocal_)) return rc;
    sendBytes_.assign(n, 0);
    sendAt_.assign(n, 0);
    recvBytes_.assign(n, 0);
    recvAt_.assign(n, 0);
    size_t sendTotal = 0;
    size_t recvTotal = 0;
    for (size_t p = 0; p < n; ++p) {
      for (size_t l = 0; l < maxLocal_; ++l) {
        sendBytes_[p] += static_cast<size_t>(countsOut[p * maxLocal_ + l]) * rowBytes;
        recvBytes_[p] += static_cast<size_t>(countsIn_[p * maxLocal_ + l]) * rowBytes;
      }
      sendAt_[p] = sendTotal;
      recvAt_[p] = recvTotal;
      sendTotal += sendBytes_[p];
      recvTotal += recvBytes_[p];
    }
    received_ = t.buffer(1, std::max<size_t>(recvTotal, 1));
    expertMajor_ = t.buffer(2, std::max<size_t>(recvTotal, 1));
    if (received_ == nullptr || expertMajor_ == nullptr) return 1;
    if (int rc = t.rowsAlltoallv(packed_, sendBytes_.data(), sendAt_.data(), received_, recvBytes_.data(),
                                 recvAt_.data())) {
      return rc;
    }
    // Unpack: each source's block of each local expert, into expert-major order.
    moveBlocks(rowBytes, /*toExpertMajor=*/true);
    return 0;
  }

  // expertOut: the experts' rows in expertMajor()'s order and layout (it may be expertMajor() itself).
  int combine(Transport& t, const Routing& routing, const char* expertOut, char* out) {
    const auto k = static_cast<size_t>(s_.topk);
    const size_t rowBytes = s_.hidden * elt_;
    if (expertOut != expertMajor_) std::memcpy(expertMajor_, expertOut, rowsReceived() * rowBytes);
    moveBlocks(rowBytes, /*toExpertMajor=*/false);  // into `received_`, source-major again
    if (int rc = t.rowsAlltoallv(received_, recvBytes_.data(), recvAt_.data(), packed_, sendBytes_.data(),
                                 sendAt_.data())) {
      return rc;
    }
    acc_.resize(s_.hidden);
    std::vector<const char*> rows(k);
    for (size_t tok = 0; tok < s_.tokens; ++tok) {
      for (size_t j = 0; j < k; ++j) rows[j] = packed_ + perm_[tok * k + j] * rowBytes;
      sum_(rows.data(), routing.weights.data() + tok * k, k, s_.hidden, acc_.data(), out + tok * rowBytes);
    }
    return 0;
  }

 private:
  size_t rowsReceived() const {
    size_t rows = 0;
    for (long long c : perLocal_) rows += static_cast<size_t>(c);
    return rows;
  }

  // Between source-major blocks (received_: per source, its rows of each local expert) and expert-major order.
  void moveBlocks(size_t rowBytes, bool toExpertMajor) {
    const auto n = static_cast<size_t>(s_.nRanks);
    const auto local = static_cast<size_t>(firstExpert(s_.rank + 1, s_.nRanks, s_.experts) -
                                           firstExpert(s_.rank, s_.nRanks, s_.experts));
    std::vector<size_t> blockAt(n * maxLocal_);
    for (size_t p = 0, row = 0; p < n; ++p) {
      for (size_t l = 0; l < maxLocal_; ++l) {
        blockAt[p * maxLocal_ + l] = row;
        row += static_cast<size_t>(countsIn_[p * maxLocal_ + l]);
      }
    }
    perLocal_.assign(local, 0);
    for (size_t l = 0, row = 0; l < local; ++l) {
      for (size_t p = 0; p < n; ++p) {
        const auto rows = static_cast<size_t>(countsIn_[p * maxLocal_ + l]);
        char* major = expertMajor_ + row * rowBytes;
        char* block = received_ + blockAt[p * maxLocal_ + l] * rowBytes;
        if (toExpertMajor) {
          std::memcpy(major, block, rows * rowBytes);
        } else {
          std::memcpy(block, major, rows * rowBytes);
        }
        row += rows;
        perLocal_[l] += static_cast<long long>(rows);
      }
    }
  }

  Shape s_;
  size_t elt_;
  SumFn sum_;
  std::vector<size_t> perm_;  // (token, k) -> its row of the packed buffer
  size_t maxLocal_ = 0;
  std::vector<int32_t> countsIn_;
  std::vector<size_t> sendBytes_, sendAt_, recvBytes_, recvAt_;
  std::vector<long long> perLocal_;
  std::vector<float> acc_;
  char* packed_ = nullptr;       // buffer 0: the permuted rows out, the combined rows back
  char* received_ = nullptr;     // buffer 1: the rows in, the experts' rows out (source-major)
  char* expertMajor_ = nullptr;  // buffer 2
};

}  // namespace cfxmoe
