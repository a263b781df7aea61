// SPDX-License-Identifier: Apache-2.0
// Sequence-parallel linear attention with All-Scan (ZeCO's pattern): P ranks each own a chunk of one sequence.
//
// Per head, a gated linear attention keeps a state S (dk x dv) that every token t updates and reads:
//     S_t = diag(g_t) S_{t-1} + k_t v_t^T        o_t = S_t^T q_t
// with a decay g_t in (0, 1) per key dimension. A chunk of tokens acts on the state as an affine map
// S -> diag(G) S + S_chunk, where G is the product of its decays and S_chunk the state it builds from zero. Maps
// compose in sequence order, (Ga, Sa) then (Gb, Sb) = (Ga Gb, diag(Gb) Sa + Sb), which is exactly Conflux's affine op
// (cfxRedOpCreateAffine, rows = dk decays, cols = dv). So each rank:
//   1. runs its chunk from a zero state, getting (G, S_chunk) for every head;
//   2. takes the exclusive All-Scan of those pairs: the state every earlier chunk leaves behind (rank 0: zero);
//   3. runs its chunk again from that state to get its outputs.
// The program then checks its outputs against a single-process run over the whole sequence (every rank can compute
// it: the inputs are a deterministic function of the token index) and prints one line per rank.
//
//   cfxrun -n 4 build/examples/linear_attention [--heads H] [--dk D] [--dv D] [--chunk T]
// Exit status 0 when every output is within fp32 rounding of the reference.
#include <conflux.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  int heads = 4;
  int dk = 16;
  int dv = 24;
  int chunk = 64;  // tokens per rank
};

// A deterministic value in [-1, 1) for (what, token, head, i): every rank builds the same sequence.
float input(int what, long token, int head, int i) {
  uint64_t z = (static_cast<uint64_t>(what) << 56) ^ (static_cast<uint64_t>(token) << 24) ^
               (static_cast<uint64_t>(head) << 12) ^ static_cast<uint64_t>(i);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / 8388608.0f - 1.0f;
}
float query(long t, int h, int i) { return input(1, t, h, i); }
float key(long t, int h, int i) { return input(2, t, h, i); }
float value(long t, int h, int j) { return input(3, t, h, j); }
float decay(long t, int h, int i) { return 0.9f + 0.1f * (0.5f + 0.5f * input(4, t, h, i)); }

// Runs tokens [first, last) of one head from state S (dk x dv, updated in place); decays multiply into G when given,
// outputs (dv per token) go to out when given.
void run(const Shape& s, long first, long last, int h, std::vector<float>& S, std::vector<float>* G, float* out) {
  for (long t = first; t < last; ++t) {
    for (int i = 0; i < s.dk; ++i) {
      const float g = decay(t, h, i);
      const float k = key(t, h, i);
      if (G != nullptr) (*G)[static_cast<size_t>(i)] *= g;
      for (int j = 0; j < s.dv; ++j) {
        float& x = S[static_cast<size_t>(i * s.dv + j)];
        x = g * x + k * value(t, h, j);
      }
    }
    if (out == nullptr) continue;
    for (int j = 0; j < s.dv; ++j) {
      float o = 0;
      for (int i = 0; i < s.dk; ++i) o += S[static_cast<size_t>(i * s.dv + j)] * query(t, h, i);
      out[(t - first) * s.dv + j] = o;
    }
  }
}

int argument(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  Shape s;
  s.heads = argument(argc, argv, "--heads", s.heads);
  s.dk = argument(argc, argv, "--dk", s.dk);
  s.dv = argument(argc, argv, "--dv", s.dv);
  s.chunk = argument(argc, argv, "--chunk", s.chunk);
  ncclComm_t comm = nullptr;
  if (cfxCommInitFromEnv(&comm) != ncclSuccess) {
    std::fprintf(stderr, "linear_attention: cfxCommInitFromEnv failed: %s (start it with cfxrun)\n", ncclGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nRanks = 1;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &nRanks);
  const long first = static_cast<long>(rank) * s.chunk;
  const long last = first + s.chunk;
  const size_t group = static_cast<size_t>(s.dk) + static_cast<size_t>(s.dk) * s.dv;

  // 1. Every head's (G, S_chunk) from a zero state, as the groups of the affine op: dk decays, then the state.
  std::vector<float> mine(group * s.heads), before(group * s.heads);
  for (int h = 0; h < s.heads; ++h) {
    std::vector<float> G(static_cast<size_t>(s.dk), 1.0f), S(static_cast<size_t>(s.dk) * s.dv, 0.0f);
    run(s, first, last, h, S, &G, nullptr);
    std::memcpy(&mine[h * group], G.data(), G.size() * 4);
    std::memcpy(&mine[h * group + s.dk], S.data(), S.size() * 4);
  }
  // 2. The state every earlier chunk leaves behind.
  ncclRedOp_t affine;
  if (cfxRedOpCreateAffine(&affine, s.dk, s.dv, 0, ncclFloat, comm) != ncclSuccess ||
      cfxExScan(mine.data(), before.data(), mine.size(), ncclFloat, affine, comm, nullptr) != ncclSuccess) {
    std::fprintf(stderr, "linear_attention: rank %d: the All-Scan failed: %s\n", rank, ncclGetLastError(comm));
    ncclCommAbort(comm);
    return 1;
  }
  ncclRedOpDestroy(affine, comm);

  // 3. This chunk's outputs from that state, against the whole sequence run in one process.
  double worst = 0;
  for (int h = 0; h < s.heads; ++h) {
    std::vector<float> S(before.begin() + static_cast<long>(h * group + s.dk), before.begin() + static_cast<long>((h + 1) * group));
    std::vector<float> out(static_cast<size_t>(s.chunk) * s.dv), ref(static_cast<size_t>(last) * s.dv);
    run(s, first, last, h, S, nullptr, out.data());
    std::vector<float> R(static_cast<size_t>(s.dk) * s.dv, 0.0f);
    run(s, 0, last, h, R, nullptr, ref.data());
    for (size_t i = 0; i < out.size(); ++i) {
      const double want = ref[static_cast<size_t>(first) * s.dv + i];
      worst = std::max(worst, std::fabs(out[i] - want) / (1.0 + std::fabs(want)));
    }
  }
  const bool ok = worst < 1e-4;
  std::printf("linear_attention: rank %d of %d, tokens %ld..%ld, %d heads of %dx%d: max relative error %.2e %s\n", rank,
              nRanks, first, last - 1, s.heads, s.dk, s.dv, worst, ok ? "ok" : "TOO LARGE");
  ncclCommDestroy(comm);
  return ok ? 0 : 1;
}
