// SPDX-License-Identifier: Apache-2.0
// The C entry points of libconflux_mpi.so (interpose layer): strong MPI_* definitions that win over Open MPI's
// weak ones under LD_PRELOAD. Each checks whether Conflux can serve the call exactly (see mpi_route.h for the
// rules) and otherwise calls the PMPI_* function unchanged. A blocking form and its MPI_I* form share one plan
// function, so both decide alike; the plan returns the op to enqueue. A routed blocking call runs it on host
// memory with the NULL stream, so it has completed when ncclX returns, as MPI requires; a routed non-blocking
// call runs it on the mirror's host stream behind a generalized request (mpi_async.h).
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "interpose/mpi_route.h"

using cfx::interpose::AsyncLane;
using cfx::interpose::blockingForm;
using cfx::interpose::countCall;
using cfx::interpose::denseSize;
using cfx::interpose::mirrorFor;
using cfx::interpose::Mirror;
using cfx::interpose::MpiColl;
using cfx::interpose::mpiCollName;
using cfx::interpose::mpiError;
using cfx::interpose::mpiOptions;
using cfx::interpose::ncclTypeSize;
using cfx::interpose::reduceOp;
using cfx::interpose::reduceType;
using cfx::interpose::RoutedOp;
using cfx::interpose::routesEverySize;
using cfx::interpose::sizeRoutes;

namespace {

constexpr bool isNonBlocking(MpiColl coll) { return blockingForm(coll) != coll; }

// The mirror to route a call of `bytes` bytes on comm to, or nullptr to pass it through. Checked in the order
// that costs least: knobs, then the size rule (minimum and pass-through bands), then the communicator. A blocking
// call bootstraps the mirror on first use (MPI lets blocking collectives synchronize); a non-blocking one routes
// only on a mirror that exists, since it must not wait for the other ranks.
Mirror* routeTarget(MpiColl coll, MPI_Comm comm, size_t bytes) {
  const auto& options = mpiOptions();
  if (options.disable) return nullptr;
  const MpiColl form = blockingForm(coll);
  if (form == MpiColl::Barrier ? !options.routeBarrier : !sizeRoutes(options, coll, static_cast<int64_t>(bytes))) {
    return nullptr;
  }
  if (comm == MPI_COMM_NULL) return nullptr;
  if (!isNonBlocking(coll)) return mirrorFor(comm);
  Mirror* m = cfx::interpose::existingMirror(comm);
  return m != nullptr && m->asyncOk ? m : nullptr;
}

// A first, cheap look for the calls that programs make most often with few bytes (allreduce, reduce, bcast):
// false when the knobs or the size rule keep the call with MPI anyway, so those calls pay one PMPI_Type_size
// before passing through instead of the full datatype checks. Type size x count agrees across ranks, as MPI
// requires matching type signatures.
bool mayRoute(MpiColl coll, int count, MPI_Datatype datatype) {
  const auto& options = mpiOptions();
  if (options.disable || count <= 0) return false;
  int size = 0;
  if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size <= 0) return false;
  return sizeRoutes(options, coll, static_cast<int64_t>(count) * size);
}

// A call's routing decision: the mirror (nullptr: pass through) and the op to run on it.
struct Plan {
  Mirror* m = nullptr;
  RoutedOp op;
};

RoutedOp launching(std::function<ncclResult_t(cudaStream_t)> launch) {
  RoutedOp op;
  op.launch = std::move(launch);
  return op;
}

// Counts the call and, when routed, keeps op.
Plan decide(MpiColl coll, Mirror* m, RoutedOp op) {
  countCall(coll, m != nullptr);
  if (m == nullptr) return Plan{};
  return Plan{m, std::move(op)};
}

