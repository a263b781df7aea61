// SPDX-License-Identifier: Apache-2.0
// perf harness: who the ranks are and how they meet. Three launch modes, all through the public API only:
//   (a) several processes under a launcher: rank, size and the root's address as cfxGetLaunchInfo reads them
//       (the library's reader, shared with cfxCommInitFromEnv: RANK/WORLD_SIZE from torchrun or cfxrun,
//       OMPI_COMM_WORLD_*, SLURM_*, PMI_*; NCCL_COMM_ID, MASTER_ADDR/MASTER_PORT or CFX_MASTER_ADDR). Every
//       process sets NCCL_COMM_ID=<addr>:<port> before its first NCCL call and calls ncclGetUniqueId itself:
//       the id then just encodes that address and rank 0 runs the bootstrap root inside init (NCCL semantics).
//   (b) -t N threads per process: global rank = process rank * N + thread; the id is shared in memory.
//   (c) no launcher and -t 1: one rank.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "options.h"
#include "status.h"

namespace cfx::perf {

struct World {
  int nProcs = 1;
  int proc = 0;
  int nThreads = 1;
  int nRanks = 1;           // nProcs * nThreads
  int localProc = 0;        // index of this process on its host (LOCAL_RANK and friends)
  int localProcs = 1;       // processes on this host
  std::string launcher;     // "torchrun", "Open MPI", "Slurm", "PMI", or "" when single-process
  std::string rootAddress;  // host:port given to NCCL_COMM_ID, empty when single-process
  std::string hostname;     // up to the first '.', as nccl-tests prints it
};

// Reads the launcher environment and, for several processes, exports NCCL_COMM_ID. Must run before any NCCL
// call. Prints a message and returns InvalidUsage when the environment is inconsistent.
TestResult detectWorld(const Options& options, World* world);

// Creates the communicators of this process's ranks in one group (ranks proc*nThreads .. +nThreads-1), as
// nccl-tests does with -p 0; comms must hold nThreads entries.
TestResult initComms(const Options& options, const World& world, const ncclUniqueId& id, int firstThread, int nComms,
                     ncclComm_t* comms);

// Collectives on the benchmark communicator used as the harness's control plane (nccl-tests uses MPI).
// They run outside every timed section.
TestResult barrier(ncclComm_t comm);
// Combines one value across ranks: mode 0 = rank 0's value, 1 = mean, 2 = min, 3 = max (the -a flag).
TestResult combineTime(ncclComm_t comm, int rank, int nRanks, int mode, double* value);
TestResult sumAcrossRanks(ncclComm_t comm, int64_t* value);
TestResult maxAcrossRanks(ncclComm_t comm, std::vector<double>* values);
// Gathers one fixed-size text line per rank (in rank order) for the "# Using devices" block.
TestResult gatherLines(ncclComm_t comm, int nRanks, const std::string& mine, std::vector<std::string>* all);

// Text for the device column on host memory: "Host memory (<cpu model>)".
std::string hostDeviceName();
// Resident set size of this process in bytes (0 when unknown).
long long residentBytes();
// Bytes of memory the kernel reports as available (0 when unknown).
long long availableMemoryBytes();

}  // namespace cfx::perf
