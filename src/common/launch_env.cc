// SPDX-License-Identifier: Apache-2.0
// Launcher environments (common layer): see launch_env.h. Strict throughout, because a value read loosely
// (RANK=1x taken as rank 1) puts two processes on one rank, and the job then hangs far from the typo.
#include "common/launch_env.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace cfx::launch {
namespace {

struct Launcher {
  const char* name;
  const char* rank;
  std::array<const char*, 2> size;  // the first one set wins (Slurm: the step's size before the allocation's)
  const char* localRank;
  const char* localSize;
  const char* jobId;  // nullptr: the launcher has none
};

constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", {"WORLD_SIZE", nullptr}, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"Open MPI",
     "OMPI_COMM_WORLD_RANK",
     {"OMPI_COMM_WORLD_SIZE", nullptr},
     "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE",
     "OMPI_MCA_ess_base_jobid"},
    {"Slurm",
     "SLURM_PROCID",
     {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"},
     "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE",
     "SLURM_JOB_ID"},
    {"PMI", "PMI_RANK", {"PMI_SIZE", nullptr}, "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
};

constexpr LaunchVariable kVariables[] = {
    {"RANK", "torchrun, cfxrun: this process's rank (a whole decimal number, 0 <= RANK < WORLD_SIZE)."},
    {"WORLD_SIZE", "torchrun, cfxrun: the number of processes in the job."},
    {"LOCAL_RANK", "torchrun, cfxrun: this process's index on its host (optional)."},
    {"LOCAL_WORLD_SIZE", "torchrun, cfxrun: processes on this host (optional)."},
    {"TORCHELASTIC_RUN_ID", "torchrun: the job id; the bootstrap secret when CFX_SECRET is unset."},
    {"OMPI_COMM_WORLD_RANK", "Open MPI (mpirun): rank, read when RANK is unset."},
    {"OMPI_COMM_WORLD_SIZE", "Open MPI: number of processes."},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI: index on this host."},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI: processes on this host."},
    {"OMPI_MCA_ess_base_jobid", "Open MPI: the job id; the bootstrap secret when CFX_SECRET is unset."},
    {"SLURM_PROCID", "Slurm (srun): rank, read when neither RANK nor OMPI_COMM_WORLD_RANK is set."},
    {"SLURM_STEP_NUM_TASKS", "Slurm: number of processes in the job step (preferred over SLURM_NTASKS)."},
    {"SLURM_NTASKS", "Slurm: number of processes, when SLURM_STEP_NUM_TASKS is unset."},
    {"SLURM_LOCALID", "Slurm: index on this host."},
    {"SLURM_NTASKS_PER_NODE", "Slurm: processes on this host (set by srun --ntasks-per-node)."},
    {"SLURM_JOB_ID", "Slurm: the job id; the bootstrap secret when CFX_SECRET is unset."},
    {"PMI_RANK", "PMI launchers (MPICH's and Intel MPI's mpiexec): rank, read when no launcher above is found."},
    {"PMI_SIZE", "PMI launchers: number of processes."},
    {"MPI_LOCALRANKID", "PMI launchers: index on this host."},
    {"MPI_LOCALNRANKS", "PMI launchers: processes on this host."},
    {"NCCL_COMM_ID", "The bootstrap root, host:port or [v6]:port; wins over the variables below."},
    {"MASTER_ADDR", "torchrun, cfxrun: host name or address of rank 0 (no port; IPv6 bare or in brackets)."},
    {"MASTER_PORT", "torchrun, cfxrun: the port rank 0 serves the bootstrap root on (1-65535)."},
    {"CFX_MASTER_ADDR",
     "Rank 0's address when MASTER_ADDR is unset: host, host:port, [v6]:port or a bare IPv6 address."},
    {"CFX_MASTER_PORT", "The port, where CFX_MASTER_ADDR has none (must agree with it where it has one)."},
};

