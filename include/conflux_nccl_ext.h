/* SPDX-License-Identifier: Apache-2.0
 *
 * Conflux: NCCL names that libnccl.so.2 exports but NVIDIA's 2.28.9 nccl.h does not declare.
 * Public C99 header (include/), optional: nccl.h does not include it.
 *
 * Three groups of functions:
 *  1. The host functions of NCCL 2.28's device API (NVIDIA declares them in the nccl_device headers). NVIDIA's 2.28
 *     library exports them, and nccl-tests and PyTorch link against them.
 *  2. Functions added in NCCL 2.29 and 2.30. Newer PyTorch wheels import them at load time, so a library that
 *     lacks them fails `import torch` with "undefined symbol".
 *  3. ncclAllToAllv, which RCCL and MSCCL++ export (PyTorch calls it on ROCm) and NVIDIA's library does not.
 *
 * Groups 1 and 2 are not implemented yet. Every function there logs a WARN "<name> is not supported by this
 * library yet" and returns ncclInvalidUsage; functions that return something other than ncclResult_t say below
 * what they return instead. Callers can therefore detect the missing feature and fall back. ncclGetVersion still
 * reports 22809, so callers that check the version never reach these functions. Group 3 is implemented.
 *
 * The types below have the size and, where a type is passed by value, the layout of NVIDIA's, so the calling
 * convention matches. Types used only behind pointers are left incomplete. Do not combine this header with
 * NVIDIA's nccl_device headers in one translation unit: both define the device-API types (this header skips its
 * copy if nccl_device/core.h was included first).
 *
 * Thread safety: every function here is safe to call from any thread; none touches shared state except the
 * process-wide last-error text read by ncclGetLastError().
 */
#ifndef CONFLUX_NCCL_EXT_H_
#define CONFLUX_NCCL_EXT_H_

#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Device-API types (NCCL 2.28 nccl_device/core.h, 2.29 additions)
 * ------------------------------------------------------------------------------------------------------- */

#ifndef _NCCL_DEVICE_CORE_H_
/* A subset of a communicator's ranks: nRanks members, this rank's index, and the world-rank stride. Passed and
 * returned by value (12 bytes). */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

/* A multicast (NVLS) handle; passed by value (one pointer). */
typedef struct ncclMultimemHandle {
  void* mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclCommProperties ncclCommProperties_t;
#endif /* _NCCL_DEVICE_CORE_H_ */

typedef struct ncclGinOutboxHandle ncclGinOutboxHandle_t;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle_t;

/* ---------------------------------------------------------------------------------------------------------
 * 1. Host functions of the 2.28 device API
 * ------------------------------------------------------------------------------------------------------- */

/* Would create a device communicator for kernels written against nccl_device. Returns ncclInvalidUsage;
 * *outDevComm is left untouched. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                ncclDevComm_t* outDevComm);

/* Returns ncclInvalidUsage. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);

/* Would return the team of all ranks, of the ranks that share load/store-accessible memory, or of this rank's
 * rail. Return the empty team {0, 0, 0}. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);

/* Would translate rank of team into a world or LSA rank. Return -1 (no such rank). */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Resource-requirement builders for device barriers and the LL all-to-all. Return ncclInvalidUsage and leave
 * the outputs untouched. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);

/* Would return the slot count an LL all-to-all needs for maxElts elements of maxEltSize bytes. Returns 0. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* ---------------------------------------------------------------------------------------------------------
 * 2a. NCCL 2.29 additions
 * ------------------------------------------------------------------------------------------------------- */

/* flags of ncclCommSuspend. */
#define NCCL_SUSPEND_MEM 0x01

/* stat of ncclCommMemStats. */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* One entry of ncclWaitSignal: wait for opCnt signals from peer on (sigIdx, ctx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* Growing a communicator (2.29), with NCCL's semantics. One existing rank gets an id with ncclCommGetUniqueId and
 * hands it to the new ranks out of band. Existing ranks call ncclCommGrow(comm, nRanks, id or NULL, -1, ...): the
 * rank that made the id passes it, the others NULL, and they keep their ranks. New ranks call
 * ncclCommGrow(NULL, nRanks, &id, rank, ...) with rank in [old size, nRanks). An id is single-use and one is
 * outstanding per communicator at a time; a NULL config inherits the parent's. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);

/* Memory offload (2.29). Return ncclInvalidUsage; *value is left untouched. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* Communicator capability query (2.29; the struct is NVIDIA's ncclCommProperties_t). Returns ncclInvalidUsage
 * and leaves *props untouched, so callers treat every device-API feature as unavailable. */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);

/* Window pointers (2.29). Return ncclInvalidUsage; the output pointer is left untouched. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                          void** outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                           void** outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

/* One-sided put and signals on registered windows (2.29). Return ncclInvalidUsage; nothing is enqueued. */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/* GIN scratch-buffer requirement builders (2.29 device API). Return ncclInvalidUsage; outputs untouched. */
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle_t* outHandle,
                                            ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              ncclGinInboxA2AHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                               ncclGinInboxA2AHandle_t* outHandle,
                                               ncclDevResourceRequirements_t* outReq);

/* ---------------------------------------------------------------------------------------------------------
 * 2b. NCCL 2.30 additions: parameter access
 *
 * Our parameters are listed in docs/ENV.md; these entry points exist only so that 2.30 clients load. Each
 * returns ncclInvalidUsage and leaves its outputs untouched; ncclParamDumpAll only logs the WARN.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct ncclParamHandle* ncclParamHandle_t;

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

/* ---------------------------------------------------------------------------------------------------------
 * 3. RCCL's all-to-all-v
 * ------------------------------------------------------------------------------------------------------- */

/* Every rank sends sendcounts[p] elements from sendbuff + sdispls[p] elements to each rank p, and receives
 * recvcounts[p] elements from each rank p into recvbuff + rdispls[p] elements; RCCL's signature and semantics.
 * The four arrays hold nRanks entries in host memory and are read during the call. A pair with a zero count is
 * skipped on both sides; a rank may send to itself (sendcounts[rank] must equal recvcounts[rank]). Receive regions
 * must not overlap, nor a send region a receive region, except sendbuff == recvbuff with equal counts and
 * displacements on this rank (MPI_IN_PLACE's meaning; the library then sends from a copy). Streams, groups and
 * device buffers as ncclAlltoAll. Also available as cfxAllToAllv in conflux.h.
 *
 * Every rank's sendcounts[p] must equal rank p's recvcounts[rank]. A receiver that expects another non-zero size
 * fails with ncclInvalidUsage naming the sender (each message carries its size); a receiver that expects nothing
 * from a sender that sends cannot notice: the bytes are left queued and the pair's next operation fails on them
 * (or the sender times out, naming the receiver, when they exceed the transport's buffer).
 * Returns:
 *   ncclSuccess          done (or enqueued, or recorded in a group), as ncclAlltoAll.
 *   ncclInvalidArgument  comm not a live communicator, an invalid datatype, a NULL array, a count or displacement
 *                        that is negative (a signed value passed through size_t) or whose end overflows, a NULL
 *                        buffer with a non-zero extent, overlapping receive regions, a send region overlapping a
 *                        receive region, or sendcounts[rank] != recvcounts[rank]. The WARN names the entry.
 *   ncclInvalidUsage     ranks disagree on a pair's size; the communicator's state (revoked, aborted, ...).
 *   ncclRemoteError, ncclSystemError: as ncclAlltoAll. */
ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                           const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                            const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFLUX_NCCL_EXT_H_ */
