// SPDX-License-Identifier: Apache-2.0
// perf/compare: Open MPI's MPI_* collectives, float32 sum, out-of-place, host memory. One line per size in the
// format of bench_common.h. The transport (vader, UCX, TCP) is chosen by the mpirun MCA flags; --algo only labels
// the output. Build: mpicxx -O2 -std=c++17 mpi_bench.cc -o mpi_bench (compare.py does this).
//
// usage: mpirun -np N mpi_bench --coll all_reduce --sizes 1024,4096 [--iters 20] [--warmup 5] [--check 1]
//        [--algo vader]
// Exit status: 0, 2 bad usage, 7 a check found wrong elements.

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_common.h"

namespace {

using cfxcmp::Coll;

void runOp(Coll coll, const cfxcmp::Layout& l, const float* send, float* recv, int rank) {
  const int block = static_cast<int>(l.block);
  switch (coll) {
    case Coll::AllReduce:
      MPI_Allreduce(send, recv, static_cast<int>(l.sendCount), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Coll::AllGather:
      MPI_Allgather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Coll::ReduceScatter:
      MPI_Reduce_scatter_block(send, recv, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Coll::Broadcast:  // MPI's natural form: the root sends from its input, the others receive into recv
      MPI_Bcast(rank == 0 ? const_cast<float*>(send) : recv, static_cast<int>(l.recvCount), MPI_FLOAT, 0,
                MPI_COMM_WORLD);
      break;
    case Coll::AllToAll:
      MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Coll::ExScan:
      MPI_Exscan(send, recv, static_cast<int>(l.sendCount), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nRanks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nRanks);

  cfxcmp::Options o;
  std::string err = cfxcmp::parseOptions(argc, argv, &o);
  if (!err.empty()) {
    if (rank == 0) std::fprintf(stderr, "mpi_bench: %s\n", err.c_str());
    MPI_Finalize();
    return 2;
  }

  size_t totalWrong = 0;
  for (size_t nominal : o.sizes) {
    cfxcmp::Layout l = cfxcmp::layoutFor(o.coll, nominal, nRanks);
    std::vector<float> send(l.sendCount), recv(l.recvCount), expected(l.recvCount);

    size_t wrong = 0;
    if (o.check) {
      cfxcmp::fillInput(o.coll, rank, l, send.data());
      cfxcmp::fillExpected(o.coll, rank, nRanks, l, expected.data());
      runOp(o.coll, l, send.data(), recv.data(), rank);
      const float* result = o.coll == Coll::Broadcast && rank == 0 ? send.data() : recv.data();
      unsigned long long local = cfxcmp::countWrong(result, expected.data(), l.recvCount), sum = 0;
      MPI_Allreduce(&local, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      wrong = sum;
    }

    for (int i = 0; i < o.warmup; ++i) runOp(o.coll, l, send.data(), recv.data(), rank);
    std::vector<double> iter(o.iters);
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = std::chrono::steady_clock::now();
    auto prev = start;
    for (int i = 0; i < o.iters; ++i) {
      runOp(o.coll, l, send.data(), recv.data(), rank);
      auto now = std::chrono::steady_clock::now();
      iter[i] = std::chrono::duration<double>(now - prev).count();
      prev = now;
    }
    double mean = std::chrono::duration<double>(prev - start).count() / o.iters, meanSum = 0;
    std::vector<double> iterMax(o.iters);
    MPI_Reduce(&mean, &meanSum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(iter.data(), iterMax.data(), o.iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) cfxcmp::printResult("mpi", o, nominal, l, nRanks, meanSum / nRanks, iterMax, wrong);
    totalWrong += wrong;
  }

  MPI_Finalize();
  return totalWrong ? 7 : 0;
}
