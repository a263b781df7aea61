/* SPDX-License-Identifier: Apache-2.0
 *
 * Conflux: the NCCL 2.28.9 C API, source- and binary-compatible with NVIDIA's nccl.h of that release.
 * Public C99 header (include/). Names, values and struct layouts are the ABI contract and must never change;
 * tests/abi compares every one of them with NVIDIA's header.
 *
 * Differences from NVIDIA's header that a caller can see:
 *  - CUDA headers are optional. When <cuda_runtime.h> is found (and CFX_NO_CUDA_HEADERS is not defined) it is
 *    included, with the fp16/bf16/fp8 headers, exactly as NVIDIA's header does. Otherwise cudaStream_t is
 *    declared here with CUDA's own definition, so including <cuda_runtime.h> later still compiles (C11 and C++;
 *    strict C99 forbids repeating a typedef, so C99 code that mixes both should include CUDA first).
 *  - Buffers may be host memory. A NULL stream with host buffers means the call has completed on return; see
 *    conflux.h for asynchronous host streams, which are passed where a cudaStream_t is expected.
 *  - Functions that appeared after 2.28 are declared in conflux_nccl_ext.h, not here, so that feature tests on
 *    NCCL_VERSION_CODE keep working.
 *
 * Every function is exported twice: pnccl<Name> is the implementation and nccl<Name> a weak alias of it (the
 * MPI profiling pattern), so a tool can define its own nccl<Name> and still reach the library via pnccl<Name>.
 * Unless stated otherwise, a function returns ncclSuccess or one of the codes of ncclResult_t; the text of the
 * last WARN is available from ncclGetLastError().
 */
#ifndef NCCL_H_
#define NCCL_H_

#if !defined(CFX_NO_CUDA_HEADERS) && !defined(__DRIVER_TYPES_H__) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define CFX_NCCL_H_HAS_CUDA_ 1
#endif
#endif

#if defined(CFX_NCCL_H_HAS_CUDA_) || defined(__DRIVER_TYPES_H__)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
/* CUDA's own definition (driver_types.h), so the two declarations name the same type. */
typedef struct CUstream_st* cudaStream_t;
#endif
#undef CFX_NCCL_H_HAS_CUDA_

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
/* Releases up to 2.8 used X*1000+Y*100+Z; from 2.9 on the code is X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Types and constants
 * ------------------------------------------------------------------------------------------------------- */

/* A communicator: one rank's membership in a group of nRanks ranks. Opaque. */
typedef struct ncclComm* ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). Opaque. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The bootstrap handle from ncclGetUniqueId: 128 opaque bytes, copied between ranks by the application and
 * passed by value. It carries the root's address and a session secret; treat it as a credential. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a CUDA call failed */
  ncclSystemError = 2,        /* a system call or the network stack failed locally */
  ncclInternalError = 3,      /* a bug in the library */
  ncclInvalidArgument = 4,    /* a bad argument: NULL pointer, out-of-range root, unknown datatype or op */
  ncclInvalidUsage = 5,       /* a call not allowed in this state, or not supported by this library */
  ncclRemoteError = 6,        /* a peer died, hung past its timeout, or the connection broke */
  ncclInProgress = 7,         /* a nonblocking operation has not finished yet; not an error */
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* winFlags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* shrinkFlags of ncclCommShrink. DEFAULT assumes a healthy parent; ABORT first stops the parent's in-flight
 * operations (the path to take after a failure). */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* revokeFlags of ncclCommRevoke: only 0 is valid. */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator options. Always start from NCCL_CONFIG_INITIALIZER and then set fields; a field left at
 * NCCL_CONFIG_UNDEF_* takes the library default (or the matching NCCL_* environment variable). size, magic
 * and version let the library accept structs from older and newer headers. */
