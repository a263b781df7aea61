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
 * Collectives on different host streams of one communicator run side by side, each on one of the communicator's
 * lanes (internal duplicates of it with their own connections and progress thread, made the first time they are
 * needed; CFX_HOST_LANES, docs/ENV.md). That asks one thing beyond the rules of nccl.h: a collective that one rank
 * issues on a host stream, every rank issues on a host stream (else ops fail as mismatched calls, or wait until
 * the communicator's timeout; CFX_HOST_LANES=1 lifts the rule). Sends and receives keep one queue per communicator.
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
 * Rank and size come from the first launcher found, in this order (docs/ENV.md lists every variable):
 *   torchrun, cfxrun              RANK, WORLD_SIZE
 *   Open MPI                      OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
 *   Slurm                         SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS)
 *   PMI (MPICH, Intel MPI)        PMI_RANK, PMI_SIZE
 * The root (rank 0) listens at, in this order: NCCL_COMM_ID (host:port or [v6]:port); MASTER_ADDR (a host alone)
 * and MASTER_PORT; CFX_MASTER_ADDR (host, host:port, [v6]:port or a bare IPv6 address) with CFX_MASTER_PORT where
 * it has no port. Every process must see the same values. Numbers are whole decimal numbers: RANK=1x, RANK=-1 and
 * RANK=" 1" are refused. cfxGetLaunchInfo reads the same variables without creating anything.
 *
 * The job's secret is CFX_SECRET, else the contents of CFX_SECRET_FILE (a file of this user, mode 0600 or 0400),
 * the same on every process; cfxrun sets a random one per job. A launcher's job id is never taken for a secret:
 * it can be guessed. Without a secret the job is not authenticated: one WARN per process says so, and a
 * communicator that spans hosts is refused unless CFX_ALLOW_INSECURE=1.
 *
 * Thread safety: as ncclCommInitRank; call it once per process and communicator.
 * Returns:
 *   ncclSuccess          *comm holds the new communicator.
 *   ncclInvalidArgument  comm is NULL.
 *   ncclInvalidUsage     no supported launcher variables were found, a value is malformed (for example
 *                        RANK=1x, RANK >= WORLD_SIZE or MASTER_PORT=http), or no root address is set. The WARN
 *                        names the variable.
 *                        Also: CFX_SECRET_FILE is not a private file of this user, or the communicator spans
 *                        hosts without a secret (above).
 *   ncclSystemError      the root address cannot be resolved or bound, or a local resource ran out.
 *   ncclRemoteError      a peer did not join within the bootstrap timeout, died, or failed authentication.
 *   ncclInternalError    a bug in the library. */
ncclResult_t cfxCommInitFromEnv(ncclComm_t* comm);

/* Where this process sits in its launcher's job, as cfxCommInitFromEnv reads it. Filled by cfxGetLaunchInfo. */
#define CFX_ROOT_ADDRESS_BYTES 272
typedef struct {
  int rank;          /* this process's rank; 0 when no launcher variables are set */
  int nRanks;        /* processes in the job; 1 when no launcher variables are set */
  int localRank;     /* this process's index on its host (LOCAL_RANK, ...); -1 when the launcher does not say */
  int localRanks;    /* processes on this host; -1 when the launcher does not say */
  char launcher[32]; /* "torchrun" (also cfxrun), "Open MPI", "Slurm" or "PMI"; "" when none was found */
  char rootAddress[CFX_ROOT_ADDRESS_BYTES]; /* "host:port" or "[v6]:port" of the bootstrap root; "" when unset */
} cfxLaunchInfo;

/* Reads the launcher's variables (see cfxCommInitFromEnv) without creating anything: a GPU program picks its
 * device from localRank before it creates its communicator, and a tool checks the launch before it starts work.
 * No launcher variables at all is a single-process run: ncclSuccess, rank 0 of 1, launcher "".
 *
 * Thread safety: any thread, any time; it only reads the environment.
 * Returns:
 *   ncclSuccess          *info has been written.
 *   ncclInvalidArgument  info is NULL.
 *   ncclInvalidUsage     a variable is malformed, as for cfxCommInitFromEnv; the WARN (and ncclGetLastError)
 *                        names it. */
