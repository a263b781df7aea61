// SPDX-License-Identifier: Apache-2.0
// perf/compare: the time from a process's start to the result of its first all-reduce (one float, sum), for
// Conflux or, built with -DCFX_INIT_MPI, Open MPI (MPI_Init + MPI_Allreduce). scale_init.py builds both and runs
// them side by side.
//
// Conflux: started by cfxrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT): `init_bench` forms the communicator with
// cfxCommInitFromEnv (one root, in rank 0); `init_bench --roots K --id-dir DIR` with ncclCommInitRankScalable and K
// ids: the first rank of each id's group (r * K / n == k) calls ncclGetUniqueId (its root then runs in that
// process) and writes the id to DIR/id.<k>, which every rank reads (an application would broadcast them with its
// launcher). Open MPI: started by mpirun.
//
// CFX_INIT_BENCH_T0 (nanoseconds of CLOCK_REALTIME when the launcher was started) lets rank 0 print the whole job's
// figure too. Output, rank 0 only, one line:
//   initbench ranks N roots K start S init S first S job S
// start: the latest rank's start after T0 (launch); init: the longest init (from main to the communicator);
// first: the longest time from main to the first all-reduce's result; job: T0 to the last rank's result.
// Exit status: 0, 2 bad usage, 3 an init or all-reduce failed, 7 a wrong sum.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifdef CFX_INIT_MPI
#include <mpi.h>
#else
#include <conflux.h>
#include <nccl.h>
#endif

namespace {

double nowSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double launchSeconds() {
  const char* t0 = std::getenv("CFX_INIT_BENCH_T0");
  return t0 != nullptr ? static_cast<double>(std::strtoll(t0, nullptr, 10)) * 1e-9 : 0.0;
}

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

#ifndef CFX_INIT_MPI
bool ok(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "init_bench: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
  return false;
}

// The K ids of a scalable init, through files in `dir` (see the top of this file).
bool exchangeIds(int rank, int n, int k, const std::string& dir, std::vector<ncclUniqueId>& ids) {
  ids.assign(static_cast<size_t>(k), ncclUniqueId{});
  const int mine = static_cast<int>(static_cast<long long>(rank) * k / n);
  const int firstOfMine = static_cast<int>((static_cast<long long>(mine) * n + k - 1) / k);
  if (rank == firstOfMine) {
    if (!ok(ncclGetUniqueId(&ids[static_cast<size_t>(mine)]), "ncclGetUniqueId")) return false;
    const std::string tmp = dir + "/tmp." + std::to_string(mine);
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(&ids[static_cast<size_t>(mine)], sizeof(ncclUniqueId), 1, f) != 1 ||
        std::fclose(f) != 0) {
      std::perror("init_bench: writing an id");
      return false;
    }
    std::rename(tmp.c_str(), (dir + "/id." + std::to_string(mine)).c_str());  // appears whole
  }
  for (int i = 0; i < k; ++i) {
    const std::string path = dir + "/id." + std::to_string(i);
    for (int tries = 0;; ++tries) {
      FILE* f = std::fopen(path.c_str(), "rb");
      if (f != nullptr) {
        const bool read = std::fread(&ids[static_cast<size_t>(i)], sizeof(ncclUniqueId), 1, f) == 1;
        std::fclose(f);
        if (read) break;
      }
      if (tries > 60000) {
        std::fprintf(stderr, "init_bench: rank %d: %s never appeared\n", rank, path.c_str());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return true;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const double start = nowSeconds();
  int roots = 1;
  std::string idDir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--roots") == 0 && i + 1 < argc) {
      roots = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--id-dir") == 0 && i + 1 < argc) {
      idDir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: init_bench [--roots K --id-dir DIR]\n");
      return 2;
    }
  }
  int rank = 0;
  int n = 1;
  float one = 0;
  double init = 0;
#ifdef CFX_INIT_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  init = nowSeconds();
  const float mine = static_cast<float>(rank + 1);
  MPI_Allreduce(&mine, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#else
  rank = envInt("RANK");
  n = envInt("WORLD_SIZE");
  ncclComm_t comm = nullptr;
  if (roots <= 1) {
    if (!ok(cfxCommInitFromEnv(&comm), "cfxCommInitFromEnv")) return 3;
  } else {
    if (rank < 0 || n < 1 || idDir.empty()) {
      std::fprintf(stderr, "init_bench: --roots needs RANK, WORLD_SIZE (cfxrun) and --id-dir\n");
      return 2;
    }
    std::vector<ncclUniqueId> ids;
    if (!exchangeIds(rank, n, roots, idDir, ids)) return 3;
    if (!ok(ncclCommInitRankScalable(&comm, n, rank, roots, ids.data(), nullptr), "ncclCommInitRankScalable")) {
      return 3;
    }
  }
  if (!ok(ncclCommUserRank(comm, &rank), "ncclCommUserRank") || !ok(ncclCommCount(comm, &n), "ncclCommCount")) {
    return 3;
  }
  init = nowSeconds();
  float* buf = static_cast<float*>(std::malloc(sizeof(float)));
  *buf = static_cast<float>(rank + 1);
  if (!ok(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce")) return 3;
  one = *buf;
#endif
  const double first = nowSeconds();
  const double t0 = launchSeconds();
  // Maxima over ranks: start after launch, init, main to first result, launch to first result.
  double mine4[4] = {t0 > 0 ? start - t0 : 0, init - start, first - start, t0 > 0 ? first - t0 : 0};
  double max4[4] = {0, 0, 0, 0};
#ifdef CFX_INIT_MPI
  MPI_Allreduce(mine4, max4, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#else
  double* dev = static_cast<double*>(std::malloc(sizeof(mine4)));
  std::memcpy(dev, mine4, sizeof(mine4));
  if (!ok(ncclAllReduce(dev, dev, 4, ncclDouble, ncclMax, comm, nullptr), "ncclAllReduce")) return 3;
  std::memcpy(max4, dev, sizeof(max4));
#endif
  const float want = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  int rc = 0;
  if (one != want) {
    std::fprintf(stderr, "init_bench: rank %d: sum %g, want %g\n", rank, static_cast<double>(one),
                 static_cast<double>(want));
    rc = 7;
  }
  if (rank == 0) {
    std::printf("initbench ranks %d roots %d start %.3f init %.3f first %.3f job %.3f\n", n, roots, max4[0], max4[1],
                max4[2], max4[3]);
    std::fflush(stdout);
  }
#ifdef CFX_INIT_MPI
  MPI_Finalize();
#else
  // Finalize first: a rank that exits while slower ranks still finish their last steps is reported by them as a
  // failed peer (seen at 256 ranks on two cores).
  ncclCommFinalize(comm);
  ncclCommDestroy(comm);
#endif
  return rc;
}
