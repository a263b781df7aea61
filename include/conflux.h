/* SPDX-License-Identifier: Apache-2.0
 *
 * Conflux extensions to the NCCL API: everything that NCCL does not have, under the cfx prefix.
 * Public C99 header (include/). Link with -lnccl or -lconflux (the same library).
 *
 * Conventions, as in nccl.h: every function returns ncclResult_t; ncclInProgress is a state, not an error; the
 * text of the last WARN is available from ncclGetLastError(). No function here throws, aborts the process or
 * waits without a bound: a wait on a peer ends with ncclRemoteError once the peer is declared dead.
 */
#ifndef CONFLUX_H_
#define CONFLUX_H_

#include "nccl.h"

/* Our release (not the NCCL API version, which is NCCL_VERSION_CODE). Must match the VERSION file; tests/abi
 * checks it. */
#define CFX_MAJOR 0
#define CFX_MINOR 1
#define CFX_PATCH 0
#define CFX_VERSION_CODE (CFX_MAJOR * 10000 + CFX_MINOR * 100 + CFX_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------------------- */

/* Stores the release of the loaded library as MAJOR*10000 + MINOR*100 + PATCH. Compare it with
 * CFX_VERSION_CODE to detect a header/library mismatch. Also a cheap way to tell Conflux from NVIDIA's library
 * at run time: look the symbol up with dlsym.
 *
 * Thread safety: any thread, any time, before or after communicators exist.
 * Returns:
 *   ncclSuccess          *release has been written.
 *   ncclInvalidArgument  release is NULL. */
ncclResult_t cfxGetVersion(int* release);

/* ---------------------------------------------------------------------------------------------------------
 * Host streams
 *
 * With host buffers and a NULL stream, a collective has completed when the call returns (for a group: when
 * ncclGroupEnd returns). A host stream makes host-buffer operations asynchronous instead: pass it where a
 * collective expects its cudaStream_t, cast as (cudaStream_t)hostStream. The call then returns once the op is
 * enqueued; ops on one host stream run in the order they were enqueued, and a per-communicator progress thread
 * executes them. The buffers must stay valid and unmodified until cfxHostStreamQuery reports ncclSuccess or
 * cfxHostStreamSynchronize returns.
 *
 * A host stream is not a CUDA stream: never pass one to a CUDA function, and never pass it with device buffers
 * (that returns ncclInvalidArgument). Ops that fail asynchronously report their error through the stream
 * (cfxHostStreamQuery/Synchronize) and through ncclCommGetAsyncError of their communicator.
 *
 * Thread safety: any number of threads may query or synchronize the same stream concurrently. Enqueueing is
 * governed by the communicator rule of nccl.h (one thread per communicator at a time); enqueues from different
 * threads onto one stream are ordered by the order in which the calls are made. Destroying a stream while
 * another thread still uses it is undefined behaviour.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct cfxHostStream* cfxHostStream_t;

/* Creates an empty host stream.
 * Returns:
 *   ncclSuccess          *stream holds the new stream.
 *   ncclInvalidArgument  stream is NULL.
 *   ncclSystemError      out of memory or another resource. */
ncclResult_t cfxHostStreamCreate(cfxHostStream_t* stream);

/* Reports, without blocking, whether all ops enqueued on stream so far have finished.
 * Returns:
 *   ncclSuccess          every op enqueued before this call has completed successfully (the stream is idle).
 *   ncclInProgress       some op is still pending.
 *   ncclInvalidArgument  stream is NULL or not a live host stream.
 *   any other code       the first error of an op on this stream (for example ncclRemoteError when a peer
 *                        died). The error is sticky: every later query and synchronize returns it. */
ncclResult_t cfxHostStreamQuery(cfxHostStream_t stream);

/* Blocks until every op enqueued on stream before this call has completed or failed. The wait spins briefly,
 * then sleeps; it is bounded by the communicators' failure timeouts.
 * Returns:
 *   ncclSuccess          all those ops completed successfully.
 *   ncclInvalidArgument  stream is NULL or not a live host stream.
 *   any other code       the first (sticky) error of an op on this stream, as for cfxHostStreamQuery. */
ncclResult_t cfxHostStreamSynchronize(cfxHostStream_t stream);