ncclResult_t cfxGetLaunchInfo(cfxLaunchInfo* info);

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
 *                        non-zero count, count x the type's size is larger than any buffer can be (2^48 bytes), or
 *                        a datatype is invalid.
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
  cfxCollScatter = 7,
  cfxCollBroadcastDelta = 8,
  cfxCollScan = 9,
  cfxCollAllToAllv = 10,   /* always Direct; count and datatype are ignored */
  cfxCollMoeDispatch = 11, /* always Direct; count and datatype are ignored */
  cfxCollMoeCombine = 12   /* always Direct; count and datatype are ignored */
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
 *   ncclInvalidArgument  comm is not a live communicator, plan is NULL, coll is not a cfxCollective, datatype
 *                        is not a valid ncclDataType_t, or count x nRanks x its size is larger than any buffer
 *                        can be (2^48 bytes).
 *   ncclInvalidUsage     comm has not finished initializing. */
ncclResult_t cfxCommGetPlan(ncclComm_t comm, int coll, size_t count, ncclDataType_t datatype, cfxPlanInfo* plan);

/* The plan comm would make on this rank for one collective on these buffers (sendbuff, recvbuff, count and root as
 * the matching nccl* call takes them; the reduction as ncclSum). Where the buffers are device memory and the ranks
 * map each other's (CFX_CUDA_IPC), a device program: algorithm "IpcZeroCopy" (buffers in symmetric windows) or
 * "IpcScratch" (through every rank's CUDA IPC scratch), estimateUs -1. Otherwise what cfxCommGetPlan says, and for
 * device buffers the text says why the op stages through host memory (e.g. below CFX_CUDA_IPC_MIN_BYTES).
 * Thread safety: any thread, while comm is live. Returns: as cfxCommGetPlan. */
ncclResult_t cfxCommGetPlanForBuffers(ncclComm_t comm, int coll, const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, cfxPlanInfo* plan);

/* ---------------------------------------------------------------------------------------------------------
 * Compressed collectives
 *
 * A codec makes a collective carry fewer bytes on the wire than its buffers hold: casts (bf16, fp16), block
 * quantisation with one scale per block (int8, int4, fp8 with an fp32 absmax scale; OCP MXINT8 and MXFP8 with a
 * power-of-two scale per 32 values), and top-k sparse (the largest entries of each block as index/value pairs).
 * Buffers hold fp32, bf16 or fp16 values; the reducing calls take ncclSum or ncclAvg.
 *
 * Quantise-once, and the same bits everywhere. Each rank encodes its contribution once; the owner of each chunk
 * decodes the contributions and sums them in fp32 in a fixed order (divides by nRanks for ncclAvg), encodes the sum
 * once, and every rank decodes those bytes. Every element meets two roundings however many ranks there are, every
 * rank receives bit-identical results, and a rerun gives the same bits. Top-k all-reduce sends every rank's sparse
 * contribution to every rank, which sums them in rank order: the result is the exact dense sum of what the ranks
 * sent, however dense the union of their supports grows (nothing is dropped after the encoding). All-gather and
 * broadcast encode each block once, at its owner, and every rank (the owner too) decodes the same bytes.
 *
 * Where: with cfxCompressAuto the planner compresses only where its model prices it cheaper (a slow link between
 * hosts), and hierarchical communicators stay plain within a host and compress across hosts; cfxCompressAlways
 * compresses on every link; cfxCompressNever runs the op plain. The cfxCommGetPlan text and the INFO/TUNING line
 * say what was chosen. NCCL_ALGO may name QuantOnce, SparseGather, Hier, or Ring (a ring that re-encodes the
 * partial sum at every hop, whose error grows with the ranks; only on request).
 *
 * Error bounds of one encoding, per element (the documentation of each format in docs/ENV.md has them all):
 * int8 |err| <= s/2 with s the block's absmax / 127; int4 s/2 with absmax / 7; fp8 2^-4 |x| + 2^-10 s; mxint8
 * X/128 (X = 2^floor(log2 absmax)); mxfp8 2^-4 |x| + 2^-10 X/256; bf16 2^-8 |x|; fp16 2^-11 |x|. An all-reduce
 * element's error is at most the sum of its contributions' bounds plus its result's.
 *
 * Non-finite inputs: block formats turn NaN and +-inf into NaN at their own position (never a finite value), so a
 * sum that holds one is NaN; casts keep IEEE values; a top-k block that holds NaN keeps it (it ranks first), and
 * with 2-bit values the whole block decodes as NaN.
 *
 * Error feedback (cfxFeedbackCaller or cfxFeedbackLibrary): what an encoding drops is kept in an fp32 residual and
 * added to the next call's values before encoding, so the running sum of what was sent tracks the running sum of
 * the inputs (SparseLoCo, DGC). The caller's residual has one float per element of sendbuff, in host memory, zeroed
 * before the first call; the library's is kept per (communicator, sendbuff, count) until cfxCommFreeFeedback or
 * the communicator's destruction.
 *
 * Ordering, streams, groups and device buffers: exactly as the matching nccl* call (device buffers are staged
 * through host memory, where the codec runs). All ranks must pass the same codec; ranks that do not fail with
 * ncclInvalidUsage naming the mismatch.
 * ------------------------------------------------------------------------------------------------------- */

