// SPDX-License-Identifier: Apache-2.0
// Collective entry points (api layer): validate, build the task, hand it to core's group launch.
#include "api/api_call.h"
#include "api/collective_call.h"
#include "core/group.h"

namespace cfx::api {
namespace {

// How many blocks of `count` elements each buffer must hold on this rank, by NCCL's count semantics (nccl.h).
void bufferBlocks(const CollCall& c, const core::Communicator& comm, size_t* sendBlocks, size_t* recvBlocks) {
  const size_t n = static_cast<size_t>(comm.nRanks());
  const bool isRoot = comm.rank() == c.root;
  switch (c.coll) {
    case coll::Collective::AllReduce:
    case coll::Collective::Scan: *sendBlocks = 1; *recvBlocks = 1; break;
    case coll::Collective::Broadcast:
    case coll::Collective::BroadcastDelta: *sendBlocks = isRoot ? 1 : 0; *recvBlocks = 1; break;
    case coll::Collective::Reduce: *sendBlocks = 1; *recvBlocks = isRoot ? 1 : 0; break;
    case coll::Collective::AllGather: *sendBlocks = 1; *recvBlocks = n; break;
    case coll::Collective::ReduceScatter: *sendBlocks = n; *recvBlocks = 1; break;
    case coll::Collective::AlltoAll: *sendBlocks = n; *recvBlocks = n; break;
    case coll::Collective::Gather: *sendBlocks = 1; *recvBlocks = isRoot ? n : 0; break;
    case coll::Collective::Scatter: *sendBlocks = isRoot ? n : 0; *recvBlocks = 1; break;
    case coll::Collective::AllToAllv:
    case coll::Collective::MoeDispatch:
    case coll::Collective::MoeCombine: break;  // entry points of their own (alltoallv_api.cc, moe_api.cc)
  }
}

}  // namespace

Result<core::Communicator*> checkOpComm(ncclComm_t handle) {
  Result<core::Communicator*> checked = checkComm(handle);
  if (!checked.ok()) core::noteGroupError(checked.status());
  return checked;
}

Status submitCollective(const CollCall& c) {
  return submitOp(c.comm, c.stream, [&c](core::Communicator& communicator, core::Op& op) -> Status {
    core::Communicator* comm = &communicator;
    CFX_TRY(checkDataType(c.type));
    if (c.root >= 0 || c.coll == coll::Collective::Broadcast || c.coll == coll::Collective::BroadcastDelta ||
        c.coll == coll::Collective::Reduce ||
        c.coll == coll::Collective::Gather || c.coll == coll::Collective::Scatter) {
      CFX_TRY(checkRoot(*comm, c.root, c.name + 4));
    }
    size_t sendBlocks = 0;
    size_t recvBlocks = 0;
    bufferBlocks(c, *comm, &sendBlocks, &recvBlocks);
    // Every rank's size is checked against the largest any rank may need, so that a count too large for some
    // rank fails on all of them, not only where its buffer is the n-block one.
    CFX_TRY(checkedBytes(c.name, "count", c.count, c.type, static_cast<size_t>(comm->nRanks())).status());
    CFX_TRY(checkBufferBytes(c.name, "sendbuff", c.sendbuff, c.count, c.type, sendBlocks).status());
    CFX_TRY(checkBufferBytes(c.name, "recvbuff", c.recvbuff, c.count, c.type, recvBlocks).status());
    CFX_TRY(comm->checkUsable());
    op.args.coll = c.coll;
    op.args.sendbuff = c.sendbuff;
    op.args.recvbuff = c.recvbuff;
    op.args.count = c.count;
    op.args.type = static_cast<DataType>(c.type);
    op.args.root = c.root < 0 ? 0 : c.root;
    if (c.reducing) {
      CFX_TRY_ASSIGN(op.args.op, checkRedOp(*comm, c.op, c.type, &op.deviceScalar));
    } else {
      op.args.op = ReduceOp::builtin(op.args.type, RedOpKind::Sum, comm->nRanks());
    }
    CFX_TRY(checkScanOp(c, *comm, op.args.op));
    op.args.exclusive = c.exclusive;
    CFX_TRY_ASSIGN(op.args.compress, codecFor(c, *comm));
    if (c.coll == coll::Collective::BroadcastDelta) {
      op.args.delta = comm->compression().deltaFor(c.recvbuff, c.count, dataTypeSize(op.args.type));
    }
    CFX_INFO(log::Sys::Coll, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p "
             "[nranks=%d] stream %p", c.name + 4, 0ul, c.sendbuff, c.recvbuff, c.count, c.type, c.op, c.root, static_cast<void*>(c.comm), comm->nRanks(), static_cast<void*>(c.stream));
    return Status();
  });
}

namespace {

// ncclSend / ncclRecv: validate, then record or launch one point-to-point op.
Status submitP2p(core::Op::Kind kind, void* buff, size_t count, int type, int peer, ncclComm_t handle,
                 cudaStream_t stream) {
  const bool isSend = kind == core::Op::Kind::Send;
  CFX_TRY_ASSIGN(core::Communicator * comm, checkOpComm(handle));
  Status st = [&]() -> Status {
    CFX_TRY(checkDataType(type));
    if (peer < 0 || peer >= comm->nRanks()) {
      return Status::error(Errc::InvalidArgument, strprintf("%s : invalid peer %d (should be in the 0..%d range)",
                                                            isSend ? "ncclSend" : "ncclRecv", peer, comm->nRanks() - 1));
    }
    CFX_TRY_ASSIGN(const size_t bytes, checkBufferBytes(isSend ? "ncclSend" : "ncclRecv",
                                                         isSend ? "sendbuff" : "recvbuff", buff, count, type));
    CFX_TRY(comm->checkUsable());
    core::Op op;
    op.kind = kind;
    op.comm = comm;
    op.sendbuff = isSend ? buff : nullptr;
    op.recvbuff = isSend ? nullptr : buff;
    op.bytes = bytes;
    op.peer = peer;
    op.stream = stream;
    return core::submit(op);
  }();
  if (!st.ok()) core::noteGroupError(st);
  return st;
}

}  // namespace
}  // namespace cfx::api