/* Waits for the ops still pending on stream (as cfxHostStreamSynchronize), then frees it. The handle is invalid
 * afterwards whatever the result. NULL is accepted and ignored.
 * Returns:
 *   ncclSuccess          the stream is freed and all its ops had succeeded (or stream was NULL).
 *   ncclInvalidArgument  stream is not a live host stream (for example destroyed twice); nothing is freed.
 *   any other code       the stream is freed; this is the first error of one of its ops. */
ncclResult_t cfxHostStreamDestroy(cfxHostStream_t stream);

/* ---------------------------------------------------------------------------------------------------------
 * Bootstrap from a launcher's environment
 * ------------------------------------------------------------------------------------------------------- */

/* Creates this process's rank of a communicator spanning every process of the job, taking rank, size and the
 * root's address from the environment instead of an ncclUniqueId. Collective: every process of the job calls
 * it, and it blocks until all have joined (like ncclCommInitRank, with the default configuration).
 *
 * Rank and size come from the first launcher found, in this order:
 *   torchrun / torch.distributed  RANK, WORLD_SIZE
 *   Open MPI                      OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
 *   Slurm                         SLURM_PROCID, SLURM_NTASKS
 * The root (rank 0) listens at, in this order: NCCL_COMM_ID (host:port); MASTER_ADDR and MASTER_PORT;
 * CFX_MASTER_ADDR (host or host:port). Every process must see the same values.
 *
 * Thread safety: as ncclCommInitRank; call it once per process and communicator.
 * Returns:
 *   ncclSuccess          *comm holds the new communicator.
 *   ncclInvalidArgument  comm is NULL.
 *   ncclInvalidUsage     no supported launcher variables were found, a value is malformed (for example
 *                        RANK=1x or RANK >= WORLD_SIZE), or no root address is set. The WARN names the variable.
 *   ncclSystemError      the root address cannot be resolved or bound, or a local resource ran out.
 *   ncclRemoteError      a peer did not join within the bootstrap timeout, died, or failed authentication.
 *   ncclInternalError    a bug in the library. */
ncclResult_t cfxCommInitFromEnv(ncclComm_t* comm);

/* ---------------------------------------------------------------------------------------------------------
 * Failed peers
 *
 * Every rank runs a health monitor beside the data path. A rank is declared failed when its process exits (seen
 * on the same host), when a connection to it breaks while a transfer needs it, or when it sends no heartbeat for
 * CFX_HEARTBEAT_MISSES periods of CFX_HEARTBEAT_MS (a stopped or frozen process, or a cut network). Whoever sees
 * it first tells every other rank, so every survivor names the same rank: its blocked or next operation returns
 * ncclRemoteError, ncclCommGetAsyncError reports ncclRemoteError, and the WARN names the failed rank(s), their
 * host and pid, the cause, and the operation and sequence number. cfxCommGetFailures returns the same facts as
 * data, for a job that wants to shrink the communicator without the failed ranks.
 * ------------------------------------------------------------------------------------------------------- */

typedef enum {
  cfxFailureExited = 1,         /* the process is gone */
  cfxFailureConnectionLost = 2, /* a connection to it broke or was closed while a transfer needed it */
  cfxFailureHung = 3            /* no heartbeat for CFX_HEARTBEAT_MISSES periods */
} cfxFailureReason;

#define CFX_FAILURE_TEXT_BYTES 256

typedef struct {
  int rank;               /* the failed rank, in this communicator */
  int reason;             /* a cfxFailureReason */
  int detectedBy;         /* the rank that saw the failure first-hand (this rank, or the one that told it) */
  int pid;                /* the failed rank's process id on its host */
  unsigned long long opSeq; /* the detector's operation sequence number at detection; 0 if it was idle */
  char host[64];          /* the failed rank's host name, NUL-terminated */
  char op[32];            /* the detector's operation at detection ("AllReduce", ...); "" if it was idle */
  char text[CFX_FAILURE_TEXT_BYTES]; /* what the detector saw, NUL-terminated (may be cut short) */
} cfxFailureInfo;