typedef enum {
  cfxCodecNone = 0,   /* no codec: the op runs plain */
  cfxCodecBf16 = 1,
  cfxCodecFp16 = 2,
  cfxCodecInt8 = 3,   /* absmax scale per block, default block 256 */
  cfxCodecMxInt8 = 4, /* OCP MXINT8, block 32 */
  cfxCodecMxFp8 = 5,  /* OCP MXFP8 (E4M3), block 32 */
  cfxCodecInt4 = 6,   /* absmax scale per block, default block 256 (even) */
  cfxCodecTopK = 7,   /* top-k per block, default block 4096 */
  cfxCodecFp8 = 8     /* E4M3 with an fp32 absmax scale per block, default block 256 */
} cfxCodecFormat;

typedef enum { cfxRoundNearest = 0, cfxRoundStochastic = 1 } cfxRounding;
typedef enum { cfxTopKFp32 = 0, cfxTopKBf16 = 1, cfxTopKInt8 = 2, cfxTopK2Bit = 3 } cfxTopKValues;
typedef enum { cfxCompressAuto = 0, cfxCompressAlways = 1, cfxCompressNever = 2 } cfxCompressMode;
typedef enum { cfxFeedbackNone = 0, cfxFeedbackLibrary = 1, cfxFeedbackCaller = 2 } cfxFeedback;

typedef struct {
  int format;                /* cfxCodecFormat */
  int block;                 /* elements per scale (top-k: per selection); 0: the format's default */
  int rounding;              /* cfxRounding; stochastic for bf16, int8, int4 and mxint8 */
  float topkFraction;        /* cfxCodecTopK: kept fraction of each block, in (0, 1] */
  int topkValues;            /* cfxCodecTopK: cfxTopKValues */
  int mode;                  /* cfxCompressMode */
  int feedback;              /* cfxFeedback */
  float* residual;           /* cfxFeedbackCaller: the caller's residual (see above); NULL otherwise */
  unsigned long long seed;   /* stochastic rounding: mixed with the op's sequence number */
  int measureError;          /* 1: also measure the op's relative L2 error (an extra plain op; see stats) */
} cfxCodec;

/* A codec of the given format with every other field at its default. */
#define CFX_CODEC_INIT(fmt) {(fmt), 0, cfxRoundNearest, 0.0f, cfxTopKInt8, cfxCompressAuto, cfxFeedbackNone, NULL, 0ULL, 0}

/* Fills *codec from a name as CFX_CODEC and the perf tools' --codec take it: none, bf16, fp16, int8, mxint8, mxfp8,
 * int4, fp8, or topk:FRACTION, each optionally followed by :block=N, :values=fp32|bf16|int8|2bit (top-k), :sr
 * (stochastic rounding), :seed=N. Other fields keep their defaults.
 * Returns: ncclSuccess; ncclInvalidArgument (text or codec NULL, or text not such a name; the WARN says why). */
ncclResult_t cfxCodecParse(const char* text, cfxCodec* codec);

/* ncclAllReduce carrying `codec` (NULL or cfxCodecNone: plain). op is ncclSum or ncclAvg.
 * Returns:
 *   ncclSuccess          done (or enqueued, or recorded in a group), as ncclAllReduce.
 *   ncclInvalidArgument  what ncclAllReduce rejects; an unknown format, rounding, value format or mode; a block out
 *                        of range or too large for a FIFO slot; stochastic rounding where the format has none; a
 *                        datatype other than fp32, bf16 or fp16; an op other than sum or avg; cfxFeedbackCaller
 *                        without a host residual.
 *   ncclInvalidUsage     ranks disagree on the collective, count or codec (every rank that receives a slice of the
 *                        other kind fails); the communicator's state, as ncclAllReduce.
 *   ncclRemoteError, ncclSystemError: as ncclAllReduce. */
