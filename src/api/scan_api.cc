// SPDX-License-Identifier: Apache-2.0
// All-Scan entry points (api layer): cfxScan, cfxExScan and the ordered ops they take (conflux.h, "All-Scan").
#include "api/api_call.h"
#include "api/collective_call.h"
#include "common/cuda_driver.h"
#include "conflux.h"

namespace cfx::api {

// Groups of an affine op: at most this many elements (16 Mi), far above any attention state.
inline constexpr size_t kMaxGroupElems = size_t{1} << 24;

Status checkScanOp(const CollCall& c, const core::Communicator& comm, const ReduceOp& op) {
  const bool scan = c.coll == coll::Collective::Scan;
  if (!scan) {
    if (op.ordered()) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("%s: op %d is an affine or user op, which only cfxScan and cfxExScan take", c.name,
                                     c.op));
    }
    return Status();
  }
  if (c.op == ncclAvg) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: ncclAvg has no prefix meaning; use ncclSum and divide by "
                                                          "the rank's position + 1", c.name));
  }
  if (!op.ordered() && op.preMultiply) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: a PreMulSum op has no prefix meaning; scale the inputs "
                                                          "and use ncclSum", c.name));
  }
  if (op.combine == ReduceOp::Combine::Affine && c.count % op.groupElems() != 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("%s: count %zu is not a whole number of the affine op's groups of %zu elements "
                                   "(%u decays and a %u x %u state)",
                                   c.name, c.count, op.groupElems(), op.scalarDecay ? 1u : op.rows, op.rows, op.cols));
  }
  if (op.combine == ReduceOp::Combine::User) {
    if (c.count % op.unitElems != 0) {
      return Status::error(Errc::InvalidArgument, strprintf("%s: count %zu is not a whole number of the user op's "
                                                            "units of %u elements", c.name, c.count, op.unitElems));
    }
    if (cuda::driver() != nullptr && ((c.sendbuff != nullptr && cuda::classify(c.sendbuff).kind != cuda::MemKind::Host) ||
                                      (c.recvbuff != nullptr && cuda::classify(c.recvbuff).kind != cuda::MemKind::Host))) {
      return Status::error(Errc::InvalidArgument, strprintf("%s: a user op runs on the host: it takes host buffers, "
                                                            "not device memory", c.name));
    }
    if (static_cast<size_t>(op.unitElems) * dataTypeSize(op.type) > comm.sliceBytes()) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("%s: the user op's unit of %zu bytes does not fit this communicator's FIFO slot "
                                     "of %zu bytes", c.name, static_cast<size_t>(op.unitElems) * dataTypeSize(op.type),
                                     comm.sliceBytes()));
    }
  }
  return Status();
}

}  // namespace cfx::api

using cfx::strprintf;
using cfx::api::rawEnum;
using cfx::coll::Collective;

CFX_API ncclResult_t cfxScan(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxScan", [&] {
    return cfx::api::submitCollective({"cfxScan", Collective::Scan, sendbuff, recvbuff, count, rawEnum(datatype),
                                       rawEnum(op), -1, comm, stream, true});
  });
}

CFX_API ncclResult_t cfxExScan(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return cfx::api::call("cfxExScan", [&] {
    cfx::api::CollCall c{"cfxExScan", Collective::Scan, sendbuff, recvbuff, count, rawEnum(datatype),
                         rawEnum(op), -1, comm, stream, true};
    c.exclusive = true;
    return cfx::api::submitCollective(c);
  });
}

CFX_API ncclResult_t cfxRedOpCreateAffine(ncclRedOp_t* op, int rows, int cols, int scalarDecay, ncclDataType_t datatype,
                                         ncclComm_t comm) {
  return cfx::api::call("cfxRedOpCreateAffine", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    const int type = rawEnum(datatype);
    CFX_TRY(cfx::api::checkDataType(type));
    if (op == nullptr) return cfx::Status::error(cfx::Errc::InvalidArgument, "cfxRedOpCreateAffine: op is NULL");
    if (type != ncclFloat32 && type != ncclFloat16 && type != ncclBfloat16) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                strprintf("cfxRedOpCreateAffine: an affine op takes fp32, bf16 or fp16, not datatype %d",
                                          type));
    }
    if (rows < 1 || cols < 1) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                strprintf("cfxRedOpCreateAffine: rows %d and cols %d must be at least 1", rows, cols));
    }
    const size_t group = (scalarDecay ? 1 : static_cast<size_t>(rows)) + static_cast<size_t>(rows) * static_cast<size_t>(cols);
    if (group > cfx::api::kMaxGroupElems) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                strprintf("cfxRedOpCreateAffine: a group of %zu elements (at most 2^24)", group));
    }
    cfx::core::UserRedOp user;
    user.kind = cfx::core::UserRedOp::Kind::Affine;
    user.type = static_cast<cfx::DataType>(type);
    user.rows = static_cast<uint32_t>(rows);
    user.cols = static_cast<uint32_t>(cols);
    user.scalarDecay = scalarDecay != 0;
    *op = static_cast<ncclRedOp_t>(c->addRedOp(user));
    return cfx::Status();
  });
}

CFX_API ncclResult_t cfxRedOpCreateUser(ncclRedOp_t* op, cfxUserOpFn fn, void* ctx, size_t unitElems, int commutative,
                                       ncclDataType_t datatype, ncclComm_t comm) {
  return cfx::api::call("cfxRedOpCreateUser", [&]() -> cfx::Status {
    CFX_TRY_ASSIGN(cfx::core::Communicator * c, cfx::api::checkComm(comm));
    const int type = rawEnum(datatype);
    CFX_TRY(cfx::api::checkDataType(type));
    if (op == nullptr || fn == nullptr) {
      return cfx::Status::error(cfx::Errc::InvalidArgument, "cfxRedOpCreateUser: op and fn must not be NULL");
    }
    const size_t unitBytes = unitElems * cfx::dataTypeSize(static_cast<cfx::DataType>(type));
    if (unitElems < 1 || unitElems > (size_t{1} << 30) || unitBytes > c->sliceBytes()) {
      return cfx::Status::error(cfx::Errc::InvalidArgument,
                                strprintf("cfxRedOpCreateUser: a unit of %zu elements must be at least 1 and fit this "
                                          "communicator's FIFO slot of %zu bytes",
                                          unitElems, c->sliceBytes()));
    }
    (void)commutative;  // every algorithm keeps rank order: a commutative op gains nothing from saying so
    cfx::core::UserRedOp user;
    user.kind = cfx::core::UserRedOp::Kind::User;
    user.type = static_cast<cfx::DataType>(type);
    user.fn = reinterpret_cast<cfx::UserCombineFn>(fn);
    user.ctx = ctx;
    user.unitElems = static_cast<uint32_t>(unitElems);
    *op = static_cast<ncclRedOp_t>(c->addRedOp(user));
    return cfx::Status();
  });
}
