// SPDX-License-Identifier: Apache-2.0
// The launcher-environment parser that cfxCommInitFromEnv, cfxGetLaunchInfo and the perf tools share: every
// documented form is read as documented, and every malformed value is refused with its variable named.
#include "common/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cfx::launch {
namespace {

using Vars = std::map<std::string, std::string>;

Result<LaunchEnv> parse(const Vars& vars) {
  return parseLaunchEnv([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

LaunchEnv ok(const Vars& vars) {
  Result<LaunchEnv> r = parse(vars);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : LaunchEnv{};
}

// The error message for vars, which must be refused with InvalidUsage.
std::string refused(const Vars& vars) {
  Result<LaunchEnv> r = parse(vars);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Errc::InvalidUsage);
  return r.status().message();
}

const Vars kTorch = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

Vars with(Vars base, const Vars& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

TEST(LaunchEnv, NoLauncherIsOneProcess) {
  const LaunchEnv e = ok({});
  EXPECT_FALSE(e.found());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.nRanks, 1);
  EXPECT_EQ(e.localRank, -1);
  EXPECT_EQ(e.rootAddress, "");
  // A size alone is no launch (WORLD_SIZE exported for other tools, SLURM_NTASKS in a batch script).
  EXPECT_FALSE(ok({{"WORLD_SIZE", "4"}, {"SLURM_NTASKS", "4"}}).found());
  // Empty values count as unset, as launchers leave some empty.
  EXPECT_FALSE(ok({{"RANK", ""}, {"WORLD_SIZE", ""}}).found());
}

TEST(LaunchEnv, TorchrunVariables) {
  const LaunchEnv e = ok(with(kTorch, {{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "j7"}}));
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.nRanks, 2);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localRanks, 2);
  EXPECT_EQ(e.rootAddress, "10.0.0.1:29500");
  EXPECT_EQ(e.rootFrom, "MASTER_ADDR, MASTER_PORT");
  EXPECT_EQ(e.jobId, "j7");
}

TEST(LaunchEnv, OpenMpiSlurmAndPmiVariables) {
  LaunchEnv e = ok({{"OMPI_COMM_WORLD_RANK", "3"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                    {"OMPI_MCA_ess_base_jobid", "42"}});
  EXPECT_EQ(e.launcher, "Open MPI");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.nRanks, 4);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localRanks, 2);
  EXPECT_EQ(e.jobId, "42");

  // Slurm: the step's size wins over the allocation's; without it the allocation's counts.
  e = ok({{"SLURM_PROCID", "2"},
          {"SLURM_STEP_NUM_TASKS", "3"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_JOB_ID", "555"}});
  EXPECT_EQ(e.launcher, "Slurm");
  EXPECT_EQ(e.nRanks, 3);
  EXPECT_EQ(e.localRank, 0);
  EXPECT_EQ(e.localRanks, -1);
  EXPECT_EQ(e.jobId, "555");
  EXPECT_EQ(ok({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}}).nRanks, 8);

  e = ok({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(e.launcher, "PMI");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.localRanks, 2);
  EXPECT_EQ(e.jobId, "");
}

TEST(LaunchEnv, FirstLauncherFoundWins) {
  // mpirun -x RANK=... or torchrun under Slurm: RANK is what the user meant.
  const LaunchEnv e = ok(with(
      kTorch,
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "9"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "9"}}));
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.nRanks, 2);
  EXPECT_EQ(
      ok({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "9"}})
          .launcher,
      "Open MPI");
}