ncclResult_t cfxAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, const cfxCodec* codec, ncclComm_t comm, cudaStream_t stream);
/* ncclReduceScatter carrying `codec`; recvcount as ncclReduceScatter's. Returns as cfxAllReduceCompressed. */
ncclResult_t cfxReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, const cfxCodec* codec,
                                        ncclComm_t comm, cudaStream_t stream);
/* ncclAllGather carrying `codec`; sendcount as ncclAllGather's. Returns as cfxAllReduceCompressed (no op). */
ncclResult_t cfxAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                    const cfxCodec* codec, ncclComm_t comm, cudaStream_t stream);
/* ncclBroadcast carrying `codec`. Returns as cfxAllReduceCompressed (no op; root as ncclBroadcast's). */
ncclResult_t cfxBroadcastCompressed(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, const cfxCodec* codec, ncclComm_t comm, cudaStream_t stream);

/* The communicator's default codec for ncclAllReduce, ncclReduceScatter, ncclAllGather and ncclBroadcast (NULL or
 * cfxCodecNone clears it). It applies to the calls whose datatype and op it can carry (fp32, bf16, fp16; sum or
 * avg); the others run plain. CFX_CODEC and CFX_CODEC_MODE set it at creation. Call it on every rank alike, between
 * ops (not inside a group). cfxFeedbackCaller is refused here (a residual belongs to one buffer).
 * Returns: ncclSuccess; ncclInvalidArgument (bad comm or codec, as for cfxAllReduceCompressed). */
ncclResult_t cfxCommSetCodec(ncclComm_t comm, const cfxCodec* codec);

/* Drops the library-kept residual of sendbuff (all counts), e.g. after the buffer was freed or reset.
 * Returns: ncclSuccess (also when there was none); ncclInvalidArgument (bad comm). */
ncclResult_t cfxCommFreeFeedback(ncclComm_t comm, const void* sendbuff);

typedef struct {
  int compressed;                 /* 1 if the last op carried a codec, 0 if its plan stayed plain */
  char codec[48];                 /* the codec's name as cfxCodecParse reads it; "" when plain */
  char algorithm[16];             /* as cfxCommGetPlan names it */
  unsigned long long bufferBytes; /* the op's largest buffer on this rank */
  unsigned long long wireBytes;   /* bytes this rank sent for the op (framed codec pieces, or plain bytes) */
  double relL2Error;              /* ||result - exact|| / ||exact|| on this rank's output, with measureError; else -1 */
} cfxCompressStats;

/* What the last op issued with a codec (by a cfx*Compressed call or the default codec) on this communicator did on
 * this rank. Call it after the op completed (for a host stream, after synchronizing it). With compressed ops of
 * several host streams in flight at once (CFX_HOST_LANES), "last" is the last to complete.
 * Returns: ncclSuccess; ncclInvalidArgument (bad comm, stats NULL); ncclInvalidUsage (no such op yet). */
ncclResult_t cfxCommGetCompressStats(ncclComm_t comm, cfxCompressStats* stats);

/* ---------------------------------------------------------------------------------------------------------
 * Delta broadcast (lossless)
 *
 * For buffers that change little between broadcasts (weight synchronisation): every rank keeps the state of the last
 * cfxBroadcastDelta of recvbuff (a copy, kept by the library per communicator and receive buffer), and the root
 * sends only the elements that differ from it, as whichever is smallest of an index list, a bitmap or the whole
 * buffer; at 1 % of fp32 elements changed that is 1/50 of a plain broadcast. Elements are compared as bytes, so
 * every datatype works and every rank rebuilds the root's buffer bit for bit, checked by a 128-bit hash of the new
 * state that the root sends along. The first call, a call after cfxCommResetDelta, a new count or datatype, or any
 * rank whose state differs from the root's (all ranks compare hashes first) sends the whole buffer. A rank whose
 * rebuilt state fails the hash check returns ncclRemoteError and forgets its state, so the next call resends all.
 * cfxCommGetCompressStats reports the encoding ("delta:indices", "delta:bitmap", "delta:full") and the bytes sent.
 * ------------------------------------------------------------------------------------------------------- */

