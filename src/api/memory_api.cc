// SPDX-License-Identifier: Apache-2.0
// Memory allocation, buffer registration and user reduction ops (api layer).
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "api/api_call.h"
#include "common/cuda_driver.h"
#include "conflux.h"
#include "core/group.h"
#include "core/memory.h"

namespace cfx::api {
namespace {

// Registration handles: opaque records so Deregister can tell a live handle from garbage.
struct Registration {
  const void* comm;
  void* buff;
  size_t bytes;
  bool window;
};
std::mutex gRegMutex;
std::map<void*, Registration*>& registrations() {
  static auto* m = new std::map<void*, Registration*>();
  return *m;
}

Status registerBuffer(ncclComm_t comm, void* buff, size_t size, void** handle, bool window) {
  CFX_TRY(checkComm(comm).status());
  if (handle == nullptr) return Status::error(Errc::InvalidArgument, "handle is NULL");
  CFX_TRY(checkByteRange(window ? "ncclCommWindowRegister" : "ncclCommRegister", "buff", buff, size));
  auto* reg = new Registration{comm, buff, size, window};
  std::lock_guard<std::mutex> lock(gRegMutex);
  registrations()[reg] = reg;
  *handle = reg;
  return Status();
}

Status deregisterBuffer(ncclComm_t comm, void* handle, bool window) {
  CFX_TRY(checkComm(comm).status());
  std::lock_guard<std::mutex> lock(gRegMutex);
  auto it = registrations().find(handle);
  if (it == registrations().end() || it->second->comm != comm || it->second->window != window) {
    return Status::error(Errc::InvalidArgument, strprintf("%p is not a live registration of comm %p", handle,
                                                          static_cast<void*>(comm)));
  }
  delete it->second;
  registrations().erase(it);
  return Status();
}

}  // namespace
}  // namespace cfx::api

using namespace cfx;  // NOLINT(google-build-using-namespace): this file is only C entry points

CFX_API ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return api::call("ncclMemAlloc", [&]() -> Status {
    if (ptr == nullptr) return Status::error(Errc::InvalidArgument, "ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return Status();
    if (size > api::kMaxBufferBytes) {
      return Status::error(Errc::InvalidArgument, strprintf("ncclMemAlloc: size %zu is larger than any buffer can "
                                                            "be (a negative or uninitialized size?)",
                                                            size));
    }
    CFX_TRY_ASSIGN(*ptr, core::allocMemory(size));
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclMemAlloc)

CFX_API ncclResult_t pncclMemFree(void* ptr) {
  return api::call("ncclMemFree", [&]() -> Status {
    if (ptr == nullptr) return Status();
    return core::freeMemory(ptr);
  });
}
CFX_NCCL_ALIAS(ncclMemFree)

CFX_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return api::call("ncclCommRegister", [&] { return api::registerBuffer(comm, buff, size, handle, false); });
}
CFX_NCCL_ALIAS(ncclCommRegister)

CFX_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return api::call("ncclCommDeregister", [&] { return api::deregisterBuffer(comm, handle, false); });
}
CFX_NCCL_ALIAS(ncclCommDeregister)

CFX_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  return api::call("ncclCommWindowRegister", [&]() -> Status {
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
      return Status::error(Errc::InvalidArgument, strprintf("invalid winFlags 0x%x", winFlags));
    }
    if (win == nullptr) return Status::error(Errc::InvalidArgument, "win is NULL");
    void* handle = nullptr;
    CFX_TRY(api::registerBuffer(comm, buff, size, &handle, true));
    *win = static_cast<ncclWindow_t>(handle);
    // A symmetric window is mapped by every rank (zero-copy collectives; core::Communicator::registerWindow): a
    // collective step, deferred to ncclGroupEnd inside a group like communicator creation. Other windows are
    // registered here only: nothing promises their offsets match across ranks. On a non-blocking communicator the
    // step runs in the background and the call (or ncclGroupEnd) returns ncclInProgress, as NCCL's does: one thread
    // can then register on several such communicators in turn, which a blocking registration would deadlock.
    if (winFlags != NCCL_WIN_COLL_SYMMETRIC) return Status();
    core::Communicator* c = api::checkComm(comm).value();
    return core::submitInit(
        [c, handle, buff, size] {
          log::setThreadRank(c->rank());  // inside a group this runs on a thread of its own
          return c->config().blocking ? c->registerWindow(handle, buff, size)
                                      : c->registerWindowAsync(handle, buff, size);
        },
        c);
  });
}
CFX_NCCL_ALIAS(ncclCommWindowRegister)