const char* get(const Lookup& env, const char* name) {
  if (name == nullptr) return nullptr;
  const char* v = env(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

Status invalid(std::string message) { return Status::error(Errc::InvalidUsage, std::move(message)); }

// A whole decimal number below 2^30: digits only, so "1x", "-1", "+1", " 1" and "0x1" are all refused.
std::optional<int> wholeNumber(const char* text) {
  const size_t n = std::strlen(text);
  if (n == 0 || n > 9) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

Result<int> readNumber(const char* name, const char* text) {
  if (std::optional<int> v = wholeNumber(text)) return *v;
  return invalid(strprintf("%s=%s is not a whole decimal number", name, text));
}

// host[:port], [v6][:port], or a bare IPv6 address (two or more colons, so no port).
struct HostPort {
  std::string host;
  std::string port;  // empty: none given
};

Result<HostPort> splitHostPort(const char* name, const std::string& text) {
  auto bad = [&](const char* why) { return invalid(strprintf("%s=%s: %s", name, text.c_str(), why)); };
  HostPort hp;
  std::string rest;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return bad("an opening '[' without its ']'");
    hp.host = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("text after ']' that is not ':port'");
    if (!rest.empty()) hp.port = rest.substr(1);
    if (!rest.empty() && hp.port.empty()) return bad("an empty port after ':'");
  } else if (const size_t colon = text.find(':');
             colon != std::string::npos && text.find(':', colon + 1) == std::string::npos) {
    hp.host = text.substr(0, colon);
    hp.port = text.substr(colon + 1);
    if (hp.port.empty()) return bad("an empty port after ':'");
  } else {
    hp.host = text;  // a host name, an IPv4 address or a bare IPv6 address
  }
  if (hp.host.empty()) return bad("an empty host");
  if (hp.host.size() > 253) return bad("a host name longer than DNS allows (253 characters)");
  for (char c : hp.host) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '/' || c == '[' || c == ']') {
      return bad("the host holds a blank, '/' or a bracket");
    }
  }
  return hp;
}

Status checkPort(const char* name, const std::string& port) {
  const std::optional<int> p = wholeNumber(port.c_str());
  if (!p || *p < 1 || *p > 65535)
    return invalid(strprintf("%s: port '%s' is not a number in 1-65535", name, port.c_str()));
  return Status();
}

std::string joinHostPort(const std::string& host, const std::string& port) {
  return host.find(':') != std::string::npos ? "[" + host + "]:" + port : host + ":" + port;
}

Status readRoot(const Lookup& env, LaunchEnv& out) {
  if (const char* id = get(env, "NCCL_COMM_ID")) {
    CFX_TRY_ASSIGN(HostPort hp, splitHostPort("NCCL_COMM_ID", id));
    if (hp.port.empty()) return invalid(strprintf("NCCL_COMM_ID=%s has no port: use host:port or [v6]:port", id));
    CFX_TRY(checkPort("NCCL_COMM_ID", hp.port));
    out.rootAddress = joinHostPort(hp.host, hp.port);
    out.rootFrom = "NCCL_COMM_ID";
    return Status();
  }
  const char* addr = get(env, "MASTER_ADDR");
  const char* port = get(env, "MASTER_PORT");
  if (addr != nullptr || port != nullptr) {
    if (addr == nullptr) return invalid(strprintf("MASTER_PORT=%s is set but MASTER_ADDR is not", port));
    CFX_TRY_ASSIGN(HostPort hp, splitHostPort("MASTER_ADDR", addr));
    if (!hp.port.empty()) {
      return invalid(
          strprintf("MASTER_ADDR=%s holds a port: MASTER_ADDR takes the host alone and MASTER_PORT the port "
                    "(or use CFX_MASTER_ADDR=host:port)",
                    addr));
    }
    if (port == nullptr) return invalid(strprintf("MASTER_ADDR=%s is set but MASTER_PORT is not", addr));
    CFX_TRY(checkPort("MASTER_PORT", port));
    out.rootAddress = joinHostPort(hp.host, port);
    out.rootFrom = "MASTER_ADDR, MASTER_PORT";
    return Status();
  }
  const char* cfxAddr = get(env, "CFX_MASTER_ADDR");
  const char* cfxPort = get(env, "CFX_MASTER_PORT");
  if (cfxAddr == nullptr) {
    if (cfxPort != nullptr) return invalid(strprintf("CFX_MASTER_PORT=%s is set but CFX_MASTER_ADDR is not", cfxPort));
    return Status();  // no root given; the caller decides whether it needs one
  }
  CFX_TRY_ASSIGN(HostPort hp, splitHostPort("CFX_MASTER_ADDR", cfxAddr));
  if (!hp.port.empty() && cfxPort != nullptr && hp.port != cfxPort) {
    return invalid(strprintf("CFX_MASTER_ADDR=%s and CFX_MASTER_PORT=%s name different ports", cfxAddr, cfxPort));
  }
  const char* portFrom = "CFX_MASTER_ADDR";
  if (hp.port.empty()) {
    if (cfxPort == nullptr) {
      return invalid(
          strprintf("CFX_MASTER_ADDR=%s has no port: use CFX_MASTER_ADDR=host:port or set CFX_MASTER_PORT", cfxAddr));
    }
    hp.port = cfxPort;
    portFrom = "CFX_MASTER_PORT";
  }
  CFX_TRY(checkPort(portFrom, hp.port));
  out.rootAddress = joinHostPort(hp.host, hp.port);
  out.rootFrom = cfxPort != nullptr ? "CFX_MASTER_ADDR, CFX_MASTER_PORT" : "CFX_MASTER_ADDR";
  return Status();
}