/* ncclBroadcast that sends only what changed since the last cfxBroadcastDelta of recvbuff on comm. Arguments, streams
 * and groups as ncclBroadcast; recvbuff must keep its address from call to call (it names the kept state).
 * Returns: as ncclBroadcast; ncclRemoteError also when this rank's rebuilt state does not match the root's hash. */
ncclResult_t cfxBroadcastDelta(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream);

/* Forgets the kept state of recvbuff: its next cfxBroadcastDelta sends the whole buffer. Call it on every rank.
 * Returns: ncclSuccess (also when there was none); ncclInvalidArgument (bad comm). */
ncclResult_t cfxCommResetDelta(ncclComm_t comm, const void* recvbuff);

/* ---------------------------------------------------------------------------------------------------------
 * All-to-all-v
 * ------------------------------------------------------------------------------------------------------- */

/* ncclAllToAllv under our prefix, for callers that include only this header: the same function, arguments,
 * semantics and return codes (conflux_nccl_ext.h documents them). */
ncclResult_t cfxAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                          const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);

/* ---------------------------------------------------------------------------------------------------------
 * MoE dispatch and combine
 *
 * Expert parallelism: every rank holds some of numExperts experts and T tokens (rows of `hidden` values), each routed
 * to topk experts with a weight. A dispatch sends every token to the ranks of its experts and leaves on each rank the
 * rows its own experts received, in expert-major order: the rows of its first local expert, then its second, ...; an
 * expert's rows ordered by (source rank, source token, k). A combine sends the experts' outputs, given in that same
 * order, back to their tokens and returns, for every token,  out[t] = sum over k of weight[t][k] * output(t, k),
 * accumulated in fp32 and rounded once to outType (all weights 1 with cfxMoeUnweighted).
 *
 * Fused: the sender reads token rows straight from the caller's tensor into the transport's slots and the receiver
 * writes each row straight to its expert-major position, with no packed copy on either side; a token with several
 * experts on one rank crosses the wire to it once (the receiver copies it to its other positions). The combine folds
 * each arriving row into its token's fp32 sum and rounds the last contribution straight into the output row.
 *
 * Deterministic: a token's contributions are added in a fixed order, whatever order the messages arrive in: those of
 * this rank's own experts first, then those of rank r - 1, r - 2, ... (mod nRanks), each rank's in k order. The same
 * routing and inputs give the same bits from run to run.
 *
 * Local experts: with expertToRank NULL, experts are dealt in contiguous blocks: rank r holds experts
 * [r * E / n + min(r, E % n) ...) in order, the first E % n ranks one more than the others (E = numExperts,
 * n = nRanks); with a table, rank r holds the experts e with expertToRank[e] == r. A rank's local experts are
 * numbered in increasing expert id; a rank may hold none.
 *
 * Two modes:
 *   cfxMoeNormal   cfxMoeExchangeCounts routes the ids and swaps the counts and routing with every rank (it blocks
 *                  until done, synchronizing the stream for device ids), so the caller knows how many rows it will
 *                  receive before it allocates; then cfxMoeDispatch moves only the rows.
 *   cfxMoeBounded  cfxMoeDispatch does everything in one operation into a buffer of maxRecvTokens rows, with no host
 *                  synchronization, so a dispatch on device buffers can be captured in a CUDA graph and replayed with
 *                  new ids. Rows whose expert-major position falls at maxRecvTokens or past it are not delivered: they
 *                  are counted (recvCounts, cfxMoeGetCounts), a WARN names the count, and the combine adds zero for
 *                  them. Nothing is dropped silently.
 *
 * Streams, groups and memory: every buffer may be host or device memory (device buffers are staged through host
 * memory, where the rows are gathered and scattered), with streams as ncclAllToAll. The ops of one handle must be
 * called in order on every rank (exchange, dispatch, combine), and a handle's ops must not overlap in time with
 * another op of that handle on another stream. The handle's communicator must outlive it.
 * Bad input is refused with ncclInvalidArgument and a WARN naming it: a bad configuration at creation; ids out of
 * range (found when the ids are read, which for device ids is when the op runs: every rank then fails it with the
 * offending rank's token and id named); ranks that disagree on the configuration (hidden, types, numExperts, topk,
 * mode, bound or expert map: every rank fails the dispatch naming the field and the rank, before any token moves).
 * Those found while the op runs fail it, and like any failed operation leave the communicator broken
 * (ncclCommGetAsyncError reports the error): abort or destroy it. Refusals at the call leave it usable.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct cfxMoe* cfxMoe_t;

typedef enum { cfxMoeNormal = 0, cfxMoeBounded = 1 } cfxMoeMode;

typedef struct {
  int numExperts;           /* experts over all ranks, >= 1 */
  int topk;                 /* experts per token, 1 <= topk <= numExperts */
  size_t hidden;            /* values per token row, >= 1 (a multiple of 128 with fp8 tokens) */
  ncclDataType_t tokenType; /* dispatched rows: ncclBfloat16, ncclFloat16, ncclFloat32, or ncclFloat8e4m3 with one
                               fp32 scale per 128 values (tokens and scales travel together) */
  ncclDataType_t outType;   /* the combine's expert outputs and result: ncclBfloat16, ncclFloat16 or ncclFloat32 */
  ncclDataType_t idType;    /* top-k ids: ncclInt32 or ncclInt64 */
  const int* expertToRank;  /* NULL: contiguous blocks; else numExperts ranks (host memory, copied at creation) */
  int mode;                 /* cfxMoeMode */
  size_t maxRecvTokens;     /* cfxMoeBounded: rows this rank's receive buffer holds (>= 1); ignored otherwise */
} cfxMoeConfig;