CFX_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return api::call("ncclCommWindowDeregister", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    CFX_TRY(c->checkNoWindowSetup());  // the window may be the one being mapped, which would then outlive this
    CFX_TRY(api::deregisterBuffer(comm, win, true));
    c->deregisterWindow(win);
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommWindowDeregister)

CFX_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                               ncclScalarResidence_t residence, ncclComm_t comm) {
  return api::call("ncclRedOpCreatePreMulSum", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    const int type = api::rawEnum(datatype);
    const int where = api::rawEnum(residence);
    CFX_TRY(api::checkDataType(type));
    if (op == nullptr || scalar == nullptr) return Status::error(Errc::InvalidArgument, "op or scalar is NULL");
    if (where != ncclScalarDevice && where != ncclScalarHostImmediate) {
      return Status::error(Errc::InvalidArgument, strprintf("invalid scalar residence %d", where));
    }
    core::UserRedOp user;
    user.type = static_cast<DataType>(type);
    if (where == ncclScalarHostImmediate) {
      std::memcpy(user.scalar, scalar, dataTypeSize(user.type));
    } else {
      user.deviceScalar = true;  // host memory here: dereferenced when the op runs, as NCCL does on the device
      user.scalarPtr = scalar;
    }
    *op = static_cast<ncclRedOp_t>(c->addRedOp(user));
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

CFX_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return api::call("ncclRedOpDestroy", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    const int o = api::rawEnum(op);
    if (o < ncclNumOps) return Status::error(Errc::InvalidArgument, strprintf("ncclRedOpDestroy: op %d is built-in", o));
    if (!c->removeRedOp(o)) {
      return Status::error(Errc::InvalidArgument, strprintf("ncclRedOpDestroy: op %d is not a live user op of this "
                                                            "communicator", o));
    }
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclRedOpDestroy)

// Host streams (conflux.h)

CFX_API ncclResult_t cfxHostStreamCreate(cfxHostStream_t* stream) {
  return api::call("cfxHostStreamCreate", [&]() -> Status {
    if (stream == nullptr) return Status::error(Errc::InvalidArgument, "stream is NULL");
    *stream = reinterpret_cast<cfxHostStream_t>(core::createHostStream());
    return Status();
  });
}

namespace {
Result<core::HostStream*> checkStream(cfxHostStream_t stream) {
  core::HostStream* hs = core::findHostStream(stream);
  if (hs == nullptr) {
    return Status::error(Errc::InvalidArgument, strprintf("%p is not a live cfx host stream", static_cast<void*>(stream)));
  }
  return hs;
}
}  // namespace

CFX_API ncclResult_t cfxHostStreamQuery(cfxHostStream_t stream) {
  return api::call("cfxHostStreamQuery", [&]() -> Status {
    CFX_TRY_ASSIGN(core::HostStream * hs, checkStream(stream));
    return hs->query();
  });
}

CFX_API ncclResult_t cfxHostStreamSynchronize(cfxHostStream_t stream) {
  return api::call("cfxHostStreamSynchronize", [&]() -> Status {
    CFX_TRY_ASSIGN(core::HostStream * hs, checkStream(stream));
    return hs->synchronize();
  });
}

CFX_API ncclResult_t cfxHostStreamDestroy(cfxHostStream_t stream) {
  return api::call("cfxHostStreamDestroy", [&]() -> Status {
    if (stream == nullptr) return Status();  // as documented in conflux.h
    CFX_TRY_ASSIGN(core::HostStream * hs, checkStream(stream));
    return core::destroyHostStream(hs);
  });
}