typedef struct ncclConfig_v22800 {
  size_t size;          /* set by the initializer; do not touch */
  unsigned int magic;   /* set by the initializer; do not touch */
  unsigned int version; /* set by the initializer; do not touch */
  int blocking;         /* 1: calls return when done; 0: they may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;  /* 1: children from ncclCommSplit may share this communicator's resources */
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;   /* NCCL_CTA_POLICY_* */
  int shrinkShare; /* 1: children from ncclCommShrink may share resources */
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                                  \
  sizeof(ncclConfig_t),                             /* size */                   \
  0xcafebeef,                                       /* magic */                  \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                \
  NCCL_CONFIG_UNDEF_INT,                            /* blocking */               \
  NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */         \
  NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */                \
  NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */                \
  NCCL_CONFIG_UNDEF_PTR,                            /* netName */                \
  NCCL_CONFIG_UNDEF_INT,                            /* splitShare */             \
  NCCL_CONFIG_UNDEF_INT,                            /* trafficClass */           \
  NCCL_CONFIG_UNDEF_PTR,                            /* commName */               \
  NCCL_CONFIG_UNDEF_INT,                            /* collnetEnable */          \
  NCCL_CONFIG_UNDEF_INT,                            /* CTAPolicy */              \
  NCCL_CONFIG_UNDEF_INT,                            /* shrinkShare */            \
  NCCL_CONFIG_UNDEF_INT,                            /* nvlsCTAs */               \
  NCCL_CONFIG_UNDEF_INT,                            /* nChannelsPerNetPeer */    \
  NCCL_CONFIG_UNDEF_INT,                            /* nvlinkCentricSched */     \
}

/* Output of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* predicted time of the group, in microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER {                                                \
  sizeof(ncclSimInfo_t),                            /* size */                   \
  0x74685283,                                       /* magic */                  \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                \
  NCCL_UNDEF_FLOAT                                  /* estimatedTime */          \
}

/* Reduction operators. Values from ncclNumOps up to ncclMaxRedOp are handles made by ncclRedOpCreatePreMulSum.
 * ncclRedOp_dummy_t only pins the enum's size: ncclMaxRedOp must fit in the same width. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum divided by nRanks: floating types pre-scale each input, integer types divide the sum */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives, and when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* device-visible memory, read while each collective using the op runs */
  ncclScalarHostImmediate = 1 /* host memory, read once before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ---------------------------------------------------------------------------------------------------------
 * Memory, version, unique id
 * ------------------------------------------------------------------------------------------------------- */

/* Allocates size bytes suitable for registration and symmetric windows (device memory on the current CUDA
 * device; host memory when the process has no GPU). The allocation may be rounded up. Free with ncclMemFree. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Stores the API version this library implements, encoded as NCCL_VERSION_CODE (22809). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Makes a new bootstrap id. Call it on one rank and give the bytes to every rank before ncclCommInitRank*. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ---------------------------------------------------------------------------------------------------------
 * Communicator lifecycle
 * ------------------------------------------------------------------------------------------------------- */

/* Joins rank `rank` of an nranks-rank communicator identified by commId. Blocks until all ranks have joined,
 * unless called inside ncclGroupStart/End (then ncclGroupEnd waits) or config->blocking == 0 (then it may
 * return ncclInProgress; poll ncclCommGetAsyncError). config may be NULL for defaults. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);

/* ncclCommInitRankConfig with a NULL config. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates ndev communicators of one process at once; comm must hold ndev entries. devlist gives the CUDA
 * device of each rank in rank order, or NULL for devices 0..ndev-1. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Like ncclCommInitRankConfig, with nId bootstrap ids spreading the bootstrap load. Every rank passes the same
 * ids in the same order; nId == 1 is ncclCommInitRankConfig. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* Completes every operation issued on comm and releases shared resources; the communicator is in
 * ncclInProgress until all ranks are quiescent. Afterwards ncclCommDestroy frees it without blocking. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees the local resources of comm. NULL is accepted and ignored. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops every operation still running on comm and frees it. Never hangs. NULL is accepted and ignored. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops in-flight operations and leaves comm usable only for ncclCommDestroy, ncclCommSplit and
 * ncclCommShrink (which then never share resources). revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Collective over all ranks of comm: ranks passing the same color form a new communicator, ordered by key
 * (ties keep the parent order). color NCCL_SPLIT_NOCOLOR takes part but gets *newcomm = NULL. A NULL config
 * inherits comm's configuration. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* Called by every rank not in excludeRanksList (any order, excludeRanksCount > 0): makes a communicator of the
 * remaining ranks, renumbered densely in their old order. shrinkFlags is NCCL_SHRINK_*. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* ---------------------------------------------------------------------------------------------------------
 * Errors and queries
 * ------------------------------------------------------------------------------------------------------- */

