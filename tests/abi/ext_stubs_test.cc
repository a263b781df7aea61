// SPDX-License-Identifier: Apache-2.0
// The names in conflux_nccl_ext.h exist in libnccl.so.2 and fail loudly: ncclInvalidUsage (or the documented
// neutral value) plus a WARN that ncclGetLastError returns, so a caller can tell the feature is missing (tests/abi).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "conflux.h"
#include "conflux_nccl_ext.h"
#include "nccl.h"

namespace {

struct StubCase {
  const char* name;
  std::function<ncclResult_t()> call;
};

std::vector<StubCase> resultStubs() {
  ncclTeam_t team{};
  ncclMultimemHandle_t multimem{};
  return {
      {"ncclDevCommCreate", [] { return ncclDevCommCreate(nullptr, nullptr, nullptr); }},
      {"ncclDevCommDestroy", [] { return ncclDevCommDestroy(nullptr, nullptr); }},
      {"ncclLsaBarrierCreateRequirement",
       [team] { return ncclLsaBarrierCreateRequirement(team, 1, nullptr, nullptr); }},
      {"ncclGinBarrierCreateRequirement",
       [team] { return ncclGinBarrierCreateRequirement(nullptr, team, 1, nullptr, nullptr); }},
      {"ncclLLA2ACreateRequirement", [] { return ncclLLA2ACreateRequirement(1, 1, nullptr, nullptr); }},
      {"ncclCommSuspend", [] { return ncclCommSuspend(nullptr, NCCL_SUSPEND_MEM); }},
      {"ncclCommResume", [] { return ncclCommResume(nullptr); }},
      {"ncclCommMemStats", [] { return ncclCommMemStats(nullptr, ncclStatGpuMemTotal, nullptr); }},
      {"ncclCommQueryProperties", [] { return ncclCommQueryProperties(nullptr, nullptr); }},
      {"ncclWinGetUserPtr", [] { return ncclWinGetUserPtr(nullptr, nullptr, nullptr); }},
      {"ncclGetLsaMultimemDevicePointer", [] { return ncclGetLsaMultimemDevicePointer(nullptr, 0, nullptr); }},
      {"ncclGetMultimemDevicePointer",
       [multimem] { return ncclGetMultimemDevicePointer(nullptr, 0, multimem, nullptr); }},
      {"ncclGetLsaDevicePointer", [] { return ncclGetLsaDevicePointer(nullptr, 0, 0, nullptr); }},
      {"ncclGetPeerDevicePointer", [] { return ncclGetPeerDevicePointer(nullptr, 0, 0, nullptr); }},
      {"ncclPutSignal",
       [] { return ncclPutSignal(nullptr, 0, ncclFloat32, 0, nullptr, 0, 0, 0, 0, nullptr, nullptr); }},
      {"ncclSignal", [] { return ncclSignal(0, 0, 0, 0, nullptr, nullptr); }},
      {"ncclWaitSignal", [] { return ncclWaitSignal(0, nullptr, nullptr, nullptr); }},
      {"ncclGinOutboxCreateRequirement", [] { return ncclGinOutboxCreateRequirement(1, 7, nullptr, nullptr); }},
      {"ncclGinInboxA2ACreateRequirement",
       [team] { return ncclGinInboxA2ACreateRequirement(team, 1, 7, nullptr, nullptr); }},
      {"ncclParamBind", [] { return ncclParamBind(nullptr, "NCCL_DEBUG"); }},
      {"ncclParamGetI8", [] { return ncclParamGetI8(nullptr, nullptr); }},
      {"ncclParamGetI16", [] { return ncclParamGetI16(nullptr, nullptr); }},
      {"ncclParamGetI32", [] { return ncclParamGetI32(nullptr, nullptr); }},
      {"ncclParamGetI64", [] { return ncclParamGetI64(nullptr, nullptr); }},
      {"ncclParamGetU8", [] { return ncclParamGetU8(nullptr, nullptr); }},
      {"ncclParamGetU16", [] { return ncclParamGetU16(nullptr, nullptr); }},
      {"ncclParamGetU32", [] { return ncclParamGetU32(nullptr, nullptr); }},
      {"ncclParamGetU64", [] { return ncclParamGetU64(nullptr, nullptr); }},
      {"ncclParamGetStr", [] { return ncclParamGetStr(nullptr, nullptr); }},
      {"ncclParamGet", [] { return ncclParamGet(nullptr, nullptr, 0, nullptr); }},
      {"ncclParamGetParameter", [] { return ncclParamGetParameter("NCCL_DEBUG", nullptr, nullptr); }},
      {"ncclParamGetAllParameterKeys", [] { return ncclParamGetAllParameterKeys(nullptr, nullptr); }},
  };
}

void expectWarned(const char* name) {
  std::string last = ncclGetLastError(nullptr);
  EXPECT_NE(last.find(name), std::string::npos) << "last error: " << last;
  EXPECT_NE(last.find("not supported"), std::string::npos) << "last error: " << last;
}

TEST(ExtensionStubs, ReturnInvalidUsageAndWarnWithTheirName) {
  for (const StubCase& stub : resultStubs()) {
    SCOPED_TRACE(stub.name);
    EXPECT_EQ(stub.call(), ncclInvalidUsage);
    expectWarned(stub.name);
  }
}

TEST(ExtensionStubs, NonResultFunctionsReturnNeutralValues) {
  ncclTeam_t team = ncclTeamWorld(nullptr);
  EXPECT_EQ(team.nRanks, 0);
  expectWarned("ncclTeamWorld");
  EXPECT_EQ(ncclTeamLsa(nullptr).nRanks, 0);
  expectWarned("ncclTeamLsa");
  EXPECT_EQ(ncclTeamRail(nullptr).nRanks, 0);
  expectWarned("ncclTeamRail");
  EXPECT_EQ(ncclTeamRankToWorld(nullptr, team, 0), -1);
  expectWarned("ncclTeamRankToWorld");
  EXPECT_EQ(ncclTeamRankToLsa(nullptr, team, 0), -1);
  expectWarned("ncclTeamRankToLsa");
  EXPECT_EQ(ncclLLA2ACalcSlots(16, 8), 0);
  expectWarned("ncclLLA2ACalcSlots");
  ncclParamDumpAll();
  expectWarned("ncclParamDumpAll");
}

TEST(ExtensionStubs, ProfilingTwinsAreTheSameFunction) {
  for (const char* name : {"ncclCommResume", "ncclTeamWorld", "ncclParamDumpAll", "ncclDevCommCreate"}) {
    SCOPED_TRACE(name);
    void* pub = dlsym(RTLD_DEFAULT, name);
    void* prof = dlsym(RTLD_DEFAULT, (std::string("p") + name).c_str());
    ASSERT_NE(pub, nullptr);
    EXPECT_EQ(pub, prof);
  }
}

// Group 3 of conflux_nccl_ext.h is implemented: RCCL's ncclAllToAllv, with its profiling twin, and cfxAllToAllv.
TEST(RcclExtensions, AllToAllvIsExportedWithItsTwinAndIsNoStub) {
  void* pub = dlsym(RTLD_DEFAULT, "ncclAllToAllv");
  ASSERT_NE(pub, nullptr);
  EXPECT_EQ(pub, dlsym(RTLD_DEFAULT, "pncclAllToAllv"));
  EXPECT_NE(dlsym(RTLD_DEFAULT, "cfxAllToAllv"), nullptr);
  // A real entry point checks its arguments (a stub would say ncclInvalidUsage, "not supported").
  const size_t zero[1] = {0};
  EXPECT_EQ(ncclAllToAllv(nullptr, zero, zero, nullptr, zero, zero, ncclInt8, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(std::string(ncclGetLastError(nullptr)).find("not supported"), std::string::npos) << ncclGetLastError(nullptr);
}

TEST(Versions, LibraryReportsWhatTheHeadersClaim) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  int release = -1;
  ASSERT_EQ(cfxGetVersion(&release), ncclSuccess);
  EXPECT_EQ(release, CFX_VERSION_CODE);
}

}  // namespace
