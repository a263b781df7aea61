// SPDX-License-Identifier: Apache-2.0
// All-to-all-v entry points (api layer): ncclAllToAllv with RCCL's signature (conflux_nccl_ext.h) and its pnccl twin,
// and cfxAllToAllv (conflux.h). Counts and displacements are elements of datatype, in host memory, copied at the call.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "api/api_call.h"
#include "api/collective_call.h"
#include "conflux.h"
#include "conflux_nccl_ext.h"

namespace cfx::api {
namespace {

// Checks one (count, displacement) pair and converts it to bytes: negative values (a signed count passed through
// size_t), and counts or ends that overflow, are named.
Status pairBytes(const char* name, const size_t counts[], const size_t displs[], int peer, size_t elt, size_t* bytes,
                 size_t* offset) {
  const char* dname = name[0] == 's' ? "sdispls" : "rdispls";
  const size_t count = counts[peer];
  const size_t displ = displs[peer];
  constexpr size_t kSigned = static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max());
  if (count > kSigned) {
    return Status::error(Errc::InvalidArgument, strprintf("%s[%d] is negative (%td)", name, peer,
                                                          static_cast<ptrdiff_t>(count)));
  }
  if (displ > kSigned) {
    return Status::error(Errc::InvalidArgument, strprintf("%s[%d] is negative (%td)", dname, peer,
                                                          static_cast<ptrdiff_t>(displ)));
  }
  const size_t limit = kSigned / elt;
  if (count > limit || displ > limit || displ + count > limit) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("%s[%d] = %zu with %s[%d] = %zu overflows the address space (%zu-byte elements)",
                                   name, peer, count, dname, peer, displ, elt));
  }
  *bytes = count * elt;
  *offset = displ * elt;
  return Status();
}

struct Block {
  size_t begin;
  size_t end;
  int peer;
};

// Receive blocks must not overlap: two peers' data would land on the same bytes, in an order no one chose.
Status checkDisjoint(std::vector<Block> blocks) {
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].begin < blocks[i - 1].end) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("the receive regions of ranks %d and %d overlap (bytes [%zu, %zu) and [%zu, %zu) "
                                     "of recvbuff)",
                                     blocks[i - 1].peer, blocks[i].peer, blocks[i - 1].begin, blocks[i - 1].end,
                                     blocks[i].begin, blocks[i].end));
    }
  }
  return Status();
}

// Whether a send block and a receive block share memory (the buffers may overlap without being equal).
Status checkSendRecvApart(const char* sendbuff, const std::vector<Block>& sends, const char* recvbuff,
                          const std::vector<Block>& recvs) {
  const auto base = [](const char* p) { return reinterpret_cast<uintptr_t>(p); };
  const auto end = [](const std::vector<Block>& blocks) {
    size_t e = 0;
    for (const Block& b : blocks) e = std::max(e, b.end);
    return e;
  };
  // The usual case, two buffers apart, in one comparison; block by block only where they share memory.
  if (base(sendbuff) + end(sends) <= base(recvbuff) || base(recvbuff) + end(recvs) <= base(sendbuff)) return Status();
  for (const Block& s : sends) {
    for (const Block& r : recvs) {
      const uintptr_t sb = base(sendbuff) + s.begin;
      const uintptr_t rb = base(recvbuff) + r.begin;
      if (sb < rb + (r.end - r.begin) && rb < sb + (s.end - s.begin)) {
        return Status::error(Errc::InvalidArgument,
                             strprintf("the send region for rank %d overlaps the receive region of rank %d; only "
                                       "sendbuff == recvbuff with equal counts and displacements works in place",
                                       s.peer, r.peer));
      }
    }
  }
  return Status();
}

