// SPDX-License-Identifier: Apache-2.0
// The boundary between the C ABI and C++ (api layer): every exported function body is api::call(...), so no
// exception crosses extern "C", every failure is logged once at WARN, and Status maps to ncclResult_t by cast.
#pragma once

#include <cstring>
#include <new>
#include <stdexcept>

#include "api/api_exports.h"
#include "common/log.h"
#include "common/status.h"
#include "common/types.h"
#include "core/communicator.h"
#include "nccl.h"

namespace cfx::api {

static_assert(static_cast<int>(Errc::Ok) == ncclSuccess);
static_assert(static_cast<int>(Errc::UnhandledCudaError) == ncclUnhandledCudaError);
static_assert(static_cast<int>(Errc::SystemError) == ncclSystemError);
static_assert(static_cast<int>(Errc::InternalError) == ncclInternalError);
static_assert(static_cast<int>(Errc::InvalidArgument) == ncclInvalidArgument);
static_assert(static_cast<int>(Errc::InvalidUsage) == ncclInvalidUsage);
static_assert(static_cast<int>(Errc::RemoteError) == ncclRemoteError);
static_assert(static_cast<int>(Errc::InProgress) == ncclInProgress);
static_assert(static_cast<int>(DataType::Fp8E5M2) == ncclFloat8e5m2 && kNumDataTypes == ncclNumTypes);
static_assert(static_cast<int>(RedOpKind::Avg) == ncclAvg && core::Communicator::kFirstUserOp == ncclNumOps);

// Logs a failure once (WARN with the origin, the CFX_TRY trail at INFO). InProgress is a state, not an error.
void report(const char* apiName, const Status& st);

// 2.28 callers know no ncclTimeout: a timeout is reported as ncclRemoteError (the WARN says "timeout").
inline ncclResult_t toResult(Errc code) {
  return code == Errc::Timeout ? ncclRemoteError : static_cast<ncclResult_t>(code);
}

template <typename Fn>
ncclResult_t call(const char* apiName, Fn&& body) noexcept {
  Status st;
  try {
    st = body();
  } catch (const std::bad_alloc&) {
    st = Status::error(Errc::SystemError, "out of host memory");
  } catch (const std::exception& e) {
    st = Status::error(Errc::InternalError, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    st = Status::error(Errc::InternalError, "unexpected non-standard exception");
  }
  if (!st.ok() && st.code() != Errc::InProgress) report(apiName, st);
  return toResult(st.code());
}

// Resolves a handle, rejecting NULL, destroyed and garbage communicators without dereferencing them.
Result<core::Communicator*> checkComm(ncclComm_t comm);
inline core::Communicator* unchecked(ncclComm_t comm) { return reinterpret_cast<core::Communicator*>(comm); }
inline ncclComm_t toHandle(core::Communicator* comm) { return reinterpret_cast<ncclComm_t>(comm); }

// A C caller may pass any int where an enum is declared (bad-input tests do). Loading such a value as the
// C++ enum type is undefined behaviour, so entry points read enum parameters through this, as raw bytes.
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

Status checkDataType(int type);
// Resolves a built-in or user op for `type` (already checked) into its executable form.
// The executable form of `op`; for a PreMulSum whose scalar lives in GPU memory, *deviceScalar gets that pointer
// (the scalar is then read in stream order when the op runs) and the returned op's scalar is a placeholder.
Result<ReduceOp> checkRedOp(core::Communicator& comm, int op, int type, const void** deviceScalar);
Status checkRoot(const core::Communicator& comm, int root, const char* what);

// ---- sizes: every op entry point (nccl* and cfx*) sizes its buffers through these ----------------------------

// The largest buffer an op may name: no process maps more (user address spaces are 47 or 48 bits, 56 with
// five-level paging, where no single buffer comes near it), so a larger size is a wrapped count, not data.
inline constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 48;

// The bytes of `count` x `multiple` elements of `type` (checked with checkDataType first): InvalidArgument naming
// `call` and `what` when the product overflows or exceeds kMaxBufferBytes. `multiple` is nRanks for the buffers
// that hold one block per rank (all-gather's output, reduce-scatter's input, ...), else 1 (0: the rank passes no
// buffer).
Result<size_t> checkedBytes(const char* call, const char* what, size_t count, int type, size_t multiple = 1);
// checkedBytes for a buffer at `p`, which must also be non-NULL when the size is not 0 and must not run past the
// end of the address space.
Result<size_t> checkBufferBytes(const char* call, const char* what, const void* p, size_t count, int type,
                                size_t multiple = 1);
// The same for a size already in bytes (ncclCommRegister, ncclMemAlloc).
Status checkByteRange(const char* call, const char* what, const void* p, size_t bytes);

}  // namespace cfx::api
