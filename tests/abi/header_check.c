/* SPDX-License-Identifier: Apache-2.0
 * The public headers compile cleanly as C99 and as C++ (-Wall -Wextra -Werror -pedantic), with and without CUDA
 * headers, in either include order (tests/abi). Written in the common subset of C99 and C++11; the C++ variants
 * compile a copy of this file. Nothing here calls into the library, so it links without it. */
#ifdef CFX_TEST_CUDA_FIRST
#include <cuda_runtime.h>
#endif
#include "conflux.h"
#include "conflux_nccl_ext.h"
#include "nccl.h"
#ifdef CFX_TEST_CUDA_AFTER
#include <cuda_runtime.h>
#endif

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Compile-time checks that work in C99 (no _Static_assert) and C++. */
#define CFX_CHECK_STATIC(name, cond) typedef char cfx_check_##name[(cond) ? 1 : -1]
CFX_CHECK_STATIC(unique_id_bytes, sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128);
CFX_CHECK_STATIC(version_code, NCCL_VERSION_CODE == 22809);
CFX_CHECK_STATIC(version_macro, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE);
CFX_CHECK_STATIC(old_version_encoding, NCCL_VERSION(2, 8, 4) == 2804);
CFX_CHECK_STATIC(config_size, sizeof(void*) != 8 || sizeof(ncclConfig_t) == 80);
CFX_CHECK_STATIC(enum_sizes, sizeof(ncclResult_t) == 4 && sizeof(ncclRedOp_t) == 4 && sizeof(ncclDataType_t) == 4);
CFX_CHECK_STATIC(stream_is_pointer, sizeof(cudaStream_t) == sizeof(void*));
CFX_CHECK_STATIC(cfx_version_code, CFX_VERSION_CODE == CFX_MAJOR * 10000 + CFX_MINOR * 100 + CFX_PATCH);
/* cfxFailureInfo is filled by the library: its layout is ABI. */
CFX_CHECK_STATIC(failure_info_size, sizeof(cfxFailureInfo) == 24 + 64 + 32 + CFX_FAILURE_TEXT_BYTES);
CFX_CHECK_STATIC(failure_info_seq, offsetof(cfxFailureInfo, opSeq) == 16 && offsetof(cfxFailureInfo, host) == 24);
CFX_CHECK_STATIC(failure_reasons, cfxFailureExited == 1 && cfxFailureConnectionLost == 2 && cfxFailureHung == 3);
/* cfxLaunchInfo too. */
CFX_CHECK_STATIC(launch_info_size, sizeof(cfxLaunchInfo) == 16 + 32 + CFX_ROOT_ADDRESS_BYTES);
CFX_CHECK_STATIC(launch_info_text,
                 offsetof(cfxLaunchInfo, launcher) == 16 && offsetof(cfxLaunchInfo, rootAddress) == 48);
/* The MoE structs are read and filled by the library: their layout is ABI (LP64). */
CFX_CHECK_STATIC(moe_config_size, sizeof(void*) != 8 || sizeof(cfxMoeConfig) == 56);
CFX_CHECK_STATIC(moe_config_offsets, sizeof(void*) != 8 || (offsetof(cfxMoeConfig, hidden) == 8 &&
                                                            offsetof(cfxMoeConfig, expertToRank) == 32 &&
                                                            offsetof(cfxMoeConfig, maxRecvTokens) == 48));
CFX_CHECK_STATIC(moe_counts_size, sizeof(void*) != 8 || sizeof(cfxMoeCounts) == 56);
CFX_CHECK_STATIC(moe_modes, cfxMoeNormal == 0 && cfxMoeBounded == 1 && CFX_MOE_UNWEIGHTED == 1);
CFX_CHECK_STATIC(coll_numbers, cfxCollScan == 9 && cfxCollAllToAllv == 10 && cfxCollMoeCombine == 12);

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

/* Type-checks a function against an expected pointer type without referencing the symbol: the assignment sits
 * in an unevaluated sizeof, and an incompatible type is an error under -Werror. */
