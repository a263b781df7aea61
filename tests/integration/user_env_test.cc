// SPDX-License-Identifier: Apache-2.0
// What a new user's environment does, through the public API: every documented launcher form creates a
// communicator, a malformed one is refused naming its variable, WARN lines name the line that found the error,
// NCCL_ALGO settings written for NVIDIA's library still apply, and NCCL_* variables this library does not read
// are each reported once. Ranks are forked processes (integration layer).
#include <arpa/inet.h>
#include <conflux.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "free_port.h"
#include "integration/multiproc.h"

namespace cfx::itest {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int countMatches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// Every launcher variable a test may set, cleared in the child first so the test's own launcher cannot leak in.
void clearLauncherVariables() {
  for (const char* v :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK",
        "NCCL_COMM_ID", "MASTER_ADDR", "MASTER_PORT", "CFX_MASTER_ADDR", "CFX_MASTER_PORT"}) {
    unsetenv(v);
  }
}

// nRanks ranks create a communicator from torchrun's rank variables and the given others (the root), and all-reduce.
void initFromEnvAndAllReduce(int nRanks, const std::vector<std::pair<std::string, std::string>>& vars) {
  runRanks(nRanks, [&](RankContext& ctx) {
    clearLauncherVariables();
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
    setenv("RANK", std::to_string(ctx.rank()).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(nRanks).c_str(), 1);
    ncclComm_t comm = nullptr;
    ASSERT_EQ(cfxCommInitFromEnv(&comm), ncclSuccess) << ncclGetLastError(nullptr);
    int rank = -1;
    int count = 0;
    EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
    EXPECT_EQ(rank, ctx.rank());
    EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);
    EXPECT_EQ(count, nRanks);
    std::vector<int> v(1001, ctx.rank() + 1);
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    for (int x : v) ASSERT_EQ(x, nRanks * (nRanks + 1) / 2);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

TEST(UserEnv, CommInitFromEnvTakesTorchrunsVariables) {
  initFromEnvAndAllReduce(3, {{"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(testports::freeLoopbackPort())},
                              {"TORCHELASTIC_RUN_ID", "user-env-test"}});
}

TEST(UserEnv, CommInitFromEnvHonoursNcclCommId) {
  initFromEnvAndAllReduce(2, {{"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(testports::freeLoopbackPort())}});
}

TEST(UserEnv, CommInitFromEnvAcceptsCfxMasterAddrWithItsPort) {
  initFromEnvAndAllReduce(2, {{"CFX_MASTER_ADDR", "127.0.0.1:" + std::to_string(testports::freeLoopbackPort())}});
}

TEST(UserEnv, CommInitFromEnvRefusesARankWithTrailingText) {
  runRanks(1, [](RankContext&) {
    clearLauncherVariables();
    setenv("RANK", "1x", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    ncclComm_t comm = nullptr;
    EXPECT_EQ(cfxCommInitFromEnv(&comm), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("RANK=1x is not a whole decimal number"), std::string::npos)
        << ncclGetLastError(nullptr);
  });
}

TEST(UserEnv, CommInitFromEnvWithoutALauncherIsInvalidUsage) {
  runRanks(1, [](RankContext&) {
    clearLauncherVariables();
    ncclComm_t comm = nullptr;
    EXPECT_EQ(cfxCommInitFromEnv(&comm), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("no launcher environment found"), std::string::npos);
    EXPECT_EQ(cfxCommInitFromEnv(nullptr), ncclInvalidArgument);
  });
}

TEST(UserEnv, GetLaunchInfoReportsTheLaunchWithoutCreatingAnything) {
  runRanks(1, [](RankContext&) {
    clearLauncherVariables();
    cfxLaunchInfo info;
    ASSERT_EQ(cfxGetLaunchInfo(&info), ncclSuccess);
    EXPECT_EQ(info.rank, 0);
    EXPECT_EQ(info.nRanks, 1);
    EXPECT_STREQ(info.launcher, "");
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("MASTER_ADDR", "::1", 1);
    setenv("MASTER_PORT", "29500", 1);
    ASSERT_EQ(cfxGetLaunchInfo(&info), ncclSuccess);
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.nRanks, 4);
    EXPECT_EQ(info.localRank, 1);
    EXPECT_EQ(info.localRanks, 2);
    EXPECT_STREQ(info.launcher, "Open MPI");
    EXPECT_STREQ(info.rootAddress, "[::1]:29500");
    EXPECT_EQ(cfxGetLaunchInfo(nullptr), ncclInvalidArgument);
  });
}

// Before, every WARN named api/api_call.cc:10, where errors were printed, and the real place came last in brackets.
TEST(UserEnv, WarnLinesNameTheLineThatFoundTheError) {
  const std::string path = ::testing::TempDir() + "cfx_user_env_warn_" + std::to_string(getpid()) + ".log";
  runRanks(1, [&](RankContext&) {
    clearLauncherVariables();
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    setenv("RANK", "1x", 1);
    setenv("WORLD_SIZE", "2", 1);
    cfxLaunchInfo info;
    EXPECT_EQ(cfxGetLaunchInfo(&info), ncclInvalidUsage);
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRank(&comm, 0, ncclUniqueId{}, 0), ncclInvalidArgument);  // the log flushes every line
  });
  const std::string log = readFile(path);
  unlink(path.c_str());
  EXPECT_EQ(countMatches(log, R"(\[\d+\] common/launch_env\.cc:\d+ NCCL WARN cfxGetLaunchInfo: RANK=1x)"), 1) << log;
  EXPECT_EQ(countMatches(log, R"(\[\d+\] api/comm_api\.cc:\d+ NCCL WARN ncclCommInitRank: invalid nranks 0)"), 1)
      << log;
  EXPECT_EQ(log.find("api_call.cc"), std::string::npos) << log;
}

TEST(UserEnv, SettingsWrittenForNvidiasLibraryAreAppliedOrReportedOnce) {
  const std::string path = ::testing::TempDir() + "cfx_user_env_info_" + std::to_string(getpid()) + ".log";
  RunOptions options;
  options.env = {{"NCCL_DEBUG", "INFO"},       {"NCCL_DEBUG_SUBSYS", "ENV"}, {"NCCL_DEBUG_FILE", path + ".%p"},
                 {"NCCL_ALGO", "^NVLS,Ring"},  {"NCCL_IB_DISABLE", "1"},     {"NCCL_P2P_DISABLE", "1"},
                 {"NCCL_BUFFSIZE", "8388608"}, {"NCCL_TESTS_MIN_BW", "1"}};
  runRanks(2, options, [&](RankContext& ctx) {
    ncclComm_t comm = ctx.initComm();
    ASSERT_NE(comm, nullptr);
    ncclComm_t second = nullptr;  // a second communicator must not repeat the lines
    ASSERT_EQ(ncclCommSplit(comm, 0, ctx.rank(), &second, nullptr), ncclSuccess);
    cfxPlanInfo plan;
    ASSERT_EQ(cfxCommGetPlan(comm, cfxCollAllReduce, 1 << 22, ncclFloat32, &plan), ncclSuccess);
    EXPECT_STRNE(plan.algorithm, "Ring") << "^NVLS,Ring must still exclude Ring: " << plan.text;
    EXPECT_EQ(ncclCommDestroy(second), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    const std::string mine = path + "." + std::to_string(getpid());
    const std::string log = readFile(mine);
    unlink(mine.c_str());
    const std::string ignored = " set by environment to [^ ]+, but this library does not use it: ignored";
    EXPECT_EQ(countMatches(log, "NCCL INFO NCCL_IB_DISABLE" + ignored), 1) << log;
    EXPECT_EQ(countMatches(log, "NCCL INFO NCCL_P2P_DISABLE" + ignored), 1) << log;
    EXPECT_EQ(countMatches(log, "NCCL INFO NCCL_BUFFSIZE" + ignored), 1) << log;
    EXPECT_EQ(countMatches(log, "does not use it"), 3) << "only unread NCCL_* variables, and not nccl-tests': " << log;
    EXPECT_EQ(countMatches(log, "NCCL_ALGO names NVLS, which this library does not have: skipped"), 1) << log;
  });
}

}  // namespace
}  // namespace cfx::itest