/* Copies up to maxFailures of the failures this rank knows of on comm into failures[], in the order it learned
 * them (the first is the one its operations reported), and stores their total number in *nFailures (it may be
 * larger than maxFailures; call again with a larger array). maxFailures may be 0 (failures may then be NULL) to
 * ask for the count only. The set only grows; it survives ncclCommRevoke, and a communicator made by
 * ncclCommShrink starts with an empty one.
 *
 * Thread safety: any thread, any time while comm is live, also while another thread is blocked in an operation on
 * comm (this is how a watchdog learns whom to exclude).
 * Returns:
 *   ncclSuccess          *nFailures (and the first min(*nFailures, maxFailures) entries) have been written.
 *   ncclInvalidArgument  comm is not a live communicator, nFailures is NULL, maxFailures < 0, or failures is NULL
 *                        while maxFailures > 0.
 *   ncclInvalidUsage     comm has not finished initializing (ncclCommGetAsyncError still says ncclInProgress). */
ncclResult_t cfxCommGetFailures(ncclComm_t comm, cfxFailureInfo* failures, int maxFailures, int* nFailures);

/* ---------------------------------------------------------------------------------------------------------
 * Shared state
 *
 * After peers join, leave or miss an update, cfxSharedStateSync makes every rank hold the same bytes again, as
 * PCCL's shared-state synchronisation does: each rank hashes its state (XXH3-128 over the entries' bytes in
 * order), the ranks compare digests, and the ranks whose digest differs from the one most ranks hold receive the
 * majority's bytes from the ranks that hold them (the sending is shared among those). Nothing moves when all agree.
 * A tie between digests goes to the one held by the lowest rank. Afterwards every rank's entries are bit-identical.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct {
  void* buffer;            /* host memory; overwritten on a rank that is out of date */
  size_t count;            /* elements */
  ncclDataType_t datatype;
} cfxStateEntry;

typedef struct {
  unsigned long long hash[2]; /* low and high 64 bits of the digest every rank now holds */
  int replaced;               /* 1 when this rank was out of date and its entries were overwritten */
  int sourceRank;             /* the rank it received from, or -1 */
  int nOutdated;              /* how many ranks were brought up to date */
  size_t bytesReceived;       /* by this rank */
} cfxStateSyncInfo;

/* Collective over every rank of comm, called outside ncclGroupStart/End with the same number of entries, counts
 * and datatypes on every rank (the layout is checked). info may be NULL.
 * Returns:
 *   ncclSuccess          every rank holds the same bytes; info says what happened here.
 *   ncclInvalidArgument  comm is not live, nEntries < 0, entries is NULL while nEntries > 0, a buffer is NULL with a
 *                        non-zero count, or a datatype is invalid.
 *   ncclInvalidUsage     called inside a group, a buffer is device memory (not supported yet: stage the state in
 *                        host memory), or the ranks' layouts differ (then on every rank, before anything is written).
 *   ncclRemoteError      a peer failed, or bytes that arrived do not hash to the majority's digest (then on every
 *                        rank, naming the receiver). */
ncclResult_t cfxSharedStateSync(ncclComm_t comm, const cfxStateEntry* entries, int nEntries, cfxStateSyncInfo* info);

/* The digest cfxSharedStateSync compares, computed locally (no communication): hash[0] low, hash[1] high. */
ncclResult_t cfxStateHash(const cfxStateEntry* entries, int nEntries, unsigned long long hash[2]);