Status allToAllv(const char* name, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                 void* recvbuff, const size_t recvcounts[], const size_t rdispls[], int type, ncclComm_t handle,
                 cudaStream_t stream) {
  return submitOp(handle, stream, [&](core::Communicator& comm, core::Op& op) -> Status {
    CFX_TRY(checkDataType(type));
    if (sendcounts == nullptr || sdispls == nullptr || recvcounts == nullptr || rdispls == nullptr) {
      return Status::error(Errc::InvalidArgument, "sendcounts, sdispls, recvcounts and rdispls must not be NULL");
    }
    const int n = comm.nRanks();
    const int r = comm.rank();
    const size_t elt = dataTypeSize(static_cast<DataType>(type));
    auto v = std::make_shared<coll::AlltoallvArgs>();
    for (auto* a : {&v->sendBytes, &v->sendOffset, &v->recvBytes, &v->recvOffset}) a->resize(static_cast<size_t>(n));
    std::vector<Block> sends;
    std::vector<Block> recvs;
    for (int p = 0; p < n; ++p) {
      const auto up = static_cast<size_t>(p);
      CFX_TRY(pairBytes("sendcounts", sendcounts, sdispls, p, elt, &v->sendBytes[up], &v->sendOffset[up]));
      CFX_TRY(pairBytes("recvcounts", recvcounts, rdispls, p, elt, &v->recvBytes[up], &v->recvOffset[up]));
      if (v->sendBytes[up] > 0) sends.push_back({v->sendOffset[up], v->sendOffset[up] + v->sendBytes[up], p});
      if (v->recvBytes[up] > 0) recvs.push_back({v->recvOffset[up], v->recvOffset[up] + v->recvBytes[up], p});
      v->sendExtent = std::max(v->sendExtent, v->sendBytes[up] > 0 ? v->sendOffset[up] + v->sendBytes[up] : 0);
      v->recvExtent = std::max(v->recvExtent, v->recvBytes[up] > 0 ? v->recvOffset[up] + v->recvBytes[up] : 0);
    }
    const auto ur = static_cast<size_t>(r);
    if (v->sendBytes[ur] != v->recvBytes[ur]) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("rank %d sends %zu elements to itself (sendcounts[%d]) but expects %zu (recvcounts[%d])", r,
                                     sendcounts[r], r, recvcounts[r], r));
    }
    CFX_TRY(checkByteRange("ncclAllToAllv", "sendbuff", sendbuff, v->sendExtent));
    CFX_TRY(checkByteRange("ncclAllToAllv", "recvbuff", recvbuff, v->recvExtent));
    CFX_TRY(checkDisjoint(recvs));
    size_t received = 0;
    for (size_t b : v->recvBytes) received += b;
    v->recvGaps = received < v->recvExtent;
    v->inPlace = sendbuff == recvbuff && v->sendExtent > 0 &&
                 std::equal(sendcounts, sendcounts + n, recvcounts) && std::equal(sdispls, sdispls + n, rdispls);
    if (!v->inPlace && sendbuff != nullptr && recvbuff != nullptr) {
      CFX_TRY(checkSendRecvApart(static_cast<const char*>(sendbuff), sends, static_cast<const char*>(recvbuff), recvs));
    }
    CFX_TRY(comm.checkUsable());
    op.args.coll = coll::Collective::AllToAllv;
    op.args.sendbuff = sendbuff;
    op.args.recvbuff = recvbuff;
    op.args.type = static_cast<DataType>(type);
    op.args.op = ReduceOp::builtin(op.args.type, RedOpKind::Sum, n);
    CFX_INFO(log::Sys::Coll, "%s: sendbuff %p recvbuff %p sent %zu B received %zu B datatype %d comm %p [nranks=%d] "
             "stream %p", name, sendbuff, recvbuff, v->sendExtent, v->recvExtent, type, static_cast<void*>(handle),
             n, static_cast<void*>(stream));
    op.args.alltoallv = std::move(v);
    return Status();
  });
}

}  // namespace
}  // namespace cfx::api

CFX_API ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                    void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclAllToAllv", [&] {
    return cfx::api::allToAllv("ncclAllToAllv", sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                               cfx::api::rawEnum(datatype), comm, stream);
  });
}
CFX_NCCL_ALIAS(ncclAllToAllv)

CFX_API ncclResult_t cfxAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                 void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxAllToAllv", [&] {
    return cfx::api::allToAllv("cfxAllToAllv", sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                               cfx::api::rawEnum(datatype), comm, stream);
  });
}