Status readLauncher(const Lookup& env, const Launcher& l, LaunchEnv& out) {
  const char* rankText = get(env, l.rank);
  const char* sizeName = nullptr;
  const char* sizeText = nullptr;
  for (const char* s : l.size) {
    if ((sizeText = get(env, s)) != nullptr) {
      sizeName = s;
      break;
    }
  }
  if (sizeText == nullptr) return invalid(strprintf("%s=%s is set but %s is not", l.rank, rankText, l.size[0]));
  CFX_TRY_ASSIGN(const int rank, readNumber(l.rank, rankText));
  CFX_TRY_ASSIGN(const int size, readNumber(sizeName, sizeText));
  if (size < 1) return invalid(strprintf("%s=%s: a job has at least one process", sizeName, sizeText));
  if (rank >= size) return invalid(strprintf("%s=%s is not below %s=%s", l.rank, rankText, sizeName, sizeText));
  out.launcher = l.name;
  out.rank = rank;
  out.nRanks = size;
  if (const char* text = get(env, l.localRank)) {
    CFX_TRY_ASSIGN(out.localRank, readNumber(l.localRank, text));
  }
  if (const char* text = get(env, l.localSize)) {
    CFX_TRY_ASSIGN(out.localRanks, readNumber(l.localSize, text));
    if (out.localRanks < 1) return invalid(strprintf("%s=%s: a host runs at least one process", l.localSize, text));
    if (out.localRank >= out.localRanks) {
      return invalid(strprintf("%s=%d is not below %s=%s", l.localRank, out.localRank, l.localSize, text));
    }
  }
  if (const char* job = get(env, l.jobId)) out.jobId = job;
  return Status();
}

}  // namespace

Result<LaunchEnv> parseLaunchEnv(const Lookup& env) {
  LaunchEnv out;
  const Launcher* chosen = nullptr;
  for (const Launcher& l : kLaunchers) {
    if (get(env, l.rank) != nullptr) {
      chosen = &l;
      break;
    }
  }
  // A size without its rank is no launch: WORLD_SIZE alone is often exported for other tools, and Slurm sets
  // SLURM_NTASKS in a batch script, where a program started without srun is a single process.
  if (chosen != nullptr) CFX_TRY(readLauncher(env, *chosen, out));
  CFX_TRY(readRoot(env, out));
  return out;
}

const char* processEnv(const char* name) { return std::getenv(name); }

std::span<const LaunchVariable> launchVariables() { return kVariables; }

}  // namespace cfx::launch
