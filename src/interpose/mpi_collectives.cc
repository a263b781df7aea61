// SPDX-License-Identifier: Apache-2.0
// The C entry points of libconflux_mpi.so (interpose layer): strong MPI_* definitions that win over Open MPI's
// weak ones under LD_PRELOAD. Each checks whether Conflux can serve the call exactly (see mpi_route.h for the
// rules) and otherwise calls the PMPI_* function unchanged. Routed calls are blocking Conflux collectives on
// host memory with the NULL stream, so they have completed when ncclX returns, as MPI requires.
#include <mpi.h>

#include <cstring>
#include <vector>

#include "interpose/mpi_route.h"

using cfx::interpose::countCall;
using cfx::interpose::denseSize;
using cfx::interpose::mirrorFor;
using cfx::interpose::Mirror;
using cfx::interpose::MpiColl;
using cfx::interpose::mpiError;
using cfx::interpose::mpiOptions;
using cfx::interpose::ncclTypeSize;
using cfx::interpose::reduceOp;
using cfx::interpose::reduceType;

namespace {

// The mirror to route a call of `bytes` bytes on comm to, or nullptr to pass it through. Checked in the order
// that costs least: knobs, then the threshold, then the communicator (whose first use bootstraps Conflux).
const Mirror* routeTarget(MpiColl coll, MPI_Comm comm, size_t bytes) {
  const auto& options = mpiOptions();
  if (options.disable) return nullptr;
  if (coll == MpiColl::Barrier ? !options.routeBarrier
                               : bytes < static_cast<size_t>(options.minBytes[static_cast<size_t>(coll)])) {
    return nullptr;
  }
  if (comm == MPI_COMM_NULL) return nullptr;
  return mirrorFor(comm);
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

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  auto r = reduction(datatype, op);
  const Mirror* m = r && count > 0 ? routeTarget(MpiColl::Allreduce, comm, count * r->elemBytes) : nullptr;
  countCall(MpiColl::Allreduce, m != nullptr);
  if (m == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  ncclResult_t res = ncclAllReduce(src, recvbuf, count, r->type, r->op, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Allreduce");
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  auto r = reduction(datatype, op);
  const Mirror* m = r && count > 0 ? routeTarget(MpiColl::Reduce, comm, count * r->elemBytes) : nullptr;
  countCall(MpiColl::Reduce, m != nullptr);
  if (m == nullptr) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  // MPI_IN_PLACE is only legal at the root, where the input is already in recvbuf. Elsewhere recvbuf is not
  // significant and may be anything, so Conflux gets NULL (it does not touch recvbuff off the root).
  const bool isRoot = m->rank == root;
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  ncclResult_t res = ncclReduce(src, isRoot ? recvbuf : nullptr, count, r->type, r->op, root, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Reduce");
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  auto size = denseSize(datatype);
  const Mirror* m = size && count > 0 ? routeTarget(MpiColl::Bcast, comm, count * *size) : nullptr;
  countCall(MpiColl::Bcast, m != nullptr);
  if (m == nullptr) return PMPI_Bcast(buffer, count, datatype, root, comm);
  ncclResult_t res = ncclBroadcast(buffer, buffer, count * *size, ncclUint8, root, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Bcast");
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  // With MPI_IN_PLACE the send arguments are not significant; otherwise they must describe the same block.
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  auto size = denseSize(recvtype);
  const bool simple = size && recvcount > 0 && (inPlace || (sendtype == recvtype && sendcount == recvcount));
  int nRanks = 0;
  if (simple) PMPI_Comm_size(comm, &nRanks);
  const size_t block = simple ? recvcount * *size : 0;
  const Mirror* m = simple ? routeTarget(MpiColl::Allgather, comm, block * nRanks) : nullptr;
  countCall(MpiColl::Allgather, m != nullptr);
  if (m == nullptr) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  // MPI's in-place block sits at recvbuf + rank * block, which is exactly Conflux's in-place layout.
  const void* src = inPlace ? at(recvbuf, m->rank * block) : sendbuf;
  ncclResult_t res = ncclAllGather(src, recvbuf, block, ncclUint8, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Allgather");
}

namespace {

// Reduce-scatter with equal blocks of recvcount elements. MPI's in-place form reads the whole input from
// recvbuf and leaves the rank's block at its start; Conflux's in-place form leaves it at rank * recvcount, so
// the block is moved down afterwards.
int reduceScatterBlocks(const char* name, const Mirror* m, const void* sendbuf, void* recvbuf, int recvcount,
                        const Reduction& r, MPI_Comm comm) {
  const size_t block = recvcount * r.elemBytes;
  ncclResult_t res;
  if (sendbuf == MPI_IN_PLACE) {
    res = ncclReduceScatter(recvbuf, at(recvbuf, m->rank * block), recvcount, r.type, r.op, m->comm, nullptr);
    if (res == ncclSuccess && m->rank != 0) std::memmove(recvbuf, at(recvbuf, m->rank * block), block);
  } else {
    res = ncclReduceScatter(sendbuf, recvbuf, recvcount, r.type, r.op, m->comm, nullptr);
  }
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, name);
}

}  // namespace

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  auto r = reduction(datatype, op);
  int nRanks = 0;
  if (r && recvcount > 0) PMPI_Comm_size(comm, &nRanks);
  const Mirror* m =
      r && recvcount > 0 ? routeTarget(MpiColl::ReduceScatterBlock, comm, recvcount * r->elemBytes * nRanks) : nullptr;
  countCall(MpiColl::ReduceScatterBlock, m != nullptr);
  if (m == nullptr) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  return reduceScatterBlocks("MPI_Reduce_scatter_block", m, sendbuf, recvbuf, recvcount, *r, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
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
  const Mirror* m =
      equal ? routeTarget(MpiColl::ReduceScatter, comm, recvcounts[0] * r->elemBytes * nRanks) : nullptr;
  countCall(MpiColl::ReduceScatter, m != nullptr);
  if (m == nullptr) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  return reduceScatterBlocks("MPI_Reduce_scatter", m, sendbuf, recvbuf, recvcounts[0], *r, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  auto size = denseSize(recvtype);
  const bool simple = size && recvcount > 0 && (inPlace || (sendtype == recvtype && sendcount == recvcount));
  int nRanks = 0;
  if (simple) PMPI_Comm_size(comm, &nRanks);
  const size_t block = simple ? recvcount * *size : 0;
  const Mirror* m = simple ? routeTarget(MpiColl::Alltoall, comm, block * nRanks) : nullptr;
  countCall(MpiColl::Alltoall, m != nullptr);
  if (m == nullptr) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  // In place, every block of recvbuf is both sent and overwritten; send from a copy.
  std::vector<char> copy;
  const void* src = sendbuf;
  if (inPlace) {
    copy.assign(static_cast<char*>(recvbuf), static_cast<char*>(recvbuf) + block * nRanks);
    src = copy.data();
  }
  ncclResult_t res = ncclAlltoAll(src, recvbuf, block, ncclUint8, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Alltoall");
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rank = 0;
  int nRanks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &nRanks);
  const bool isRoot = rank == root;
  const bool inPlace = isRoot && sendbuf == MPI_IN_PLACE;
  const size_t block = rootedBlock(isRoot, inPlace, recvcount, recvtype, sendcount, sendtype);
  const Mirror* m = block > 0 ? routeTarget(MpiColl::Gather, comm, block * nRanks) : nullptr;
  countCall(MpiColl::Gather, m != nullptr);
  if (m == nullptr) return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  const void* src = inPlace ? at(recvbuf, rank * block) : sendbuf;
  ncclResult_t res = ncclGather(src, isRoot ? recvbuf : nullptr, block, ncclUint8, root, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Gather");
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rank = 0;
  int nRanks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &nRanks);
  const bool isRoot = rank == root;
  const bool inPlace = isRoot && recvbuf == MPI_IN_PLACE;
  const size_t block = rootedBlock(isRoot, inPlace, sendcount, sendtype, recvcount, recvtype);
  const Mirror* m = block > 0 ? routeTarget(MpiColl::Scatter, comm, block * nRanks) : nullptr;
  countCall(MpiColl::Scatter, m != nullptr);
  if (m == nullptr) return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  void* dst = inPlace ? at(const_cast<void*>(sendbuf), rank * block) : recvbuf;
  ncclResult_t res = ncclScatter(isRoot ? sendbuf : nullptr, dst, block, ncclUint8, root, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Scatter");
}

int MPI_Barrier(MPI_Comm comm) {
  const Mirror* m = routeTarget(MpiColl::Barrier, comm, 0);
  countCall(MpiColl::Barrier, m != nullptr);
  if (m == nullptr) return PMPI_Barrier(comm);
  // An allreduce cannot complete on any rank before every rank has contributed, which is all a barrier promises.
  int token = 0;
  ncclResult_t res = ncclAllReduce(&token, &token, 1, ncclInt32, ncclSum, m->comm, nullptr);
  return res == ncclSuccess ? MPI_SUCCESS : mpiError(comm, res, "MPI_Barrier");
}

int MPI_Finalize(void) {
  if (mpiOptions().stats) cfx::interpose::printStats();
  cfx::interpose::freeAllMirrors();
  return PMPI_Finalize();
}

}  // extern "C"