/* A static, never NULL description of result. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The text of the most recent WARN in this process ("" if none). comm is ignored and may be NULL. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads NCCL_DEBUG and the other logging variables. Deprecated by NCCL; kept for binary compatibility. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("ncclResetDebugInit is deprecated and will be removed"))) void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is deprecated and will be removed"))) void pncclResetDebugInit(void);
#else
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);
#endif

/* Stores comm's state: ncclSuccess, ncclInProgress while a nonblocking call is still running, or the error
 * that broke the communicator (for example ncclRemoteError when a peer died). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* The CUDA device comm was created on. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---------------------------------------------------------------------------------------------------------
 * Buffer registration
 * ------------------------------------------------------------------------------------------------------- */

/* Registers [buff, buff+size) with comm for faster transfers; *handle is released with ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective: registers a window over buff on every rank. winFlags is NCCL_WIN_*; NCCL_WIN_COLL_SYMMETRIC
 * requires the same size on all ranks and NCCL_WIN_REQUIRED_ALIGNMENT alignment. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---------------------------------------------------------------------------------------------------------
 * User reduction operators
 * ------------------------------------------------------------------------------------------------------- */

/* Creates an operator that multiplies each input by *scalar (of type datatype) and then sums. It is valid only
 * with comm and datatype. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroys op; allowed as soon as the last call that used it has returned. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---------------------------------------------------------------------------------------------------------
 * Collectives and point-to-point
 *
 * Every rank of comm makes the same calls in the same order. A call returns once the operation is enqueued on
 * stream (for host buffers and a NULL stream: once it has completed). A communicator must not be used by two
 * threads at the same time. Counts are elements of datatype.
 * ------------------------------------------------------------------------------------------------------- */

/* Reduces count elements from every rank into recvbuff of root (recvbuff may be NULL elsewhere).
 * In place when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/* In-place broadcast of buff from root. Deprecated: use ncclBroadcast. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/* Copies count elements of root's sendbuff into recvbuff of every rank. In place when sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/* Reduces count elements across ranks and leaves the result in recvbuff of every rank.
 * In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* Reduces nranks*recvcount elements across ranks; rank i receives block i in recvbuff.
 * In place when recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* Gathers sendcount elements from every rank; rank i's data lands at recvbuff + i*sendcount on all ranks.
 * In place when sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* Sends sendbuff + j*count to rank j and receives rank i's block at recvbuff + i*count. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

/* Root receives rank i's count elements at recvbuff + i*count (recvbuff unused elsewhere).
 * In place when sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* Rank i receives root's sendbuff + i*count (sendbuff unused elsewhere).
 * In place when recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* Sends count elements to peer, which posts an ncclRecv with the same count and datatype. Sends and receives
 * that must progress together have to be in one ncclGroupStart/End. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* Receives count elements from peer; matches peer's ncclSend calls to this rank in call order. */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------------------
 * Groups
 *
 * Between ncclGroupStart and the matching ncclGroupEnd, calls are only recorded; the outermost ncclGroupEnd
 * starts them all (as one fused operation where possible) and reports any error. Groups nest per thread.
 * A group may span several communicators; it may hold communicator creations or operations, not both.
 * ------------------------------------------------------------------------------------------------------- */

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Ends the group without running it and stores a cost estimate in simInfo (start from
 * NCCL_SIM_INFO_INITIALIZER). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