TEST(LaunchEnv, EveryRootFormIsRead) {
  struct Case {
    Vars vars;
    const char* address;
    const char* from;
  };
  const Case cases[] = {
      {{{"NCCL_COMM_ID", "node1:29500"}}, "node1:29500", "NCCL_COMM_ID"},
      {{{"NCCL_COMM_ID", "[fe80::1]:29500"}}, "[fe80::1]:29500", "NCCL_COMM_ID"},
      // NCCL_COMM_ID wins over MASTER_*, which win over CFX_MASTER_*.
      {{{"NCCL_COMM_ID", "a:1"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"}, {"CFX_MASTER_ADDR", "c:3"}},
       "a:1",
       "NCCL_COMM_ID"},
      {{{"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"}, {"CFX_MASTER_ADDR", "c:3"}}, "b:2", "MASTER_ADDR, MASTER_PORT"},
      {{{"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29500"}}, "[::1]:29500", "MASTER_ADDR, MASTER_PORT"},
      {{{"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "29500"}}, "[::1]:29500", "MASTER_ADDR, MASTER_PORT"},
      {{{"CFX_MASTER_ADDR", "host:4000"}}, "host:4000", "CFX_MASTER_ADDR"},
      {{{"CFX_MASTER_ADDR", "host"}, {"CFX_MASTER_PORT", "4000"}}, "host:4000", "CFX_MASTER_ADDR, CFX_MASTER_PORT"},
      {{{"CFX_MASTER_ADDR", "host:4000"}, {"CFX_MASTER_PORT", "4000"}},
       "host:4000",
       "CFX_MASTER_ADDR, CFX_MASTER_PORT"},
      {{{"CFX_MASTER_ADDR", "[2001:db8::2]:4000"}}, "[2001:db8::2]:4000", "CFX_MASTER_ADDR"},
      {{{"CFX_MASTER_ADDR", "2001:db8::2"}, {"CFX_MASTER_PORT", "4000"}},
       "[2001:db8::2]:4000",
       "CFX_MASTER_ADDR, CFX_MASTER_PORT"},
  };
  for (const Case& c : cases) {
    const LaunchEnv e = ok(with(c.vars, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    EXPECT_EQ(e.rootAddress, c.address);
    EXPECT_EQ(e.rootFrom, c.from);
  }
}

TEST(LaunchEnv, MalformedNumbersAreRefusedNamingTheVariable) {
  struct Case {
    Vars vars;
    const char* mentions;
  };
  const Case cases[] = {
      {{{"RANK", "1x"}, {"WORLD_SIZE", "2"}}, "RANK=1x is not a whole decimal number"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK=-1 is not a whole decimal number"},
      {{{"RANK", "+1"}, {"WORLD_SIZE", "2"}}, "RANK=+1"},
      {{{"RANK", " 1"}, {"WORLD_SIZE", "2"}}, "RANK= 1"},
      {{{"RANK", "0x1"}, {"WORLD_SIZE", "2"}}, "RANK=0x1"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2.0"}}, "WORLD_SIZE=2.0 is not a whole decimal number"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE=99999999999"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0: a job has at least one process"},
      {{{"RANK", "0"}}, "RANK=0 is set but WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "one"}}, "LOCAL_RANK=one"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "0"}}, "LOCAL_WORLD_SIZE=0"},
      {{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "x"}}, "OMPI_COMM_WORLD_SIZE=x"},
      {{{"SLURM_PROCID", "1"}}, "SLURM_PROCID=1 is set but SLURM_STEP_NUM_TASKS is not"},
      {{{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}, "SLURM_PROCID=4 is not below SLURM_NTASKS=4"},
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "-3"}}, "MPI_LOCALRANKID=-3"},
  };
  for (const Case& c : cases) {
    const std::string message = refused(c.vars);
    EXPECT_NE(message.find(c.mentions), std::string::npos) << "wanted \"" << c.mentions << "\" in: " << message;
  }
}

TEST(LaunchEnv, MalformedRootsAreRefusedNamingTheVariable) {
  struct Case {
    Vars vars;
    const char* mentions;
  };
  const Case cases[] = {
      {{{"NCCL_COMM_ID", "node1"}}, "NCCL_COMM_ID=node1 has no port"},
      {{{"NCCL_COMM_ID", "node1:"}}, "NCCL_COMM_ID=node1:: an empty port"},
      {{{"NCCL_COMM_ID", ":29500"}}, "NCCL_COMM_ID=:29500: an empty host"},
      {{{"NCCL_COMM_ID", "node1:http"}}, "NCCL_COMM_ID: port 'http' is not a number in 1-65535"},
      {{{"NCCL_COMM_ID", "node1:70000"}}, "port '70000'"},
      {{{"NCCL_COMM_ID", "node1:0"}}, "port '0'"},
      {{{"NCCL_COMM_ID", "[::1:29500"}}, "without its ']'"},
      {{{"NCCL_COMM_ID", "[::1]29500"}}, "text after ']'"},
      {{{"NCCL_COMM_ID", "no de:1"}}, "the host holds a blank"},
      {{{"MASTER_ADDR", "node1:29500"}, {"MASTER_PORT", "29500"}}, "MASTER_ADDR=node1:29500 holds a port"},
      {{{"MASTER_ADDR", "node1"}}, "MASTER_ADDR=node1 is set but MASTER_PORT is not"},
      {{{"MASTER_PORT", "29500"}}, "MASTER_PORT=29500 is set but MASTER_ADDR is not"},
      {{{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500x"}}, "MASTER_PORT: port '29500x'"},
      {{{"CFX_MASTER_ADDR", "node1"}}, "CFX_MASTER_ADDR=node1 has no port"},
      {{{"CFX_MASTER_ADDR", "node1:1"}, {"CFX_MASTER_PORT", "2"}}, "name different ports"},
      {{{"CFX_MASTER_PORT", "2"}}, "CFX_MASTER_PORT=2 is set but CFX_MASTER_ADDR is not"},
      {{{"CFX_MASTER_ADDR", "node1"}, {"CFX_MASTER_PORT", "-2"}}, "CFX_MASTER_PORT: port '-2'"},
      {{{"CFX_MASTER_ADDR", std::string(254, 'h').append(":1")}}, "longer than DNS allows"},
  };
  for (const Case& c : cases) {
    const std::string message = refused(with(c.vars, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    EXPECT_NE(message.find(c.mentions), std::string::npos) << "wanted \"" << c.mentions << "\" in: " << message;
  }
}

TEST(LaunchEnv, EveryVariableReadIsListedForTheDocs) {
  std::map<std::string, bool> listed;
  for (const LaunchVariable& v : launchVariables()) {
    EXPECT_TRUE(listed.emplace(v.name, true).second) << v.name << " listed twice";
    EXPECT_GT(std::string(v.meaning).size(), 10u) << v.name;
  }
  // One launch per launcher and per root source, so the parser asks for every name it knows.
  const Vars launches[] = {
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}, {"NCCL_COMM_ID", "a:1"}},
      {{"OMPI_COMM_WORLD_RANK", "0"},
       {"OMPI_COMM_WORLD_SIZE", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
       {"MASTER_ADDR", "a"},
       {"MASTER_PORT", "1"}},
      {{"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "1"},
       {"SLURM_NTASKS_PER_NODE", "1"},
       {"CFX_MASTER_ADDR", "a"},
       {"CFX_MASTER_PORT", "1"}},
      {{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}, {"MPI_LOCALNRANKS", "1"}},
  };
  for (const Vars& vars : launches) {
    Result<LaunchEnv> r = parseLaunchEnv([&](const char* name) -> const char* {
      EXPECT_TRUE(listed.count(name)) << name << " is read but not listed in launchVariables()";
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
}

}  // namespace
}  // namespace cfx::launch
