// SPDX-License-Identifier: Apache-2.0
// The error of a compressed all-reduce against its rank count (a benchmark, not a test): n ranks as threads of one
// process (ncclCommInitAll), Gaussian inputs of 4 Mi values, one cfxAllReduceCompressed with the library measuring
// the relative L2 error against the plain all-reduce. Run it once per algorithm; NCCL_ALGO picks it:
//   NCCL_ALGO=allreduce:quantonce build/perf/codec_error int8 2 3 4 5 6 7 8
//   NCCL_ALGO=allreduce:ring      build/perf/codec_error int8 2 3 4 5 6 7 8
// Prints "ranks algorithm codec rel_l2" lines.
#include <conflux.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CODEC RANKS...\n", argv[0]);
    return 2;
  }
  cfxCodec codec;
  if (cfxCodecParse(argv[1], &codec) != ncclSuccess) return 2;
  codec.mode = cfxCompressAlways;
  codec.measureError = 1;
  constexpr size_t kCount = size_t{4} << 20;
  for (int a = 2; a < argc; ++a) {
    const int n = std::atoi(argv[a]);
    std::vector<ncclComm_t> comms(static_cast<size_t>(n));
    if (ncclCommInitAll(comms.data(), n, nullptr) != ncclSuccess) return 1;
    std::vector<std::vector<float>> in(static_cast<size_t>(n), std::vector<float>(kCount));
    std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(kCount));
    for (int r = 0; r < n; ++r) {
      std::mt19937 rng(static_cast<uint32_t>(r + 1));
      std::normal_distribution<float> d(0.0f, 1.0f);
      for (float& x : in[static_cast<size_t>(r)]) x = d(rng);
    }
    std::vector<cfxCompressStats> stats(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        const auto i = static_cast<size_t>(r);
        if (cfxAllReduceCompressed(in[i].data(), out[i].data(), kCount, ncclFloat, ncclSum, &codec, comms[i], nullptr) ==
            ncclSuccess) {
          cfxCommGetCompressStats(comms[i], &stats[i]);
        }
      });
    }
    for (auto& t : threads) t.join();
    std::printf("%d %s %s %.4e\n", n, stats[0].algorithm, argv[1], stats[0].relL2Error);
    std::fflush(stdout);
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
  return 0;
}
