// SPDX-License-Identifier: Apache-2.0
// The one reader of launcher environments (common layer): who this process is in a job that torchrun, cfxrun,
// Open MPI, Slurm or a PMI launcher (MPICH, Intel MPI) started, and where rank 0 serves the bootstrap root.
// cfxCommInitFromEnv and cfxGetLaunchInfo (api/) read it; the perf tools get it through cfxGetLaunchInfo, so a
// variable means the same thing to the library and to its tools. Pure: the environment comes in as a lookup.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "common/status.h"

namespace cfx::launch {

// Reads one variable: nullptr when unset. An empty value counts as unset, as launchers leave some variables
// empty rather than unset.
using Lookup = std::function<const char*(const char* name)>;

struct LaunchEnv {
  std::string launcher;  // "torchrun", "Open MPI", "Slurm" or "PMI"; empty when no launcher variable is set
  int rank = 0;
  int nRanks = 1;
  int localRank = -1;   // this process's index on its host; -1 when the launcher does not say
  int localRanks = -1;  // processes on this host; -1 when the launcher does not say
  // "host:port" or "[v6]:port" of the bootstrap root, or empty when none is set; rootFrom names the variables
  // it came from ("NCCL_COMM_ID", "MASTER_ADDR, MASTER_PORT", ...).
  std::string rootAddress;
  std::string rootFrom;
  std::string jobId;  // the launcher's job id (TORCHELASTIC_RUN_ID, ...), empty when none

  bool found() const { return !launcher.empty(); }
};

// Parses the launcher variables (the launchers in the order of launchVariables(): the first whose rank variable
// is set wins) and the root address: NCCL_COMM_ID, else MASTER_ADDR with MASTER_PORT, else CFX_MASTER_ADDR
// ("host", "host:port", "[v6]:port" or a bare IPv6 address) with CFX_MASTER_PORT where the address has no port.
// No launcher variables at all is not an error: the result has found() false, rank 0 of 1.
// Errors (InvalidUsage, naming the variable and the accepted form): a value that is not a whole decimal number
// ("1x", "-1", " 1"), a rank outside [0, size), a size below 1, a rank variable without its size variable, a
// local rank outside [0, local size), a port outside 1-65535 or not a number, MASTER_ADDR with a
// port in it, an address and a port variable that disagree, a port variable without its address variable, or an
// address with blanks or an empty host.
Result<LaunchEnv> parseLaunchEnv(const Lookup& env);

// The process environment (std::getenv), for the api layer.
const char* processEnv(const char* name);

// Every variable parseLaunchEnv reads, in the order it tries them, with what it means: docs/ENV.md's table.
struct LaunchVariable {
  const char* name;
  const char* meaning;
};
std::span<const LaunchVariable> launchVariables();

// The hint every "no root address" error gives, so the library and the tools word it alike.
inline constexpr const char* kRootHint =
    "set MASTER_ADDR and MASTER_PORT, CFX_MASTER_ADDR=host:port, or NCCL_COMM_ID=host:port to the address rank 0 "
    "listens on";

}  // namespace cfx::launch