/* ---------------------------------------------------------------------------------------------------------
 * Dynamic membership
 *
 * Peers join and leave a running group, as in PCCL. One process runs a master (cfxMasterStart) and hands its id
 * to the peers out of band, like an ncclUniqueId. A peer joins (cfxMemberJoin) and is admitted at the next epoch
 * boundary: every member calls cfxMemberUpdate between steps (every member of the epoch must call it), and the
 * master decides the boundary once every member of the epoch is ready, has gone (left, died, or lost its
 * connection), or, connected but silent (stopped, hung), has missed CFX_MEMBER_ROUND_TIMEOUT_MS. Members keep
 * their order; joiners follow in the order they asked. If the members are the same, the communicator stays and
 * nothing is rebuilt; otherwise the old communicator is aborted and a new one is formed for the new epoch. A
 * member whose collective failed (a peer died mid-operation) simply calls cfxMemberUpdate: the boundary excludes
 * the dead peer. After a change, cfxSharedStateSync on the new communicator brings joiners and stragglers the
 * majority's state. A master that restarts on the same id (cfxMasterStart with restartFrom) learns the epoch from
 * the members as they reconnect; the job goes on without rebuilding.
 *
 * All or nothing: every collective on an epoch's communicator returns success on every member, or an error on
 * every member (CFX_MEMBER_ALL_OR_NOTHING=0 turns this off). Before it returns, each member reports to the master
 * how the collective ended locally, and the master decides for all: success once every member of the epoch
 * succeeded, failure as soon as one failed, vanished before reporting, or stayed silent for
 * CFX_MEMBER_ROUND_TIMEOUT_MS. A member that succeeded locally but is told the collective failed returns
 * ncclRemoteError naming the member that failed, and an in-place collective gives its input back, so every
 * survivor can call cfxMemberUpdate and retry the same step from the same bytes. The cost is one round trip to the
 * master per collective (about 100 us over loopback). Collectives on these communicators take host buffers and
 * no cfx host stream (ncclInvalidUsage otherwise), since the agreement must follow the data; point-to-point calls
 * are not agreed on.
 * A member that refuses a collective (a bad argument) revokes the communicator, and the next boundary forms a
 * new one even when the members are the same.
 *
 * Every frame between master and members is authenticated with the id's secret and numbered, so strangers,
 * replays and frames from other sessions are refused.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct cfxMaster* cfxMaster_t;
typedef struct cfxMember* cfxMember_t;

typedef struct {
  unsigned long long epoch; /* grows at every boundary that changed the members */
  int rank;                 /* this member's rank in the epoch's communicator */
  int nRanks;
  int changed;              /* 1 when a new communicator was formed at this boundary */
  int joined;               /* members admitted at this boundary */
  int left;                 /* members gone since the previous epoch */
} cfxEpochInfo;

/* Starts a master in this process, listening on the bootstrap interface (NCCL_SOCKET_IFNAME), and writes its id.
 * restartFrom: NULL for a new master, or the id of a master that died, to take its place (same address and
 * secret). Returns ncclInvalidArgument for NULL masterId or master, ncclSystemError if it cannot listen. */
ncclResult_t cfxMasterStart(const ncclUniqueId* restartFrom, ncclUniqueId* masterId, cfxMaster_t* master);
/* Stops the master and frees it; members see it gone and reconnect to a restarted one at their next update. */
ncclResult_t cfxMasterStop(cfxMaster_t master);
/* The master's current epoch (it grows by one at every boundary that changed the members; 0 before the first)
 * and how many members it has. Any thread, any time. */
ncclResult_t cfxMasterGetEpoch(cfxMaster_t master, unsigned long long* epoch, int* members);

/* Connects to the master; the member is admitted at its first cfxMemberUpdate. config (may be NULL) applies to
 * every epoch's communicator and must be blocking. ncclRemoteError when the master cannot be reached or does not
 * prove it holds the id's secret. */
ncclResult_t cfxMemberJoin(const ncclUniqueId* masterId, ncclConfig_t* config, cfxMember_t* member);
/* The epoch boundary. Blocks until the master decides it, then writes the epoch's communicator to *comm. The
 * communicator belongs to the member: do not destroy it; it stays valid until the next cfxMemberUpdate or
 * cfxMemberLeave. info may be NULL. On an error the member has no communicator; call cfxMemberUpdate again. */
ncclResult_t cfxMemberUpdate(cfxMember_t member, ncclComm_t* comm, cfxEpochInfo* info);
/* Leaves the group: tells the master, aborts the member's communicator and frees the member. */
ncclResult_t cfxMemberLeave(cfxMember_t member);

/* ---------------------------------------------------------------------------------------------------------
 * Topology and plans
 *
 * The planner picks each collective's algorithm from an alpha-beta cost model of where the ranks run: which ranks
 * share a host (NCCL_HOSTID overrides the host identity), placed on NCCL_TOPO_FILE's topology when one is given,
 * else on one plain host per distinct host behind a switch with default link figures. These calls show what it
 * knows and what it would choose, without running anything. Every rank gets the same answers.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct {
  int nRanks;
  int nHosts;             /* distinct hosts the ranks run on */
  int host;               /* this rank's host, hosts numbered in order of their lowest rank */
  int localRank;          /* this rank's position among its host's ranks (rank order) */
  int localRanks;         /* ranks on this rank's host */
  int uniform;            /* 1 when every host runs the same number of ranks (hierarchical algorithms need it) */
  int priced;             /* 1 when the cost model has figures; 0 when plans are made without prices */
  /* The model's per-flow figures, each for a pattern with all its flows running at once: bandwidth in GB/s
   * (1e9 bytes per second) and latency in microseconds per hop. Zero when not priced or not applicable. */
  double ringGbps, ringLatencyUs;   /* the ring over all ranks */
  double biRingGbps;                /* both directions of that ring at once */
  double hostGbps, hostLatencyUs;   /* each host's ring of its own ranks */
  double crossGbps, crossLatencyUs; /* the rings of one local index across hosts */
} cfxTopologyInfo;