#define CFX_CHECK_SIGNATURE(ret, params, fn) \
  do {                                       \
    ret(*fp_) params = NULL;                 \
    (void)sizeof(fp_ = &fn);                 \
    (void)fp_;                               \
  } while (0)

static void checkSignatures(void) {
  CFX_CHECK_SIGNATURE(ncclResult_t, (int*), ncclGetVersion);
  CFX_CHECK_SIGNATURE(ncclResult_t, (void), ncclGroupStart);
  CFX_CHECK_SIGNATURE(ncclResult_t, (void), pncclGroupEnd);
  CFX_CHECK_SIGNATURE(ncclResult_t,
                      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t),
                      ncclAllReduce);
  CFX_CHECK_SIGNATURE(ncclResult_t, (int*), cfxGetVersion);
  CFX_CHECK_SIGNATURE(ncclResult_t, (cfxHostStream_t*), cfxHostStreamCreate);
  CFX_CHECK_SIGNATURE(ncclResult_t, (cfxHostStream_t), cfxHostStreamQuery);
  CFX_CHECK_SIGNATURE(ncclResult_t, (cfxHostStream_t), cfxHostStreamSynchronize);
  CFX_CHECK_SIGNATURE(ncclResult_t, (cfxHostStream_t), cfxHostStreamDestroy);
  CFX_CHECK_SIGNATURE(ncclResult_t, (ncclComm_t*), cfxCommInitFromEnv);
  CFX_CHECK_SIGNATURE(ncclResult_t, (cfxLaunchInfo*), cfxGetLaunchInfo);
  CFX_CHECK_SIGNATURE(ncclResult_t, (ncclComm_t, cfxFailureInfo*, int, int*), cfxCommGetFailures);
  CFX_CHECK_SIGNATURE(ncclTeam_t, (ncclComm_t), ncclTeamWorld);
  CFX_CHECK_SIGNATURE(ncclResult_t, (ncclComm_t), ncclCommResume);
  CFX_CHECK_SIGNATURE(void, (void), ncclParamDumpAll);
}

int main(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t simInfo = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  cfxHostStream_t hostStream = NULL;
  cudaStream_t stream = (cudaStream_t)hostStream; /* how a host stream is passed to a collective */
  ncclComm_t comm = NCCL_COMM_NULL;

  checkSignatures();
  memset(&id, 0, sizeof id);
  expect(config.size == sizeof(ncclConfig_t), "config.size");
  expect(config.magic == 0xcafebeefu, "config.magic");
  expect(config.version == NCCL_VERSION_CODE, "config.version");
  expect(config.blocking == INT_MIN && config.cgaClusterSize == INT_MIN && config.minCTAs == INT_MIN &&
             config.maxCTAs == INT_MIN && config.splitShare == INT_MIN && config.trafficClass == INT_MIN &&
             config.collnetEnable == INT_MIN && config.CTAPolicy == INT_MIN && config.shrinkShare == INT_MIN &&
             config.nvlsCTAs == INT_MIN && config.nChannelsPerNetPeer == INT_MIN &&
             config.nvlinkCentricSched == INT_MIN,
         "config int fields start undefined");
  expect(config.netName == NULL && config.commName == NULL, "config pointer fields start NULL");
  expect(simInfo.size == sizeof(ncclSimInfo_t), "simInfo.size");
  expect(simInfo.magic == 0x74685283u, "simInfo.magic");
  expect(simInfo.version == NCCL_VERSION_CODE, "simInfo.version");
  expect(simInfo.estimatedTime == NCCL_UNDEF_FLOAT, "simInfo.estimatedTime");
  expect(stream == NULL && comm == NULL && id.internal[0] == 0, "handles");
  expect(ncclMaxRedOp == INT_MAX, "ncclMaxRedOp");
  expect(NCCL_SPLIT_NOCOLOR == -1 && NCCL_REVOKE_DEFAULT == 0, "constants");
  if (failures == 0) printf("public headers OK\n");
  return failures == 0 ? 0 : 1;
}
