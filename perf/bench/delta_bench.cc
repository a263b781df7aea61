// SPDX-License-Identifier: Apache-2.0
// The delta broadcast against a plain one (a benchmark, not a test): n ranks as threads of one process
// (ncclCommInitAll), an fp32 buffer of BYTES on the root, of which PERCENT of the elements change before each
// broadcast (distinct random positions, the same on every run). Each iteration runs cfxBroadcastDelta, checks every
// rank's buffer bit for bit against the root's, then a plain ncclBroadcast of the same buffer, and prints the bytes
// the root sent for each and both times:
//   build/perf/delta_bench 256M 1 2 5
// Prints "iter changed encoding delta_wire plain_wire wire_ratio delta_ms plain_ms" lines after a header.
#include <conflux.h>
#include <nccl.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

size_t parseBytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  switch (end != nullptr ? *end : '\0') {
    case 'G': v *= 1 << 30; break;
    case 'M': v *= 1 << 20; break;
    case 'K': v *= 1 << 10; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? parseBytes(argv[1]) : size_t{256} << 20;
  const double percent = argc > 2 ? std::atof(argv[2]) : 1.0;
  const int n = argc > 3 ? std::atoi(argv[3]) : 2;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 5;
  const size_t count = bytes / sizeof(float);
  const size_t changed = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(count) * percent / 100.0));
  if (n < 2 || count == 0 || iters < 1) {
    std::fprintf(stderr, "usage: %s [BYTES=256M] [PERCENT=1] [RANKS=2] [ITERS=5]\n", argv[0]);
    return 2;
  }
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  if (ncclCommInitAll(comms.data(), n, nullptr) != ncclSuccess) return 1;
  std::vector<std::vector<float>> buf(static_cast<size_t>(n), std::vector<float>(count, 0.0f));
  // Small values, so that adding 1 changes every element it touches (above 2^24 an fp32 + 1 can round to itself).
  for (size_t j = 0; j < count; ++j) buf[0][j] = static_cast<float>(j % 4096) * 0.25f;
  std::vector<size_t> positions(count);
  std::iota(positions.begin(), positions.end(), size_t{0});
  std::barrier sync(n);
  std::vector<int> failures(static_cast<size_t>(n), 0);
  std::printf("# delta broadcast of %zu B fp32 from rank 0 to %d ranks, %.3g %% of elements changed per iteration\n",
              bytes, n, percent);
  std::printf("%4s %10s %14s %14s %14s %10s %10s %10s\n", "iter", "changed", "encoding", "delta_wire", "plain_wire",
              "ratio", "delta_ms", "plain_ms");
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float>& mine = buf[static_cast<size_t>(r)];
      ncclComm_t comm = comms[static_cast<size_t>(r)];
      for (int it = 0; it <= iters; ++it) {
        if (r == 0 && it > 0) {
          // A partial shuffle picks `changed` distinct positions; each gets a new value.
          std::mt19937_64 rng(static_cast<uint64_t>(it));
          for (size_t k = 0; k < changed; ++k) {
            std::swap(positions[k], positions[k + rng() % (count - k)]);
            mine[positions[k]] += 1.0f;
          }
        }
        sync.arrive_and_wait();
        auto t0 = std::chrono::steady_clock::now();
        const ncclResult_t rc = cfxBroadcastDelta(mine.data(), mine.data(), count, ncclFloat32, 0, comm, nullptr);
        const double deltaMs = msSince(t0);
        cfxCompressStats stats{};
        if (rc != ncclSuccess || cfxCommGetCompressStats(comm, &stats) != ncclSuccess) {
          failures[static_cast<size_t>(r)] = 1;
          return;
        }
        sync.arrive_and_wait();
        if (std::memcmp(mine.data(), buf[0].data(), bytes) != 0) failures[static_cast<size_t>(r)] = 1;
        sync.arrive_and_wait();
        t0 = std::chrono::steady_clock::now();
        if (ncclBroadcast(mine.data(), mine.data(), count, ncclFloat32, 0, comm, nullptr) != ncclSuccess) {
          failures[static_cast<size_t>(r)] = 1;
        }
        const double plainMs = msSince(t0);
        if (r == 0) {
          std::printf("%4d %10zu %14s %14llu %14zu %10.4f %10.2f %10.2f\n", it, it == 0 ? count : changed,
                      stats.codec, stats.wireBytes, bytes, static_cast<double>(stats.wireBytes) / bytes, deltaMs,
                      plainMs);
          std::fflush(stdout);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  for (int r = 0; r < n; ++r) {
    if (failures[static_cast<size_t>(r)] != 0) {
      std::fprintf(stderr, "delta_bench: rank %d failed or differs from the root\n", r);
      return 1;
    }
  }
  std::printf("# every rank's buffer matched the root's after every delta broadcast\n");
  return 0;
}
