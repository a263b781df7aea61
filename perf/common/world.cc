// SPDX-License-Identifier: Apache-2.0
// perf harness: launcher detection, communicator creation and the small control-plane collectives.
#include "world.h"

#include <conflux.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace cfx::perf {
namespace {

std::string shortHostname() {
  char buf[1024] = "";
  gethostname(buf, sizeof(buf) - 1);
  std::string h = buf;
  size_t dot = h.find('.');
  return dot == std::string::npos ? h : h.substr(0, dot);
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
  // The library's own reader of launcher variables (the one cfxCommInitFromEnv uses), so a variable means the
  // same thing to the tools as to the library.
  cfxLaunchInfo info;
  if (cfxGetLaunchInfo(&info) != ncclSuccess) {
    fprintf(stderr, "%s: %s\n", w->hostname.c_str(), ncclGetLastError(nullptr));
    return TestResult::InvalidUsage;
  }
  w->nProcs = info.nRanks;
  w->nRanks = w->nProcs * w->nThreads;
  if (w->nProcs == 1) return TestResult::Success;
  w->launcher = info.launcher;
  w->proc = info.rank;
  if (info.localRank >= 0) w->localProc = info.localRank;
  if (info.localRanks > 0) w->localProcs = info.localRanks;
  if (info.rootAddress[0] == '\0') {
    fprintf(stderr,
            "%s: %d processes (%s launch) but no rendezvous address: set MASTER_ADDR and MASTER_PORT, "
            "CFX_MASTER_ADDR=<host>:<port>, or NCCL_COMM_ID=<host>:<port> to the address rank 0 listens on\n",
            w->hostname.c_str(), w->nProcs, w->launcher.c_str());
    return TestResult::InvalidUsage;
  }
  w->rootAddress = info.rootAddress;
  // Must precede the first NCCL call that builds an id: ncclGetUniqueId reads it once.
  setenv("NCCL_COMM_ID", w->rootAddress.c_str(), 1);
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
