// SPDX-License-Identifier: Apache-2.0
// Exported names that libnccl.so.2 must have but this library does not implement yet (api layer): the host
// functions of NCCL 2.28's device API and the NCCL 2.29/2.30 additions, all declared in conflux_nccl_ext.h.
// Each one WARNs and returns ncclInvalidUsage (never ncclSuccess: a caller must not believe the feature works).
#include <cstdint>

#include "api/api_exports.h"
#include "common/log.h"
#include "conflux_nccl_ext.h"
#include "nccl.h"

namespace cfx::api {
namespace {

// Logs the WARN that also becomes ncclGetLastError(). Formatting may allocate; a failure to log must not turn
// into an exception crossing the C boundary, so it is swallowed.
void warnNotSupported(const char* name) noexcept {
  try {
    CFX_WARN("%s is not supported by this library yet", name);
  } catch (...) {
  }
}

ncclResult_t notSupported(const char* name) noexcept {
  warnNotSupported(name);
  return ncclInvalidUsage;
}

// The empty team: no members, so callers that compare team sizes take their fallback path.
ncclTeam_t emptyTeam(const char* name) noexcept {
  warnNotSupported(name);
  return ncclTeam_t{0, 0, 0};
}

// "No such rank": -1 cannot be mistaken for a valid rank, unlike 0.
int noRank(const char* name) noexcept {
  warnNotSupported(name);
  return -1;
}

}  // namespace
}  // namespace cfx::api

using cfx::api::emptyTeam;
using cfx::api::noRank;
using cfx::api::notSupported;

// ---- Host functions of the 2.28 device API -------------------------------------------------------------------

CFX_API ncclResult_t pncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*) {
  return notSupported("ncclDevCommCreate");
}
CFX_NCCL_ALIAS(ncclDevCommCreate)

CFX_API ncclResult_t pncclDevCommDestroy(ncclComm_t, const ncclDevComm_t*) {
  return notSupported("ncclDevCommDestroy");
}
CFX_NCCL_ALIAS(ncclDevCommDestroy)

CFX_API ncclTeam_t pncclTeamWorld(ncclComm_t) { return emptyTeam("ncclTeamWorld"); }
CFX_NCCL_ALIAS(ncclTeamWorld)

CFX_API ncclTeam_t pncclTeamLsa(ncclComm_t) { return emptyTeam("ncclTeamLsa"); }
CFX_NCCL_ALIAS(ncclTeamLsa)

CFX_API ncclTeam_t pncclTeamRail(ncclComm_t) { return emptyTeam("ncclTeamRail"); }
CFX_NCCL_ALIAS(ncclTeamRail)

CFX_API int pncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int) { return noRank("ncclTeamRankToWorld"); }
CFX_NCCL_ALIAS(ncclTeamRankToWorld)

CFX_API int pncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int) { return noRank("ncclTeamRankToLsa"); }
CFX_NCCL_ALIAS(ncclTeamRankToLsa)

CFX_API ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                                      ncclDevResourceRequirements_t*) {
  return notSupported("ncclLsaBarrierCreateRequirement");
}
CFX_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)

CFX_API ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                                      ncclDevResourceRequirements_t*) {
  return notSupported("ncclGinBarrierCreateRequirement");
}
CFX_NCCL_ALIAS(ncclGinBarrierCreateRequirement)

CFX_API int pncclLLA2ACalcSlots(int, int) {
  cfx::api::warnNotSupported("ncclLLA2ACalcSlots");
  return 0;
}
CFX_NCCL_ALIAS(ncclLLA2ACalcSlots)

CFX_API ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*) {
  return notSupported("ncclLLA2ACreateRequirement");
}
CFX_NCCL_ALIAS(ncclLLA2ACreateRequirement)

// ---- NCCL 2.29 ----------------------------------------------------------------------------------------------

// ncclCommGetUniqueId and ncclCommGrow are implemented (comm_api.cc).

CFX_API ncclResult_t pncclCommSuspend(ncclComm_t, int) { return notSupported("ncclCommSuspend"); }
CFX_NCCL_ALIAS(ncclCommSuspend)

CFX_API ncclResult_t pncclCommResume(ncclComm_t) { return notSupported("ncclCommResume"); }
CFX_NCCL_ALIAS(ncclCommResume)

CFX_API ncclResult_t pncclCommMemStats(ncclComm_t, ncclCommMemStat_t, uint64_t*) {
  return notSupported("ncclCommMemStats");
}
CFX_NCCL_ALIAS(ncclCommMemStats)

CFX_API ncclResult_t pncclCommQueryProperties(ncclComm_t, ncclCommProperties_t*) {
  return notSupported("ncclCommQueryProperties");
}
CFX_NCCL_ALIAS(ncclCommQueryProperties)

CFX_API ncclResult_t pncclWinGetUserPtr(ncclComm_t, ncclWindow_t, void**) { return notSupported("ncclWinGetUserPtr"); }
CFX_NCCL_ALIAS(ncclWinGetUserPtr)

CFX_API ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return notSupported("ncclGetLsaMultimemDevicePointer");
}
CFX_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)