int runBlocking(MpiColl coll, const Plan& plan, MPI_Comm comm) {
  // Always on the calling thread, though non-blocking calls of this communicator may still be running: Conflux
  // queues it behind those that share its links (core/group.cc). Putting it on the host stream only while some are
  // pending would differ from rank to rank, and a collective on a host stream on one rank and not on another takes
  // different host lanes on the two (core/host_lanes.h).
  ncclResult_t res = plan.op.launch(nullptr);
  if (res != ncclSuccess) return mpiError(comm, res, mpiCollName(coll));
  plan.op.finish();
  return MPI_SUCCESS;
}

int runNonBlocking(MpiColl coll, Plan plan, MPI_Comm comm, MPI_Request* request) {
  if (!plan.m->async) {
    plan.m->async = AsyncLane::create();
    if (!plan.m->async) return mpiError(comm, ncclSystemError, mpiCollName(coll));
  }
  ncclResult_t res = plan.m->async->start(std::move(plan.op), request);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, mpiCollName(coll));
}

struct Reduction {
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t elemBytes;
};

std::optional<Reduction> reduction(MPI_Datatype dt, MPI_Op op) {
  auto t = reduceType(dt);
  auto o = reduceOp(op);
  if (!t || !o) return std::nullopt;
  return Reduction{*t, *o, ncclTypeSize(*t)};
}

char* at(void* base, size_t offset) { return static_cast<char*>(base) + offset; }

// Bytes per rank of a rooted gather or scatter, or 0 to pass the call through. The root's blocks are described
// by (rootCount, rootType), every other rank's by (leafCount, leafType); at the root both pairs must agree unless
// the call is in place, and the type must be a predefined dense one.
size_t rootedBlock(bool isRoot, bool inPlace, int rootCount, MPI_Datatype rootType, int leafCount,
                   MPI_Datatype leafType) {
  std::optional<size_t> size = denseSize(isRoot ? rootType : leafType);
  const int count = isRoot ? rootCount : leafCount;
  if (isRoot && !inPlace && (leafType != rootType || leafCount != rootCount)) size.reset();
  return size && count > 0 ? static_cast<size_t>(count) * *size : 0;
}

Plan planAllreduce(MpiColl coll, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm) {
  if (!mayRoute(coll, count, datatype)) return decide(coll, nullptr, {});
  auto r = reduction(datatype, op);
  Mirror* m = r ? routeTarget(coll, comm, count * r->elemBytes) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclAllReduce(src, recvbuf, count, r->type, r->op, nc, s);
                }));
}

Plan planReduce(MpiColl coll, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm) {
  if (!mayRoute(coll, count, datatype)) return decide(coll, nullptr, {});
  auto r = reduction(datatype, op);
  Mirror* m = r ? routeTarget(coll, comm, count * r->elemBytes) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  // MPI_IN_PLACE is only legal at the root, where the input is already in recvbuf. Elsewhere recvbuf is not
  // significant and may be anything, so Conflux gets NULL (it does not touch recvbuff off the root).
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  void* dst = m->rank == root ? recvbuf : nullptr;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclReduce(src, dst, count, r->type, r->op, root, nc, s);
                }));
}

Plan planBcast(MpiColl coll, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!mayRoute(coll, count, datatype)) return decide(coll, nullptr, {});
  auto size = denseSize(datatype);
  Mirror* m = size && count > 0 ? routeTarget(coll, comm, count * *size) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  const size_t bytes = count * *size;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, nc, s);
                }));
}

Plan planAllgather(MpiColl coll, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  // With MPI_IN_PLACE the send arguments are not significant; otherwise they must describe the same block.
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  auto size = denseSize(recvtype);
  const bool simple = size && recvcount > 0 && (inPlace || (sendtype == recvtype && sendcount == recvcount));
  int nRanks = 0;
  if (simple) PMPI_Comm_size(comm, &nRanks);
  const size_t block = simple ? recvcount * *size : 0;
  Mirror* m = simple ? routeTarget(coll, comm, block * nRanks) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  // MPI's in-place block sits at recvbuf + rank * block, which is exactly Conflux's in-place layout.
  const void* src = inPlace ? at(recvbuf, m->rank * block) : sendbuf;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclAllGather(src, recvbuf, block, ncclUint8, nc, s);
                }));
}

