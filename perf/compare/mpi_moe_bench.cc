// SPDX-License-Identifier: Apache-2.0
// perf/compare: the unfused MoE pipeline of moe_perf (perf/moe_pipeline.h: permute, counts all-to-all, all-to-all-v,
// unpack; pack back, all-to-all-v, weighted sum) with Open MPI's MPI_Alltoall and MPI_Alltoallv in place of
// Conflux's, so the two libraries run the same pack and unpack around their own exchange. Host memory, one process
// per rank. Prints one line: the mean dispatch, combine and total times over the ranks, as moe_perf's '#' lines.
// Build: mpicxx -O2 -std=c++20 -DOMPI_SKIP_MPICXX -I perf perf/compare/mpi_moe_bench.cc -o mpi_moe_bench
//
// usage: mpirun -np N mpi_moe_bench --tokens T --hidden H --topk K --experts E [--dtype bf16|fp16|fp32]
//        [--routing uniform|zipf:S|hot:F] [--iters 20] [--warmup 5] [--check 1]
// With --check 1 (the default) the "experts" are the identity and every token of the combine is compared with
// x * sum of its weights (exact: small integers, power-of-two weights). Exit status: 0, 2 bad usage, 7 wrong values.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "moe_pipeline.h"

namespace {

struct MpiTransport {
  std::vector<char> scratch[3];
  int countsAlltoall(const int32_t* send, int32_t* recv, size_t perPeer) {
    return MPI_Alltoall(send, static_cast<int>(perPeer), MPI_INT32_T, recv, static_cast<int>(perPeer), MPI_INT32_T,
                        MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 1;
  }
  int rowsAlltoallv(const void* send, const size_t* sendBytes, const size_t* sendAt, void* recv,
                    const size_t* recvBytes, const size_t* recvAt) {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::vector<int> sc(static_cast<size_t>(n)), sd(sc.size()), rc(sc.size()), rd(sc.size());
    for (size_t p = 0; p < sc.size(); ++p) {
      sc[p] = static_cast<int>(sendBytes[p]);
      sd[p] = static_cast<int>(sendAt[p]);
      rc[p] = static_cast<int>(recvBytes[p]);
      rd[p] = static_cast<int>(recvAt[p]);
    }
    return MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                         MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 1;
  }
  char* buffer(int which, size_t bytes) {
    std::vector<char>& b = scratch[which];
    if (b.size() < bytes) b.assign(bytes, 0);
    return b.data();
  }
};

double bf16Round(double v, const std::string& dtype) {
  if (dtype == "fp32") return static_cast<float>(v);
  if (dtype == "fp16") return static_cast<float>(static_cast<_Float16>(static_cast<float>(v)));
  return cfxmoe::Bf16::widen(cfxmoe::Bf16::narrow(static_cast<float>(v)));
}

void store(const std::string& dtype, double v, char* p) {
  if (dtype == "fp32") {
    const auto f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (dtype == "fp16") {
    const auto h = static_cast<_Float16>(static_cast<float>(v));
    std::memcpy(p, &h, 2);
  } else {
    const uint16_t b = cfxmoe::Bf16::narrow(static_cast<float>(v));
    std::memcpy(p, &b, 2);
  }
}

double load(const std::string& dtype, const char* p) {
  if (dtype == "fp32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (dtype == "fp16") {
    _Float16 h;
    std::memcpy(&h, p, 2);
    return static_cast<float>(h);
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return cfxmoe::Bf16::widen(b);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  cfxmoe::Shape shape;
  MPI_Comm_rank(MPI_COMM_WORLD, &shape.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &shape.nRanks);
  std::string dtype = "bf16";
  int iters = 20, warmup = 5, check = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--tokens") shape.tokens = std::strtoull(v, nullptr, 0);
    else if (flag == "--hidden") shape.hidden = std::strtoull(v, nullptr, 0);
    else if (flag == "--topk") shape.topk = std::atoi(v);
    else if (flag == "--experts") shape.experts = std::atoi(v);
    else if (flag == "--routing") shape.routing = v;
    else if (flag == "--dtype") dtype = v;
    else if (flag == "--iters") iters = std::atoi(v);
    else if (flag == "--warmup") warmup = std::atoi(v);
    else if (flag == "--check") check = std::atoi(v);
    else {
      if (shape.rank == 0) std::fprintf(stderr, "mpi_moe_bench: unknown flag %s\n", flag.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  if (shape.tokens == 0 || shape.hidden == 0 || shape.topk < 1 || shape.topk > shape.experts || iters < 1 ||
      (dtype != "bf16" && dtype != "fp16" && dtype != "fp32")) {
    if (shape.rank == 0) std::fprintf(stderr, "mpi_moe_bench: bad shape or dtype\n");
    MPI_Finalize();
    return 2;
  }
  const size_t elt = dtype == "fp32" ? 4 : 2;
  const cfxmoe::Routing routing = cfxmoe::drawRouting(shape);
  std::vector<char> tokens(shape.tokens * shape.hidden * elt), out(tokens.size());
  for (size_t i = 0; i < shape.tokens * shape.hidden; ++i) {
    store(dtype, static_cast<double>((i * 7 + static_cast<size_t>(shape.rank) * 3) % 7) - 3.0, tokens.data() + i * elt);
  }
  MpiTransport transport;
  cfxmoe::Unfused<MpiTransport> pipe(shape, elt, dtype == "fp16");
  double dispatch = 0, combine = 0;
  for (int i = -warmup; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    if (pipe.dispatch(transport, routing, tokens.data()) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    const auto t1 = std::chrono::steady_clock::now();
    if (pipe.combine(transport, routing, pipe.expertMajor(), out.data()) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    const auto t2 = std::chrono::steady_clock::now();
    if (i >= 0) {
      dispatch += std::chrono::duration<double>(t1 - t0).count();
      combine += std::chrono::duration<double>(t2 - t1).count();
    }
  }
  unsigned long long wrong = 0;
  if (check) {
    const auto k = static_cast<size_t>(shape.topk);
    for (size_t t = 0; t < shape.tokens; ++t) {
      double w = 0;
      for (size_t j = 0; j < k; ++j) w += routing.weights[t * k + j];
      for (size_t h = 0; h < shape.hidden; ++h) {
        const size_t i = t * shape.hidden + h;
        wrong += load(dtype, out.data() + i * elt) != bf16Round(load(dtype, tokens.data() + i * elt) * w, dtype);
      }
    }
  }
  double local[2] = {dispatch / iters, combine / iters}, mean[2] = {0, 0};
  unsigned long long wrongAll = 0;
  MPI_Reduce(local, mean, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&wrong, &wrongAll, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (shape.rank == 0) {
    const double d = 1e6 * mean[0] / shape.nRanks, c = 1e6 * mean[1] / shape.nRanks;
    std::printf("#  moe mpi-unfused dispatch %10.1f us   combine %10.1f us   total %10.1f us   wrong %llu\n", d, c,
                d + c, wrongAll);
  }
  MPI_Finalize();
  return wrongAll ? 7 : 0;
}