using cfx::api::CollCall;
using cfx::api::rawEnum;
using cfx::coll::Collective;

CFX_API ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclAllReduce", [&] {
    return cfx::api::submitCollective(
        {"ncclAllReduce", Collective::AllReduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), -1, comm, stream, true});
  });
}
CFX_NCCL_ALIAS(ncclAllReduce)

CFX_API ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclBroadcast", [&] {
    return cfx::api::submitCollective(
        {"ncclBroadcast", Collective::Broadcast, sendbuff, recvbuff, count, rawEnum(datatype), ncclSum, root, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclBroadcast)

CFX_API ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream) {
  return cfx::api::call("ncclBcast", [&] {
    return cfx::api::submitCollective(
        {"ncclBcast", Collective::Broadcast, buff, buff, count, rawEnum(datatype), ncclSum, root, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclBcast)

CFX_API ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclReduce", [&] {
    return cfx::api::submitCollective(
        {"ncclReduce", Collective::Reduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), root, comm, stream, true});
  });
}
CFX_NCCL_ALIAS(ncclReduce)

CFX_API ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                    ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclAllGather", [&] {
    return cfx::api::submitCollective(
        {"ncclAllGather", Collective::AllGather, sendbuff, recvbuff, sendcount, rawEnum(datatype), ncclSum, -1, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclAllGather)

CFX_API ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclReduceScatter", [&] {
    return cfx::api::submitCollective({"ncclReduceScatter", Collective::ReduceScatter, sendbuff, recvbuff, recvcount,
                                       rawEnum(datatype), rawEnum(op), -1, comm, stream, true});
  });
}
CFX_NCCL_ALIAS(ncclReduceScatter)

CFX_API ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclAlltoAll", [&] {
    return cfx::api::submitCollective(
        {"ncclAlltoAll", Collective::AlltoAll, sendbuff, recvbuff, count, rawEnum(datatype), ncclSum, -1, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclAlltoAll)

CFX_API ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclGather", [&] {
    return cfx::api::submitCollective(
        {"ncclGather", Collective::Gather, sendbuff, recvbuff, count, rawEnum(datatype), ncclSum, root, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclGather)

CFX_API ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("ncclScatter", [&] {
    return cfx::api::submitCollective(
        {"ncclScatter", Collective::Scatter, sendbuff, recvbuff, count, rawEnum(datatype), ncclSum, root, comm, stream, false});
  });
}
CFX_NCCL_ALIAS(ncclScatter)

CFX_API ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                               cudaStream_t stream) {
  return cfx::api::call("ncclSend", [&] {
    return cfx::api::submitP2p(cfx::core::Op::Kind::Send, const_cast<void*>(sendbuff), count, rawEnum(datatype), peer,
                               comm, stream);
  });
}
CFX_NCCL_ALIAS(ncclSend)

CFX_API ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                               cudaStream_t stream) {
  return cfx::api::call("ncclRecv", [&] {
    return cfx::api::submitP2p(cfx::core::Op::Kind::Recv, recvbuff, count, rawEnum(datatype), peer, comm, stream);
  });
}
CFX_NCCL_ALIAS(ncclRecv)

CFX_API ncclResult_t pncclGroupStart() {
  return cfx::api::call("ncclGroupStart", [] {
    cfx::core::groupStart();
    return cfx::Status();
  });
}
CFX_NCCL_ALIAS(ncclGroupStart)

CFX_API ncclResult_t pncclGroupEnd() {
  return cfx::api::call("ncclGroupEnd", [] { return cfx::core::groupEnd(); });
}
CFX_NCCL_ALIAS(ncclGroupEnd)

CFX_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return cfx::api::call("ncclGroupSimulateEnd", [&]() -> cfx::Status {
    if (simInfo != nullptr && simInfo->magic != 0x74685283) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                "ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
    }
    float us = 0;
    CFX_TRY(cfx::core::groupSimulateEnd(&us));
    if (simInfo) simInfo->estimatedTime = us;
    return cfx::Status();
  });
}
CFX_NCCL_ALIAS(ncclGroupSimulateEnd)