/* Flags of cfxMoeCombine. */
#define CFX_MOE_UNWEIGHTED 1 /* every weight is 1: out[t] is the plain sum of its experts' outputs */

/* Creates a dispatch/combine handle on comm. Local (no communication); every rank must create its handle with the
 * same configuration, which the first dispatch checks.
 * Thread safety: as any call on comm.
 * Returns:
 *   ncclSuccess          *moe holds the handle.
 *   ncclInvalidArgument  comm not live; config or moe NULL; numExperts < 1; topk < 1 or topk > numExperts; hidden 0,
 *                        or not a multiple of 128 with fp8 tokens; an unsupported tokenType, outType or idType; an
 *                        unknown mode; maxRecvTokens 0 in bounded mode; an expertToRank entry outside 0..nRanks-1.
 *   ncclSystemError      out of memory. */
ncclResult_t cfxMoeCreate(ncclComm_t comm, const cfxMoeConfig* config, cfxMoe_t* moe);

/* Frees the handle. Its ops must have completed. NULL is accepted and ignored.
 * Returns: ncclSuccess; ncclInvalidArgument (not a live handle, e.g. destroyed twice). */
ncclResult_t cfxMoeDestroy(cfxMoe_t moe);

/* Normal mode, step 1 (collective over the handle's communicator): routes numTokens tokens by topkIds (numTokens x
 * topk ids of idType; host or device memory) and swaps the counts and routing with every rank. Blocks until done:
 * it synchronizes stream when that is a CUDA stream or a cfx host stream, and cannot be called inside a group.
 * numTokens may differ between ranks and may be 0 (at most 2^31 - 1). *numRecvTokens (may be NULL) gets the rows
 * this rank's experts will receive: the recvTokens rows the next cfxMoeDispatch needs. cfxMoeGetCounts then has
 * every count.
 * Returns:
 *   ncclSuccess          done.
 *   ncclInvalidArgument  moe not a live handle; topkIds NULL with numTokens > 0; numTokens above 2^31 - 1; an id out
 *                        of range on any rank, or ranks that disagree on the configuration (every rank fails alike;
 *                        the WARN names the rank).
 *   ncclInvalidUsage     the handle is in bounded mode; called inside a group; the communicator's state.
 *   ncclRemoteError, ncclSystemError, ncclUnhandledCudaError: as ncclAllToAll. */
ncclResult_t cfxMoeExchangeCounts(cfxMoe_t moe, const void* topkIds, size_t numTokens, size_t* numRecvTokens,
                                  cudaStream_t stream);