CFX_API ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t, void**) {
  return notSupported("ncclGetMultimemDevicePointer");
}
CFX_NCCL_ALIAS(ncclGetMultimemDevicePointer)

CFX_API ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void**) {
  return notSupported("ncclGetLsaDevicePointer");
}
CFX_NCCL_ALIAS(ncclGetLsaDevicePointer)

CFX_API ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**) {
  return notSupported("ncclGetPeerDevicePointer");
}
CFX_NCCL_ALIAS(ncclGetPeerDevicePointer)

CFX_API ncclResult_t pncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                    unsigned int, ncclComm_t, cudaStream_t) {
  return notSupported("ncclPutSignal");
}
CFX_NCCL_ALIAS(ncclPutSignal)

CFX_API ncclResult_t pncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return notSupported("ncclSignal");
}
CFX_NCCL_ALIAS(ncclSignal)

CFX_API ncclResult_t pncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return notSupported("ncclWaitSignal");
}
CFX_NCCL_ALIAS(ncclWaitSignal)

CFX_API ncclResult_t pncclGinOutboxCreateRequirement(int, int, ncclGinOutboxHandle_t*, ncclDevResourceRequirements_t*) {
  return notSupported("ncclGinOutboxCreateRequirement");
}
CFX_NCCL_ALIAS(ncclGinOutboxCreateRequirement)

CFX_API ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, ncclGinInboxA2AHandle_t*,
                                                       ncclDevResourceRequirements_t*) {
  return notSupported("ncclGinInboxA2ACreateRequirement");
}
CFX_NCCL_ALIAS(ncclGinInboxA2ACreateRequirement)

// ---- NCCL 2.30: parameter access ----------------------------------------------------------------------------

CFX_API ncclResult_t pncclParamBind(ncclParamHandle_t*, const char*) { return notSupported("ncclParamBind"); }
CFX_NCCL_ALIAS(ncclParamBind)

CFX_API ncclResult_t pncclParamGetI8(ncclParamHandle_t, int8_t*) { return notSupported("ncclParamGetI8"); }
CFX_NCCL_ALIAS(ncclParamGetI8)

CFX_API ncclResult_t pncclParamGetI16(ncclParamHandle_t, int16_t*) { return notSupported("ncclParamGetI16"); }
CFX_NCCL_ALIAS(ncclParamGetI16)

CFX_API ncclResult_t pncclParamGetI32(ncclParamHandle_t, int32_t*) { return notSupported("ncclParamGetI32"); }
CFX_NCCL_ALIAS(ncclParamGetI32)

CFX_API ncclResult_t pncclParamGetI64(ncclParamHandle_t, int64_t*) { return notSupported("ncclParamGetI64"); }
CFX_NCCL_ALIAS(ncclParamGetI64)

CFX_API ncclResult_t pncclParamGetU8(ncclParamHandle_t, uint8_t*) { return notSupported("ncclParamGetU8"); }
CFX_NCCL_ALIAS(ncclParamGetU8)

CFX_API ncclResult_t pncclParamGetU16(ncclParamHandle_t, uint16_t*) { return notSupported("ncclParamGetU16"); }
CFX_NCCL_ALIAS(ncclParamGetU16)

CFX_API ncclResult_t pncclParamGetU32(ncclParamHandle_t, uint32_t*) { return notSupported("ncclParamGetU32"); }
CFX_NCCL_ALIAS(ncclParamGetU32)

CFX_API ncclResult_t pncclParamGetU64(ncclParamHandle_t, uint64_t*) { return notSupported("ncclParamGetU64"); }
CFX_NCCL_ALIAS(ncclParamGetU64)

CFX_API ncclResult_t pncclParamGetStr(ncclParamHandle_t, const char**) { return notSupported("ncclParamGetStr"); }
CFX_NCCL_ALIAS(ncclParamGetStr)

CFX_API ncclResult_t pncclParamGet(ncclParamHandle_t, void*, int, int*) { return notSupported("ncclParamGet"); }
CFX_NCCL_ALIAS(ncclParamGet)

CFX_API ncclResult_t pncclParamGetParameter(const char*, const char**, int*) {
  return notSupported("ncclParamGetParameter");
}
CFX_NCCL_ALIAS(ncclParamGetParameter)

CFX_API ncclResult_t pncclParamGetAllParameterKeys(const char***, int*) {
  return notSupported("ncclParamGetAllParameterKeys");
}
CFX_NCCL_ALIAS(ncclParamGetAllParameterKeys)

CFX_API void pncclParamDumpAll(void) { cfx::api::warnNotSupported("ncclParamDumpAll"); }
CFX_NCCL_ALIAS(ncclParamDumpAll)

// ---- ABI-only export ----------------------------------------------------------------------------------------

// NVIDIA's library exports this helper of ncclResetDebugInit (strong, no pnccl twin, in no header). Plugins
// built against NCCL may call it, so it exists here too and does what its name says.
CFX_API void ncclResetDebugInitInternal() {
  try {
    cfx::log::reset();
  } catch (...) {
  }
}