// Reduce-scatter with equal blocks of recvcount elements. MPI's in-place form reads the whole input from
// recvbuf and leaves the rank's block at its start; Conflux's in-place form leaves it at rank * recvcount, so
// the block is moved down once the op has completed.
Plan planReduceScatterBlocks(MpiColl coll, Mirror* m, const void* sendbuf, void* recvbuf, int recvcount,
                             const Reduction& r) {
  if (m == nullptr) return decide(coll, nullptr, {});
  const size_t block = recvcount * r.elemBytes;
  ncclComm_t nc = m->comm;
  RoutedOp op;
  if (sendbuf == MPI_IN_PLACE) {
    void* dst = at(recvbuf, m->rank * block);
    op.launch = [=](cudaStream_t s) { return ncclReduceScatter(recvbuf, dst, recvcount, r.type, r.op, nc, s); };
    op.moveTo = recvbuf;
    op.moveFrom = dst;
    op.moveBytes = block;
  } else {
    op.launch = [=](cudaStream_t s) { return ncclReduceScatter(sendbuf, recvbuf, recvcount, r.type, r.op, nc, s); };
  }
  return decide(coll, m, std::move(op));
}

Plan planReduceScatterBlock(MpiColl coll, const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm) {
  auto r = reduction(datatype, op);
  int nRanks = 0;
  if (r && recvcount > 0) PMPI_Comm_size(comm, &nRanks);
  Mirror* m = r && recvcount > 0 ? routeTarget(coll, comm, recvcount * r->elemBytes * nRanks) : nullptr;
  return planReduceScatterBlocks(coll, m, sendbuf, recvbuf, recvcount, r ? *r : Reduction{});
}

Plan planReduceScatter(MpiColl coll, const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  // Conflux's reduce-scatter has equal blocks, so only calls whose recvcounts are all equal are routed. Every
  // rank passes the same recvcounts, so every rank decides alike.
  auto r = reduction(datatype, op);
  int nRanks = 0;
  bool equal = r.has_value() && recvcounts != nullptr;
  if (equal) {
    PMPI_Comm_size(comm, &nRanks);
    for (int i = 1; i < nRanks && equal; ++i) equal = recvcounts[i] == recvcounts[0];
    equal = equal && nRanks > 0 && recvcounts[0] > 0;
  }
  Mirror* m = equal ? routeTarget(coll, comm, recvcounts[0] * r->elemBytes * nRanks) : nullptr;
  return planReduceScatterBlocks(coll, m, sendbuf, recvbuf, m != nullptr ? recvcounts[0] : 0,
                                 r ? *r : Reduction{});
}

Plan planAlltoall(MpiColl coll, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  auto size = denseSize(recvtype);
  const bool simple = size && recvcount > 0 && (inPlace || (sendtype == recvtype && sendcount == recvcount));
  int nRanks = 0;
  if (simple) PMPI_Comm_size(comm, &nRanks);
  const size_t block = simple ? recvcount * *size : 0;
  Mirror* m = simple ? routeTarget(coll, comm, block * nRanks) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  // In place, every block of recvbuf is both sent and overwritten; send from a copy, which lives in the op
  // until it completes (a vector's move keeps its storage, so the pointer stays valid).
  RoutedOp op;
  const void* src = sendbuf;
  if (inPlace) {
    op.scratch.assign(static_cast<char*>(recvbuf), static_cast<char*>(recvbuf) + block * nRanks);
    src = op.scratch.data();
  }
  ncclComm_t nc = m->comm;
  op.launch = [=](cudaStream_t s) { return ncclAlltoAll(src, recvbuf, block, ncclUint8, nc, s); };
  return decide(coll, m, std::move(op));
}