/* Fills *info for comm.
 * Thread safety: any thread, while comm is live.
 * Returns:
 *   ncclSuccess          *info is filled.
 *   ncclInvalidArgument  comm is not a live communicator or info is NULL.
 *   ncclInvalidUsage     comm has not finished initializing. */
ncclResult_t cfxCommGetTopology(ncclComm_t comm, cfxTopologyInfo* info);

/* The level below hosts, where NCCL_TOPO_FILE places ranks on devices (<rank ... gpu="g"/> or numa="k"): ranks of
 * one host on one GPU, or CPU ranks on one NUMA node, share a device. The 3-level algorithms (Hier3) need every
 * host to hold the same number (> 1) of devices, each with the same number (> 1) of ranks. */
typedef struct {
  int threeLevel;  /* 1 when the 3-level algorithms apply */
  int devices;     /* devices on this rank's host (1 when nothing places ranks below hosts) */
  int device;      /* this rank's device, by position among its host's devices (order of lowest rank) */
  int deviceRank;  /* this rank's position among its device's ranks (rank order) */
  int deviceRanks; /* ranks on this rank's device */
  /* The model's per-flow figures for the three levels' rings (as in cfxTopologyInfo); zero unless threeLevel. */
  double deviceGbps, deviceLatencyUs; /* every device's ring of its own ranks */
  double midGbps, midLatencyUs;       /* the rings of one index across a host's devices */
  double crossGbps, crossLatencyUs;   /* the rings of one (device, index) position across hosts */
} cfxTopologyLevels;

/* Fills *levels for comm. Thread safety and returns as cfxCommGetTopology. */
ncclResult_t cfxCommGetTopologyLevels(ncclComm_t comm, cfxTopologyLevels* levels);

/* The collectives, numbered as the planner numbers them. */
typedef enum {
  cfxCollAllReduce = 0,
  cfxCollBroadcast = 1,
  cfxCollReduce = 2,
  cfxCollAllGather = 3,
  cfxCollReduceScatter = 4,
  cfxCollAlltoAll = 5,
  cfxCollGather = 6,
  cfxCollScatter = 7
} cfxCollective;

#define CFX_PLAN_TEXT_BYTES 256

typedef struct {
  char algorithm[16];           /* as NCCL_ALGO spells it: "Ring", "BiRing", "Hier", "Exchange", ... */
  unsigned long long bytes;     /* the op's largest buffer, which the planner prices */
  unsigned long long sliceBytes;/* what every step moves per FIFO slot */
  double estimateUs;            /* the model's time for the chosen algorithm; -1 when it has no price */
  char text[CFX_PLAN_TEXT_BYTES]; /* the INFO/TUNING line the op would log, with every priced alternative */
} cfxPlanInfo;

/* The plan comm would make for one collective `coll` (a cfxCollective, taken as int so that any value a caller
 * passes can be checked) of `count` elements of `datatype` (count as the matching nccl*
 * call takes it: per rank for all-gather, reduce-scatter, all-to-all, gather and scatter), honouring NCCL_ALGO.
 * Thread safety: any thread, while comm is live.
 * Returns:
 *   ncclSuccess          *plan is filled.
 *   ncclInvalidArgument  comm is not a live communicator, plan is NULL, coll is not a cfxCollective, or datatype
 *                        is not a valid ncclDataType_t.
 *   ncclInvalidUsage     comm has not finished initializing. */
ncclResult_t cfxCommGetPlan(ncclComm_t comm, int coll, size_t count, ncclDataType_t datatype, cfxPlanInfo* plan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFLUX_H_ */
