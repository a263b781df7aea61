// SPDX-License-Identifier: Apache-2.0
// Communicator mirroring, type and op mapping and counters for libconflux_mpi.so (interpose layer).
#include "interpose/mpi_route.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <map>

#include "common/log.h"

namespace cfx::interpose {
namespace {

// The keyval that caches a Mirror* on each MPI communicator. Created on first use; MPI frees it at finalize.
int gKeyval = MPI_KEYVAL_INVALID;
std::once_flag gKeyvalOnce;

// Live mirrors, so MPI_Finalize can free those whose communicators the program never freed (MPI_COMM_WORLD,
// MPI_COMM_SELF and leaked ones). The mutex covers the map only; MPI allows concurrent collectives on
// different communicators under MPI_THREAD_MULTIPLE.
std::mutex gMirrorsMutex;
std::map<uint64_t, MPI_Comm> gMirrors;  // By Mirror::seq.
uint64_t gNextSeq = 0;

std::array<std::atomic<uint64_t>, kNumMpiColls> gRouted{};
std::array<std::atomic<uint64_t>, kNumMpiColls> gPassed{};

void destroyMirror(Mirror* m) {
  {
    std::lock_guard<std::mutex> lock(gMirrorsMutex);
    gMirrors.erase(m->seq);
  }
  // Completes the communicator's non-blocking calls first: MPI lets a program free a communicator with
  // requests still pending, and the waiter must be gone before the communicator it waits on.
  m->async.reset();
  if (m->comm != nullptr) {
    // Every op we issued has completed, so finalize has nothing to flush; it releases shared resources in
    // step with the peers, which are inside the same MPI_Comm_free or MPI_Finalize.
    (void)ncclCommFinalize(m->comm);
    (void)ncclCommDestroy(m->comm);
  }
  delete m;
}

// Called by MPI when the communicator is freed, or its attribute deleted at MPI_Finalize.
int deleteMirror(MPI_Comm, int, void* value, void*) {
  destroyMirror(static_cast<Mirror*>(value));
  return MPI_SUCCESS;
}

bool threadMultiple() {
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  return level == MPI_THREAD_MULTIPLE;
}

Mirror* newMirror(int rank, int nRanks) {
  auto* m = new Mirror;
  m->rank = rank;
  m->nRanks = nRanks;
  return m;
}

Mirror* buildMirror(MPI_Comm comm, int rank, int nRanks) {
  Mirror* m = newMirror(rank, nRanks);
  ncclUniqueId id{};
  int ok = 1;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) ok = 0;
  // PMPI, not MPI: our own MPI_Bcast would route back here.
  PMPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if (ok) {
    PMPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    ncclComm_t nc = nullptr;
    ok = ncclCommInitRank(&nc, nRanks, id, rank) == ncclSuccess ? 1 : 0;
    // One rank failing must send every rank back to MPI, or the next routed call hangs. The thread level is
    // agreed on the same way: a rank below MPI_THREAD_MULTIPLE passes non-blocking calls through, so all must.
    int mine[2] = {ok, threadMultiple() ? 1 : 0};
    int all[2] = {0, 0};
    PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, comm);
    if (all[0]) {
      m->comm = nc;
      m->asyncOk = all[1] != 0;
    } else if (nc != nullptr) {
      (void)ncclCommAbort(nc);
    }
    ok = all[0];
  }
  if (!ok) CFX_WARN("libconflux_mpi: could not mirror an MPI communicator of %d ranks; it stays with MPI", nRanks);
  return m;
}

}  // namespace

namespace {

// The Mirror cached on comm (also the ones that failed or were refused), or nullptr if none was made yet.
Mirror* cachedMirror(MPI_Comm comm) {
  std::call_once(gKeyvalOnce, [] { PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteMirror, &gKeyval, nullptr); });
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, gKeyval, &value, &found);
  return found ? static_cast<Mirror*>(value) : nullptr;
}

}  // namespace

Mirror* existingMirror(MPI_Comm comm) {
  Mirror* m = cachedMirror(comm);
  return m != nullptr && m->comm != nullptr ? m : nullptr;
}

Mirror* mirrorFor(MPI_Comm comm) {
  if (Mirror* m = cachedMirror(comm)) return m->comm != nullptr ? m : nullptr;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  int rank = 0;
  int nRanks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &nRanks);
  Mirror* m = nullptr;
  if (inter || nRanks < 2) {
    m = newMirror(rank, nRanks);  // Remembered, so the test is made once per communicator.
  } else {
    m = buildMirror(comm, rank, nRanks);
    CFX_INFO(log::Sys::Interpose, "libconflux_mpi: mirrored an MPI communicator of %d ranks (rank %d)", nRanks,
             rank);
  }
  {
    std::lock_guard<std::mutex> lock(gMirrorsMutex);
    m->seq = gNextSeq++;
    gMirrors.emplace(m->seq, comm);
  }
  PMPI_Comm_set_attr(comm, gKeyval, m);
  return m->comm != nullptr ? m : nullptr;
}