Plan planGather(MpiColl coll, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rank = 0;
  int nRanks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &nRanks);
  const bool isRoot = rank == root;
  const bool inPlace = isRoot && sendbuf == MPI_IN_PLACE;
  const size_t block = rootedBlock(isRoot, inPlace, recvcount, recvtype, sendcount, sendtype);
  Mirror* m = block > 0 ? routeTarget(coll, comm, block * nRanks) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  const void* src = inPlace ? at(recvbuf, rank * block) : sendbuf;
  void* dst = isRoot ? recvbuf : nullptr;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclGather(src, dst, block, ncclUint8, root, nc, s);
                }));
}

Plan planScatter(MpiColl coll, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rank = 0;
  int nRanks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &nRanks);
  const bool isRoot = rank == root;
  const bool inPlace = isRoot && recvbuf == MPI_IN_PLACE;
  const size_t block = rootedBlock(isRoot, inPlace, sendcount, sendtype, recvcount, recvtype);
  Mirror* m = block > 0 ? routeTarget(coll, comm, block * nRanks) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  void* dst = inPlace ? at(const_cast<void*>(sendbuf), rank * block) : recvbuf;
  const void* src = isRoot ? sendbuf : nullptr;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return ncclScatter(src, dst, block, ncclUint8, root, nc, s);
                }));
}

