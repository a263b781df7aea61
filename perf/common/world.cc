// SPDX-License-Identifier: Apache-2.0
// perf harness: launcher detection, communicator creation and the small control-plane collectives.
#include "world.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace cfx::perf {
namespace {

const char* env(const char* name) {
  const char* v = getenv(name);
  return (v && v[0]) ? v : nullptr;
}

// Strict decimal integer; false on anything else.
bool parseInt(const char* text, int* out) {
  if (!text) return false;
  char* end = nullptr;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > 1 << 30) return false;
  *out = static_cast<int>(v);
  return true;
}

struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
};

// In order of preference. Slurm's step size wins over the allocation's when both are set.
const LauncherVars kLaunchers[] = {
    {"torchrun-style", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

std::string shortHostname() {
  char buf[1024] = "";
  gethostname(buf, sizeof(buf) - 1);
  std::string h = buf;
  size_t dot = h.find('.');
  return dot == std::string::npos ? h : h.substr(0, dot);
}

// host:port for NCCL_COMM_ID; IPv6 literals get brackets.
std::string joinAddress(const std::string& host, const std::string& port) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]:" + port;
  return host + ":" + port;
}

long long meminfoField(const char* field) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  long long kb = 0;
  std::string unit;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == field) return kb * 1024;
  }
  return 0;
}

}  // namespace

TestResult detectWorld(const Options& options, World* w) {
  w->nThreads = options.nThreads;
  w->hostname = shortHostname();
  for (const LauncherVars& l : kLaunchers) {
    int rank = 0, size = 0;
    if (!parseInt(env(l.rank), &rank) || !parseInt(env(l.size), &size)) continue;
    if (size < 1 || rank >= size) {
      fprintf(stderr, "%s: %s=%s is not a valid rank for %s=%s\n", w->hostname.c_str(), l.rank, env(l.rank), l.size,
              env(l.size));
      return TestResult::InvalidUsage;
    }
    w->launcher = l.name;
    w->proc = rank;
    w->nProcs = size;
    int v = 0;
    if (parseInt(env(l.localRank), &v)) w->localProc = v;
    if (parseInt(env(l.localSize), &v) && v > 0) w->localProcs = v;
    break;
  }
  w->nRanks = w->nProcs * w->nThreads;
  if (w->nProcs == 1) {
    w->launcher.clear();
    w->proc = 0;
    return TestResult::Success;
  }
  const char* addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : env("CFX_MASTER_ADDR");
  const char* port = env("MASTER_ADDR") ? env("MASTER_PORT") : env("CFX_MASTER_PORT");
  if (addr && port) {
    w->rootAddress = joinAddress(addr, port);
    // Must precede the first NCCL call: the library reads it when it builds the id and the bootstrap root.
    setenv("NCCL_COMM_ID", w->rootAddress.c_str(), 1);
  } else if (env("NCCL_COMM_ID")) {
    w->rootAddress = env("NCCL_COMM_ID");
  } else {
    fprintf(stderr,
            "%s: %d processes (%s launch) but no rendezvous address: set MASTER_ADDR and MASTER_PORT (or "
            "CFX_MASTER_ADDR and CFX_MASTER_PORT, or NCCL_COMM_ID=<host>:<port>) to the address rank 0 listens on\n",
            w->hostname.c_str(), w->nProcs, w->launcher.c_str());
    return TestResult::InvalidUsage;
  }
  return TestResult::Success;
}

TestResult initComms(const Options& options, const World& w, const ncclUniqueId& id, int firstThread, int nComms,
                     ncclComm_t* comms) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (options.ctaPolicy >= 0) config.CTAPolicy = options.ctaPolicy;
  CFX_PERF_NCCL(ncclGroupStart());
  for (int i = 0; i < nComms; ++i) {
    int rank = w.proc * w.nThreads + firstThread + i;
    CFX_PERF_NCCL(ncclCommInitRankConfig(comms + i, w.nRanks, id, rank, &config));
  }
  CFX_PERF_NCCL(ncclGroupEnd());
  return TestResult::Success;
}

TestResult barrier(ncclComm_t comm) {
  int32_t token = 1;
  CFX_PERF_NCCL(ncclAllReduce(&token, &token, 1, ncclInt32, ncclSum, comm, nullptr));
  return TestResult::Success;
}

TestResult combineTime(ncclComm_t comm, int rank, int nRanks, int mode, double* value) {
  double v = *value;
  switch (mode) {
    case 0:  // rank 0's value: everyone else contributes 0 to a sum
      if (rank != 0) v = 0;
      CFX_PERF_NCCL(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclSum, comm, nullptr));
      break;
    case 2:
      CFX_PERF_NCCL(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclMin, comm, nullptr));
      break;
    case 3:
      CFX_PERF_NCCL(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclMax, comm, nullptr));
      break;
    default:
      CFX_PERF_NCCL(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclSum, comm, nullptr));
      v /= nRanks;
      break;
  }
  *value = v;
  return TestResult::Success;
}

TestResult sumAcrossRanks(ncclComm_t comm, int64_t* value) {
  CFX_PERF_NCCL(ncclAllReduce(value, value, 1, ncclInt64, ncclSum, comm, nullptr));
  return TestResult::Success;
}

TestResult maxAcrossRanks(ncclComm_t comm, std::vector<double>* values) {
  if (values->empty()) return TestResult::Success;
  CFX_PERF_NCCL(ncclAllReduce(values->data(), values->data(), values->size(), ncclFloat64, ncclMax, comm, nullptr));
  return TestResult::Success;
}

TestResult gatherLines(ncclComm_t comm, int nRanks, const std::string& mine, std::vector<std::string>* all) {
  constexpr size_t kLine = 512;
  std::vector<char> send(kLine, 0), recv(kLine * nRanks, 0);
  memcpy(send.data(), mine.data(), std::min(mine.size(), kLine - 1));
  CFX_PERF_NCCL(ncclAllGather(send.data(), recv.data(), kLine, ncclInt8, comm, nullptr));
  all->clear();
  for (int r = 0; r < nRanks; ++r) all->emplace_back(recv.data() + r * kLine);
  return TestResult::Success;
}

std::string hostDeviceName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(" \t", colon + 1);
        if (start != std::string::npos) return "Host memory (" + line.substr(start) + ")";
      }
    }
  }
  return "Host memory (CPU)";
}

long long residentBytes() {
  std::ifstream in("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(in >> pages >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

long long availableMemoryBytes() { return meminfoField("MemAvailable:"); }

}  // namespace cfx::perf