/* Dispatch (collective). tokens: numTokens x hidden of tokenType; scales: numTokens x hidden/128 floats with fp8
 * tokens, else NULL; topkIds: numTokens x topk of idType (bounded mode; in normal mode the routing of the last
 * cfxMoeExchangeCounts is used and topkIds may be NULL); topkWeights: numTokens x topk floats, kept for the combine
 * (NULL: the combine must be unweighted). recvTokens: the expert-major rows, numRecvTokens of them (normal mode) or
 * maxRecvTokens (bounded mode), hidden values of tokenType each; recvScales likewise (fp8 only). recvCounts (may be
 * NULL): numLocalExperts + 1 ints: the rows each local expert received, then the rows dropped past the bound (0 in
 * normal mode); written in stream order, so a captured graph reports them at every replay. tokens must not overlap
 * recvTokens. numTokens must be the exchanged count in normal mode.
 * Returns:
 *   ncclSuccess          done (or enqueued on stream, or recorded in a group), as ncclAllToAll.
 *   ncclInvalidArgument  moe not live; a NULL buffer that the call needs; scales or recvScales NULL with fp8 tokens;
 *                        tokens overlapping recvTokens; numTokens above 2^31 - 1; ids out of range or a
 *                        configuration mismatch (bounded mode, as cfxMoeExchangeCounts).
 *   ncclInvalidUsage     normal mode without a cfxMoeExchangeCounts first, or with another numTokens; ranks that
 *                        disagree on the call (another op, another size); the communicator's state.
 *   ncclRemoteError, ncclSystemError, ncclUnhandledCudaError: as ncclAllToAll. */
ncclResult_t cfxMoeDispatch(cfxMoe_t moe, const void* tokens, const float* scales, const void* topkIds,
                            const float* topkWeights, size_t numTokens, void* recvTokens, float* recvScales,
                            int* recvCounts, cudaStream_t stream);

/* Combine (collective), after a dispatch on the handle. expertOut: the experts' outputs in the dispatch's expert-major
 * order (the same rows as its recvTokens: numRecvTokens, or maxRecvTokens in bounded mode of which the counted ones
 * are read), hidden values of outType each. out: the dispatch's numTokens rows of hidden values of outType, for each
 * token the weighted sum (or with CFX_MOE_UNWEIGHTED the plain sum) of its topk experts' outputs, in fp32, rounded
 * once. out must not overlap expertOut.
 * Returns:
 *   ncclSuccess          done (or enqueued, or recorded in a group), as ncclAllToAll.
 *   ncclInvalidArgument  moe not live; expertOut or out NULL where rows are due; out overlapping expertOut; an unknown
 *                        flag; a weighted combine after a dispatch without weights.
 *   ncclInvalidUsage     no dispatch on the handle before; ranks that disagree on the call; the communicator's state.
 *   ncclRemoteError, ncclSystemError, ncclUnhandledCudaError: as ncclAllToAll. */
ncclResult_t cfxMoeCombine(cfxMoe_t moe, const void* expertOut, void* out, int flags, cudaStream_t stream);

/* What the last completed exchange or dispatch routed on this rank, for rebalancing. Arrays the caller passes (any may
 * be NULL) are filled: perLocalExpert numLocalExperts entries (a first call with NULL arrays says how many),
 * sentPerExpert numExperts, sentPerRank and recvPerRank nRanks. Call it once the op completed (after the stream or host
 * stream was synchronized). */
typedef struct {
  int numLocalExperts;       /* out: experts this rank holds */
  size_t recvTokens;         /* out: rows in this rank's expert-major buffer */
  size_t droppedTokens;      /* out: rows not delivered past maxRecvTokens (bounded mode; 0 otherwise) */
  long long* perLocalExpert; /* rows each local expert received (after drops) */
  long long* sentPerExpert;  /* this rank's (token, k) assignments to each expert */
  long long* sentPerRank;    /* token rows this rank sent to each rank (a token once per rank), itself included */
  long long* recvPerRank;    /* token rows this rank received from each rank, itself included */
} cfxMoeCounts;

/* Returns: ncclSuccess; ncclInvalidArgument (moe not live, counts NULL); ncclInvalidUsage (nothing routed yet). */
ncclResult_t cfxMoeGetCounts(cfxMoe_t moe, cfxMoeCounts* counts);