// MPI_Alltoallv: predefined dense types on both sides, non-negative counts and displacements. Unlike the other
// collectives, the bytes differ from rank to rank, so the size rule cannot be applied locally: with the default rule
// (every size routes) nothing needs agreeing; with a minimum or a band, a blocking call first agrees on the largest
// bytes any rank moves (one MPI_Allreduce), and a non-blocking one, which must not wait for the others, stays with
// MPI. Counts and displacements travel to Conflux in bytes, as ncclUint8 elements.
Plan planAlltoallv(MpiColl coll, const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm) {
  const auto& options = mpiOptions();
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  auto recvSize = denseSize(recvtype);
  auto sendSize = inPlace ? recvSize : denseSize(sendtype);
  int nRanks = 0;
  if (options.disable || !recvSize || !sendSize || comm == MPI_COMM_NULL || recvcounts == nullptr ||
      rdispls == nullptr || (!inPlace && (sendcounts == nullptr || sdispls == nullptr)) ||
      PMPI_Comm_size(comm, &nRanks) != MPI_SUCCESS) {
    return decide(coll, nullptr, {});
  }
  const int* sc = inPlace ? recvcounts : sendcounts;
  const int* sd = inPlace ? rdispls : sdispls;
  const auto n = static_cast<size_t>(nRanks);
  std::vector<size_t> sendBytes(n), sendOff(n), recvBytes(n), recvOff(n);
  bool valid = true;
  int64_t mine[1] = {0};
  int64_t sent = 0;
  size_t recvExtent = 0;
  for (size_t p = 0; p < n; ++p) {
    valid = valid && sc[p] >= 0 && sd[p] >= 0 && recvcounts[p] >= 0 && rdispls[p] >= 0;
    sendBytes[p] = static_cast<size_t>(sc[p]) * *sendSize;
    sendOff[p] = static_cast<size_t>(sd[p]) * *sendSize;
    recvBytes[p] = static_cast<size_t>(recvcounts[p]) * *recvSize;
    recvOff[p] = static_cast<size_t>(rdispls[p]) * *recvSize;
    sent += static_cast<int64_t>(sendBytes[p]);
    mine[0] += static_cast<int64_t>(recvBytes[p]);
    if (recvBytes[p] > 0) recvExtent = std::max(recvExtent, recvOff[p] + recvBytes[p]);
  }
  mine[0] = std::max(mine[0], sent);
  // Every rank reaches the same verdict: the validity and the largest bytes, agreed when the rule needs them.
  int64_t agreed[2] = {valid ? 0 : 1, mine[0]};
  if (!routesEverySize(options, coll)) {
    if (isNonBlocking(coll)) return decide(coll, nullptr, {});
    int64_t local[2] = {agreed[0], agreed[1]};
    if (PMPI_Allreduce(local, agreed, 2, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS) return decide(coll, nullptr, {});
    if (agreed[0] != 0 || !sizeRoutes(options, coll, agreed[1])) return decide(coll, nullptr, {});
  } else if (!valid) {
    return decide(coll, nullptr, {});  // MPI reports the negative count; every rank of a valid call still routes
  }
  Mirror* m = routeTarget(coll, comm, static_cast<size_t>(agreed[1]));
  if (m == nullptr) return decide(coll, nullptr, {});
  RoutedOp op;
  const void* src = sendbuf;
  if (inPlace) {  // the blocks leave from a copy, as for MPI_Alltoall (the op owns it until it completes)
    op.scratch.assign(static_cast<char*>(recvbuf), static_cast<char*>(recvbuf) + recvExtent);
    src = op.scratch.data();
  }
  ncclComm_t nc = m->comm;
  op.launch = [=](cudaStream_t s) {
    return cfxAllToAllv(src, sendBytes.data(), sendOff.data(), recvbuf, recvBytes.data(), recvOff.data(), ncclUint8,
                        nc, s);
  };
  return decide(coll, m, std::move(op));
}

// MPI_Scan / MPI_Exscan on predefined types with SUM, PROD, MAX or MIN. MPI leaves rank 0's result of an exclusive
// scan undefined; Conflux writes the op's identity there.
Plan planScan(MpiColl coll, bool exclusive, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
              MPI_Op op, MPI_Comm comm) {
  if (!mayRoute(coll, count, datatype)) return decide(coll, nullptr, {});
  auto r = reduction(datatype, op);
  Mirror* m = r ? routeTarget(coll, comm, count * r->elemBytes) : nullptr;
  if (m == nullptr) return decide(coll, nullptr, {});
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  ncclComm_t nc = m->comm;
  return decide(coll, m, launching([=](cudaStream_t s) {
                  return exclusive ? cfxExScan(src, recvbuf, count, r->type, r->op, nc, s)
                                   : cfxScan(src, recvbuf, count, r->type, r->op, nc, s);
                }));
}

Plan planBarrier(MpiColl coll, MPI_Comm comm) {
  Mirror* m = routeTarget(coll, comm, 0);
  if (m == nullptr) return decide(coll, nullptr, {});
  // An allreduce cannot complete on any rank before every rank has contributed, which is all a barrier promises.
  // Its token lives in the op, which outlives a non-blocking call.
  RoutedOp op;
  op.scratch.assign(sizeof(int32_t), 0);
  void* token = op.scratch.data();
  ncclComm_t nc = m->comm;
  op.launch = [=](cudaStream_t s) { return ncclAllReduce(token, token, 1, ncclInt32, ncclSum, nc, s); };
  return decide(coll, m, std::move(op));
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Plan p = planAllreduce(MpiColl::Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return runBlocking(MpiColl::Allreduce, p, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  Plan p = planAllreduce(MpiColl::Iallreduce, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  return runNonBlocking(MpiColl::Iallreduce, std::move(p), comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  Plan p = planReduce(MpiColl::Reduce, sendbuf, recvbuf, count, datatype, op, root, comm);
  if (p.m == nullptr) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  return runBlocking(MpiColl::Reduce, p, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  Plan p = planReduce(MpiColl::Ireduce, sendbuf, recvbuf, count, datatype, op, root, comm);
  if (p.m == nullptr) return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
  return runNonBlocking(MpiColl::Ireduce, std::move(p), comm, request);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  Plan p = planBcast(MpiColl::Bcast, buffer, count, datatype, root, comm);
  if (p.m == nullptr) return PMPI_Bcast(buffer, count, datatype, root, comm);
  return runBlocking(MpiColl::Bcast, p, comm);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  Plan p = planBcast(MpiColl::Ibcast, buffer, count, datatype, root, comm);
  if (p.m == nullptr) return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  return runNonBlocking(MpiColl::Ibcast, std::move(p), comm, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  Plan p = planAllgather(MpiColl::Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (p.m == nullptr) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return runBlocking(MpiColl::Allgather, p, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  Plan p = planAllgather(MpiColl::Iallgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (p.m == nullptr) {
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  }
  return runNonBlocking(MpiColl::Iallgather, std::move(p), comm, request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  Plan p = planReduceScatterBlock(MpiColl::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  return runBlocking(MpiColl::ReduceScatterBlock, p, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  Plan p = planReduceScatterBlock(MpiColl::IreduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
  return runNonBlocking(MpiColl::IreduceScatterBlock, std::move(p), comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  Plan p = planReduceScatter(MpiColl::ReduceScatter, sendbuf, recvbuf, recvcounts, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  return runBlocking(MpiColl::ReduceScatter, p, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  Plan p = planReduceScatter(MpiColl::IreduceScatter, sendbuf, recvbuf, recvcounts, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
  return runNonBlocking(MpiColl::IreduceScatter, std::move(p), comm, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  Plan p = planAlltoall(MpiColl::Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (p.m == nullptr) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return runBlocking(MpiColl::Alltoall, p, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  Plan p = planAlltoall(MpiColl::Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (p.m == nullptr) {
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  }
  return runNonBlocking(MpiColl::Ialltoall, std::move(p), comm, request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  Plan p = planGather(MpiColl::Gather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  if (p.m == nullptr) return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return runBlocking(MpiColl::Gather, p, comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  Plan p = planGather(MpiColl::Igather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  if (p.m == nullptr) {
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  }
  return runNonBlocking(MpiColl::Igather, std::move(p), comm, request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  Plan p = planScatter(MpiColl::Scatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  if (p.m == nullptr) return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return runBlocking(MpiColl::Scatter, p, comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  Plan p = planScatter(MpiColl::Iscatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  if (p.m == nullptr) {
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  }
  return runNonBlocking(MpiColl::Iscatter, std::move(p), comm, request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  Plan p = planAlltoallv(MpiColl::Alltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm);
  if (p.m == nullptr) {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  }
  return runBlocking(MpiColl::Alltoallv, p, comm);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  Plan p = planAlltoallv(MpiColl::Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm);
  if (p.m == nullptr) {
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           request);
  }
  return runNonBlocking(MpiColl::Ialltoallv, std::move(p), comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Plan p = planScan(MpiColl::Scan, false, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
  return runBlocking(MpiColl::Scan, p, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  Plan p = planScan(MpiColl::Iscan, false, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, request);
  return runNonBlocking(MpiColl::Iscan, std::move(p), comm, request);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Plan p = planScan(MpiColl::Exscan, true, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
  return runBlocking(MpiColl::Exscan, p, comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  Plan p = planScan(MpiColl::Iexscan, true, sendbuf, recvbuf, count, datatype, op, comm);
  if (p.m == nullptr) return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, request);
  return runNonBlocking(MpiColl::Iexscan, std::move(p), comm, request);
}

int MPI_Barrier(MPI_Comm comm) {
  Plan p = planBarrier(MpiColl::Barrier, comm);
  if (p.m == nullptr) return PMPI_Barrier(comm);
  return runBlocking(MpiColl::Barrier, p, comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  Plan p = planBarrier(MpiColl::Ibarrier, comm);
  if (p.m == nullptr) return PMPI_Ibarrier(comm, request);
  return runNonBlocking(MpiColl::Ibarrier, std::move(p), comm, request);
}

int MPI_Finalize(void) {
  // Freeing the mirrors first completes every routed non-blocking call, so the counts below are final.
  cfx::interpose::freeAllMirrors();
  if (mpiOptions().stats) cfx::interpose::printStats();
  return PMPI_Finalize();
}

}  // extern "C"
