// SPDX-License-Identifier: Apache-2.0
// Argument checks and error reporting shared by every exported function (api layer).
#include "api/api_call.h"

#include "common/cuda_driver.h"

namespace cfx::api {

void report(const char* apiName, const Status& st) {
  // The WARN carries the error's origin as its location, as NCCL's WARN names the line that found the problem;
  // the CFX_TRY frames it passed through follow at INFO.
  const auto& frames = st.frames();
  log::write(log::Level::Warn, log::Sys::Init, frames.front(), "%s: %s (%s)", apiName, st.message().c_str(),
             errcName(st.code()));
  for (size_t i = 1; i < frames.size(); ++i) {
    const char* file = frames[i].file_name();
    const char* rel = std::strstr(file, "/src/");
    CFX_INFO(log::Sys::Init, "%s:%u -> %d", rel ? rel + 5 : file, static_cast<unsigned>(frames[i].line()),
             static_cast<int>(toResult(st.code())));
  }
}

Result<core::Communicator*> checkComm(ncclComm_t comm) {
  if (comm == nullptr) return Status::error(Errc::InvalidArgument, "comm is NULL");
  if (!core::isLiveComm(comm)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("comm %p is not a live communicator (already destroyed, or corrupted)",
                                   static_cast<void*>(comm)));
  }
  return unchecked(comm);
}

Status checkDataType(int type) {
  if (type < 0 || type >= ncclNumTypes) {
    return Status::error(Errc::InvalidArgument, strprintf("invalid datatype %d (valid: 0..%d)", type, ncclNumTypes - 1));
  }
  return Status();
}

Result<ReduceOp> checkRedOp(core::Communicator& comm, int op, int type, const void** deviceScalar) {
  if (deviceScalar != nullptr) *deviceScalar = nullptr;
  const auto dt = static_cast<DataType>(type);
  const int o = op;
  if (o >= 0 && o < ncclNumOps) return ReduceOp::builtin(dt, static_cast<RedOpKind>(o), comm.nRanks());
  const core::UserRedOp* user = comm.findRedOp(o);
  if (user == nullptr) {
    return Status::error(Errc::InvalidArgument, strprintf("invalid reduction op %d: neither built-in (0..%d) nor a live "
                                                          "op from ncclRedOpCreatePreMulSum on this communicator",
                                                          o, ncclNumOps - 1));
  }
  if (user->type != dt) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("Data type supplied to user-created ncclRedOp_t does not match type given to "
                                   "reduction operation (op %d was created for %s, used with %s)",
                                   o, dataTypeName(user->type), dataTypeName(dt)));
  }
  if (user->kind != core::UserRedOp::Kind::PreMulSum) {
    ReduceOp ordered;
    ordered.type = dt;
    ordered.combine = user->kind == core::UserRedOp::Kind::Affine ? ReduceOp::Combine::Affine : ReduceOp::Combine::User;
    ordered.rows = user->rows;
    ordered.cols = user->cols;
    ordered.scalarDecay = user->scalarDecay;
    ordered.userFn = user->fn;
    ordered.userCtx = user->ctx;
    ordered.unitElems = user->unitElems;
    return ordered;
  }
  // A device-resident scalar is read while the op runs: for GPU memory the core copies it in stream order; for
  // host memory "while the op runs" is now.
  if (user->deviceScalar && cuda::classify(user->scalarPtr).kind == cuda::MemKind::Device) {
    if (deviceScalar == nullptr) {
      return Status::error(Errc::InvalidUsage, "a PreMulSum op with its scalar in GPU memory needs a collective call");
    }
    *deviceScalar = user->scalarPtr;
    const unsigned char zero[8] = {};
    return ReduceOp::preMulSum(dt, zero);
  }
  return ReduceOp::preMulSum(dt, user->deviceScalar ? user->scalarPtr : user->scalar);
}

Status checkRoot(const core::Communicator& comm, int root, const char* what) {
  if (root < 0 || root >= comm.nRanks()) {
    return Status::error(Errc::InvalidArgument, strprintf("%s : invalid root %d (root should be in the 0..%d range)",
                                                          what, root, comm.nRanks() - 1));
  }
  return Status();
}

Result<size_t> checkedBytes(const char* call, const char* what, size_t count, int type, size_t multiple) {
  const size_t typeBytes = dataTypeSize(static_cast<DataType>(type));
  size_t elements = 0;
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, multiple, &elements) || __builtin_mul_overflow(elements, typeBytes, &bytes) ||
      bytes > kMaxBufferBytes) {
    const std::string times = multiple == 1 ? std::string() : strprintf(" x %zu ranks", multiple);
    return Status::error(Errc::InvalidArgument,
                         strprintf("%s: %s of count %zu%s x %zu-byte %s is larger than any buffer can be (at most "
                                   "%llu bytes): a negative or uninitialized count?",
                                   call, what, count, times.c_str(), typeBytes,
                                   dataTypeName(static_cast<DataType>(type)),
                                   static_cast<unsigned long long>(kMaxBufferBytes)));
  }
  return bytes;
}

Status checkByteRange(const char* call, const char* what, const void* p, size_t bytes) {
  if (bytes == 0) return Status();
  if (p == nullptr) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: %s is NULL with %zu bytes", call, what, bytes));
  }
  uintptr_t end = 0;
  if (bytes > kMaxBufferBytes || __builtin_add_overflow(reinterpret_cast<uintptr_t>(p), bytes, &end)) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: %s at %p with %zu bytes runs past the end of the "
                                                          "address space",
                                                          call, what, p, bytes));
  }
  return Status();
}

Result<size_t> checkBufferBytes(const char* call, const char* what, const void* p, size_t count, int type,
                                size_t multiple) {
  CFX_TRY_ASSIGN(const size_t bytes, checkedBytes(call, what, count, type, multiple));
  if (p == nullptr && bytes > 0) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: %s is NULL with count %zu", call, what, count));
  }
  CFX_TRY(checkByteRange(call, what, p, bytes));
  return bytes;
}

}  // namespace cfx::api
