// SPDX-License-Identifier: Apache-2.0
// One collective call on its way in (api layer, internal): what every collective entry point hands to
// submitCollective, shared by the nccl* entry points (collectives_api.cc) and the compressed cfx* ones
// (compress_api.cc).
#pragma once

#include <memory>

#include "api/api_call.h"
#include "collectives/collective.h"
#include "core/compress_state.h"
#include "core/group.h"

namespace cfx::api {

struct CollCall {
  const char* name;           // for messages: "ncclAllReduce"
  coll::Collective coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int type;                   // raw ncclDataType_t (see rawEnum)
  int op;                     // raw ncclRedOp_t; ignored unless reducing
  int root;                   // -1 unless rooted
  ncclComm_t comm;
  cudaStream_t stream;
  bool reducing;
  // cfx*Compressed: the caller's codec (its format may be None: plain); null: the communicator's default, if any.
  const core::CodecRequest* codec = nullptr;
  bool exclusive = false;  // cfxExScan
};

// Validates and records (in a group) or launches one collective.
Status submitCollective(const CollCall& c);

// checkComm for an operation: inside a group, a bad communicator fails the group like any other bad argument.
Result<core::Communicator*> checkOpComm(ncclComm_t handle);

// What every collective entry point does around its own validation: resolves the communicator, lets `build` validate
// the call and fill the op (kind Coll, comm and stream already set), and records or launches it. A refusal fails the
// group it is in, and on a membership communicator revokes it and becomes this member's outcome (every member waits
// for every member's outcome of a collective).
template <class Build>
Status submitOp(ncclComm_t handle, cudaStream_t stream, Build&& build) {
  CFX_TRY_ASSIGN(core::Communicator * comm, checkOpComm(handle));
  log::setThreadRank(comm->rank());
  bool submitted = false;
  Status st = [&]() -> Status {
    core::Op op;
    op.kind = core::Op::Kind::Coll;
    op.comm = comm;
    op.stream = stream;
    CFX_TRY(build(*comm, op));
    submitted = true;
    return core::submit(op);
  }();
  if (!st.ok() && !submitted && comm->agreesOutcomes() && core::groupDepth() == 0) {
    (void)comm->revoke();
    st = comm->agreeOutcome(st);
  }
  if (!st.ok()) core::noteGroupError(st);
  return st;
}

// The op's combine against the collective (scan_api.cc): ordered combines (affine, user) serve scans only; scans take
// no avg or PreMulSum; an affine op needs whole groups, a user op whole units, host buffers and a unit that fits a
// slot. InvalidArgument naming what is wrong.
Status checkScanOp(const CollCall& c, const core::Communicator& comm, const ReduceOp& op);

// The codec arguments the op carries: c.codec validated for its datatype and op (InvalidArgument naming the
// problem), or the communicator's default where it can carry the op (fp32, bf16 or fp16; sum or avg), or null.
Result<std::shared_ptr<const coll::CompressArgs>> codecFor(const CollCall& c, core::Communicator& comm);

}  // namespace cfx::api