void freeAllMirrors() {
  if (gKeyval == MPI_KEYVAL_INVALID) return;
  std::map<uint64_t, MPI_Comm> left;
  {
    std::lock_guard<std::mutex> lock(gMirrorsMutex);
    left = gMirrors;
  }
  // Deleting the attribute runs deleteMirror, which destroys the mirror and drops it from gMirrors.
  // ncclCommFinalize waits for the communicator's peers, so every rank must free in the same order: newest
  // first. Ranks sharing two communicators mirrored them in the same order, because each mirror is built inside
  // a blocking collective that all of them entered.
  for (auto it = left.rbegin(); it != left.rend(); ++it) PMPI_Comm_delete_attr(it->second, gKeyval);
  PMPI_Comm_free_keyval(&gKeyval);
}

std::optional<ncclDataType_t> reduceType(MPI_Datatype dt) {
  struct Entry {
    MPI_Datatype mpi;
    ncclDataType_t nccl;
  };
  // Open MPI's handles are addresses of global objects, so this table is built at first call, after load.
  static const Entry kTable[] = {
      {MPI_SIGNED_CHAR, ncclInt8},   {MPI_INT8_T, ncclInt8},           {MPI_UNSIGNED_CHAR, ncclUint8},
      {MPI_UINT8_T, ncclUint8},      {MPI_INT, ncclInt32},             {MPI_INT32_T, ncclInt32},
      {MPI_UNSIGNED, ncclUint32},    {MPI_UINT32_T, ncclUint32},       {MPI_LONG, ncclInt64},
      {MPI_LONG_LONG, ncclInt64},    {MPI_INT64_T, ncclInt64},         {MPI_UNSIGNED_LONG, ncclUint64},
      {MPI_UNSIGNED_LONG_LONG, ncclUint64}, {MPI_UINT64_T, ncclUint64}, {MPI_FLOAT, ncclFloat32},
      {MPI_DOUBLE, ncclFloat64},     {MPI_INTEGER, ncclInt32},         {MPI_INTEGER4, ncclInt32},
      {MPI_INTEGER8, ncclInt64},     {MPI_REAL, ncclFloat32},          {MPI_REAL4, ncclFloat32},
      {MPI_DOUBLE_PRECISION, ncclFloat64}, {MPI_REAL8, ncclFloat64},
  };
  for (const Entry& e : kTable) {
    if (e.mpi != dt) continue;
    // Guards the C long and Fortran INTEGER/REAL sizes, which depend on the platform and on how MPI was built.
    int size = 0;
    PMPI_Type_size(dt, &size);
    if (static_cast<size_t>(size) != ncclTypeSize(e.nccl)) return std::nullopt;
    return e.nccl;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> reduceOp(MPI_Op op) {
  if (op == MPI_SUM) return ncclSum;
  if (op == MPI_PROD) return ncclProd;
  if (op == MPI_MAX) return ncclMax;
  if (op == MPI_MIN) return ncclMin;
  return std::nullopt;
}

std::optional<size_t> denseSize(MPI_Datatype dt) {
  if (dt == MPI_DATATYPE_NULL) return std::nullopt;
  int nInts = 0;
  int nAddrs = 0;
  int nTypes = 0;
  int combiner = 0;
  if (PMPI_Type_get_envelope(dt, &nInts, &nAddrs, &nTypes, &combiner) != MPI_SUCCESS) return std::nullopt;
  if (combiner != MPI_COMBINER_NAMED) return std::nullopt;
  int size = 0;
  MPI_Aint lb = 0;
  MPI_Aint extent = 0;
  MPI_Aint trueLb = 0;
  MPI_Aint trueExtent = 0;
  PMPI_Type_size(dt, &size);
  PMPI_Type_get_extent(dt, &lb, &extent);
  PMPI_Type_get_true_extent(dt, &trueLb, &trueExtent);
  if (size <= 0 || lb != 0 || trueLb != 0 || extent != size || trueExtent != size) return std::nullopt;
  return static_cast<size_t>(size);
}

size_t ncclTypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

void countCall(MpiColl coll, bool routed) {
  // Relaxed: counters are only read at MPI_Finalize, after every call that could count has returned.
  (routed ? gRouted : gPassed)[static_cast<size_t>(coll)].fetch_add(1, std::memory_order_relaxed);
}

void printStats() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  for (size_t i = 0; i < kNumMpiColls; ++i) {
    const uint64_t routed = gRouted[i].load(std::memory_order_relaxed);
    const uint64_t passed = gPassed[i].load(std::memory_order_relaxed);
    if (routed + passed == 0) continue;
    std::fprintf(stderr, "CFX_MPI_STATS rank 0: %s routed %llu passed through %llu\n",
                 mpiCollName(static_cast<MpiColl>(i)), static_cast<unsigned long long>(routed),
                 static_cast<unsigned long long>(passed));
  }
  std::fflush(stderr);
}

int mpiError(MPI_Comm comm, ncclResult_t result, const char* what) {
  CFX_WARN("libconflux_mpi: %s failed in Conflux: %s (%s)", what, ncclGetErrorString(result), ncclGetLastError(nullptr));
  PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
  return MPI_ERR_INTERN;
}

}  // namespace cfx::interpose
