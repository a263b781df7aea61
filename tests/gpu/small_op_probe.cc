// SPDX-License-Identifier: Apache-2.0
// Per-op cost of small collectives on device buffers with several ranks (processes) sharing GPU 0: the probe behind
// the "why small ops cost what they do" section of docs/gpu_proof.md. Not a test (it asserts nothing and prints
// timings); run_on_gpu.sh does not run it.
//
//   small_op_probe [--ranks N] [--op allreduce|allgather|reducescatter] [--iters K] [--bytes B,B,...]
//
// Rank r is a forked process. For each size it runs K ops with a stream synchronise after each ("synced": the
// latency of one op) and then K back to back ("burst": the per-op cost when ops queue up), and rank 0 prints both.
// The environment passes through, so e.g. CFX_CUDA_IPC=1 or NCCL_ALGO apply.
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cuda_driver.h"

namespace {

namespace cuda = cfx::cuda;

struct Options {
  int ranks = 4;
  std::string op = "allreduce";
  int iters = 100;
  std::vector<size_t> bytes = {8, 512, 1024, 1536, 2048, 8192, 65536};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--ranks") o.ranks = std::atoi(argv[i + 1]);
    else if (key == "--op") o.op = argv[i + 1];
    else if (key == "--iters") o.iters = std::atoi(argv[i + 1]);
    else if (key == "--bytes") {
      o.bytes.clear();
      for (char* tok = std::strtok(argv[i + 1], ","); tok != nullptr; tok = std::strtok(nullptr, ","))
        o.bytes.push_back(std::strtoull(tok, nullptr, 10));
    } else {
      std::fprintf(stderr, "small_op_probe: unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  if (o.ranks < 1 || o.iters < 1 || (o.op != "allreduce" && o.op != "allgather" && o.op != "reducescatter")) {
    std::fprintf(stderr, "small_op_probe: --ranks and --iters must be positive, --op allreduce|allgather|reducescatter\n");
    std::exit(2);
  }
  return o;
}

// One rank: returns the process exit status.
int runRank(const Options& o, const ncclUniqueId& id, int rank) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) {
    std::fprintf(stderr, "rank %d: no CUDA driver or device\n", rank);
    return 1;
  }
  cuda::CUdevice dev = 0;
  cuda::CUcontext ctx = nullptr;
  d->deviceGet(&dev, 0);
  d->primaryCtxRetain(&ctx, dev);
  d->ctxSetCurrent(ctx);
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, o.ranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  cuda::CUstream stream = nullptr;
  d->streamCreate(&stream, cuda::kStreamNonBlocking);
  size_t most = 0;
  for (size_t b : o.bytes) most = std::max(most, b);
  cuda::CUdeviceptr in = 0, out = 0;
  d->memAlloc(&in, most * static_cast<size_t>(o.ranks) + 4);
  d->memAlloc(&out, most * static_cast<size_t>(o.ranks) + 4);
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  for (size_t bytes : o.bytes) {
    const size_t count = bytes / 4;  // floats; all-gather and reduce-scatter: per rank
    auto one = [&] {
      ncclResult_t rc = ncclSuccess;
      if (o.op == "allgather") rc = ncclAllGather(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count, ncclFloat32, comm, s);
      else if (o.op == "reducescatter") rc = ncclReduceScatter(reinterpret_cast<void*>(in), reinterpret_cast<void*>(out), count, ncclFloat32, ncclSum, comm, s);
      else rc = ncclAllReduce(reinterpret_cast<void*>(in), reinterpret_cast<void*>(in), count, ncclFloat32, ncclSum, comm, s);
      if (rc != ncclSuccess) {
        std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, o.op.c_str(), ncclGetLastError(comm));
        std::exit(1);
      }
    };
    for (int i = 0; i < 10; ++i) one();
    d->streamSynchronize(stream);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      one();
      d->streamSynchronize(stream);
    }
    const double synced = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) one();
    d->streamSynchronize(stream);
    const double burst = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    if (rank == 0) {
      std::printf("%-14s %2d ranks %8zu B%s: synced %8.1f us, burst %8.1f us per op\n", o.op.c_str(), o.ranks, bytes,
                  o.op == "allreduce" ? "" : " per rank", synced, burst);
      std::fflush(stdout);
    }
  }
  d->memFree(in);
  d->memFree(out);
  d->streamDestroy(stream);
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // The parent never touches CUDA: a child forked after cuInit could not use the GPU.
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(runRank(o, id, r));
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed;
}