/* ---------------------------------------------------------------------------------------------------------
 * All-Scan: prefix collectives over ranks
 *
 * cfxScan gives rank r the combination of the inputs of ranks 0..r (inclusive, MPI_Scan); cfxExScan of ranks
 * 0..r-1 (exclusive, MPI_Exscan), where rank 0 receives the op's identity: 0 for ncclSum, 1 for ncclProd, the
 * lowest value of the type for ncclMax (-inf for floating types that have it, -448 for fp8 e4m3) and the highest for
 * ncclMin, decay 1 and state 0 for an affine op; a user op has no identity, and rank 0's recvbuff is left as it was.
 * Values combine in rank order, lower ranks on the left, so associative non-commutative ops are exact to their
 * definition. ncclAvg has no prefix meaning and a PreMulSum op none either: both are refused.
 *
 * Ops: ncclSum, ncclProd, ncclMax, ncclMin on every datatype; an affine op (cfxRedOpCreateAffine) on fp32, bf16 and
 * fp16; a user op (cfxRedOpCreateUser) on host buffers. Every rank must pass the same op (the same shape for affine
 * ops, the same unit for user ops) and the same inclusive or exclusive call: ranks that disagree fail with
 * ncclInvalidUsage naming the mismatch wherever a message of the other kind arrives.
 *
 * Schedules (NCCL_ALGO "scan:chain", "recdouble", "blelloch", "hier"; cfxCommGetPlan with cfxCollScan): a pipelined
 * chain (ZeCO's All-Scan: each link carries the state once, n - 1 hops), recursive doubling (log2 n rounds of the
 * whole state), Blelloch's up-sweep/down-sweep (2 log2 n rounds, 2 (n - 1) states in all), and a hierarchical scan
 * (chains within hosts, doubling across hosts, the carries combined in order; it needs each host's ranks to be
 * consecutive). The planner picks by its cost model.
 *
 * Streams, groups and device buffers: as ncclAllReduce (device buffers are staged through host memory).
 * ------------------------------------------------------------------------------------------------------- */

/* Inclusive scan of count elements on every rank. In place (sendbuff == recvbuff) works.
 * Returns:
 *   ncclSuccess          done (or enqueued, or recorded in a group), as ncclAllReduce.
 *   ncclInvalidArgument  what ncclAllReduce rejects; op ncclAvg or a PreMulSum; an affine op on another datatype
 *                        than it was created for, or count not a whole number of its groups; a user op with device
 *                        buffers, or count not a whole number of its units.
 *   ncclInvalidUsage     ranks disagree on the call, count, op or shape; the communicator's state.
 *   ncclRemoteError, ncclSystemError: as ncclAllReduce. */
ncclResult_t cfxScan(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream);
/* Exclusive scan; rank 0 receives the identity (above). Returns as cfxScan. */
ncclResult_t cfxExScan(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                       ncclComm_t comm, cudaStream_t stream);

/* An affine (decayed-state) op for scans, ZeCO's combine: the buffer is a sequence of groups, each a decay part g of
 * `rows` values (1 with scalarDecay) followed by a rows x cols state S, row-major; (ga, Sa) then (gb, Sb) combine to
 * (ga * gb, gb * Sa + Sb), row i of Sa scaled by gb[i] (or by the scalar). Computed in fp32 and rounded once to the
 * datatype (fp32, bf16, fp16). Destroy with ncclRedOpDestroy.
 * Returns: ncclSuccess; ncclInvalidArgument (op NULL, bad comm, rows or cols < 1, a group of more than 2^24
 * elements, or another datatype). */
ncclResult_t cfxRedOpCreateAffine(ncclRedOp_t* op, int rows, int cols, int scalarDecay, ncclDataType_t datatype,
                                  ncclComm_t comm);

/* A user op for scans on host buffers: fn(in, inout, count, datatype, ctx) must compute inout[i] = in[i] (+) inout[i]
 * for count elements, a whole number of units of unitElems elements that (+) combines as one (2x2 matrices: 4), `in`
 * holding the lower ranks' value. (+) must be associative; it need not be commutative (commutative is a hint the
 * library may ignore). fn runs on a library thread, may be called many times per op on parts of the buffer, must not
 * call the library and must not fail. A unit must fit in a FIFO slot (128 KiB by default). Destroy with
 * ncclRedOpDestroy.
 * Returns: ncclSuccess; ncclInvalidArgument (op or fn NULL, bad comm, unitElems < 1, or a unit larger than a slot). */
typedef void (*cfxUserOpFn)(const void* in, void* inout, size_t count, ncclDataType_t datatype, void* ctx);
ncclResult_t cfxRedOpCreateUser(ncclRedOp_t* op, cfxUserOpFn fn, void* ctx, size_t unitElems, int commutative,
                                ncclDataType_t datatype, ncclComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFLUX_H_ */
