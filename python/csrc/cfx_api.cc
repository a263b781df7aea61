// SPDX-License-Identifier: Apache-2.0
// Resolves the Conflux C calls of the torch backend with dlopen/dlsym (see cfx_api.h).
#include "cfx_api.h"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>

#include <c10/util/Exception.h>

namespace cfx::torchext {
namespace {

Api gApi;
std::string gPath;
std::once_flag gOnce;

template <typename F>
void resolve(void* handle, const char* name, F& slot) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    throw std::runtime_error("conflux: " + gPath + " has no " + name + " (not Conflux, or an older release)");
  }
  slot = reinterpret_cast<F>(sym);
}

void load(const std::string& path) {
  gPath = path;
  // RTLD_LOCAL: the ctypes binding opened the same file the same way, so the process holds one copy of it.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("conflux: cannot load " + path + ": " + (why ? why : "unknown error"));
  }
  resolve(handle, "ncclGetUniqueId", gApi.getUniqueId);
  resolve(handle, "ncclCommInitRank", gApi.commInitRank);
  resolve(handle, "ncclCommSplit", gApi.commSplit);
  resolve(handle, "ncclCommDestroy", gApi.commDestroy);
  resolve(handle, "ncclCommAbort", gApi.commAbort);
  resolve(handle, "ncclCommRevoke", gApi.commRevoke);
  resolve(handle, "ncclCommGetAsyncError", gApi.commGetAsyncError);
  resolve(handle, "ncclCommCount", gApi.commCount);
  resolve(handle, "ncclCommUserRank", gApi.commUserRank);
  resolve(handle, "ncclGetErrorString", gApi.getErrorString);
  resolve(handle, "ncclGetLastError", gApi.getLastError);
  resolve(handle, "ncclAllReduce", gApi.allReduce);
  resolve(handle, "ncclBroadcast", gApi.broadcast);
  resolve(handle, "ncclReduce", gApi.reduce);
  resolve(handle, "ncclAllGather", gApi.allGather);
  resolve(handle, "ncclReduceScatter", gApi.reduceScatter);
  resolve(handle, "ncclAlltoAll", gApi.alltoAll);
  resolve(handle, "ncclGather", gApi.gather);
  resolve(handle, "ncclScatter", gApi.scatter);
  resolve(handle, "ncclSend", gApi.send);
  resolve(handle, "ncclRecv", gApi.recv);
  resolve(handle, "ncclGroupStart", gApi.groupStart);
  resolve(handle, "ncclGroupEnd", gApi.groupEnd);
  resolve(handle, "cfxHostStreamCreate", gApi.hostStreamCreate);
  resolve(handle, "cfxHostStreamQuery", gApi.hostStreamQuery);
  resolve(handle, "cfxHostStreamSynchronize", gApi.hostStreamSynchronize);
  resolve(handle, "cfxHostStreamDestroy", gApi.hostStreamDestroy);
  resolve(handle, "cfxCommGetFailures", gApi.commGetFailures);
  resolve(handle, "cfxCodecParse", gApi.codecParse);
  resolve(handle, "cfxCommSetCodec", gApi.commSetCodec);
  resolve(handle, "cfxCommGetCompressStats", gApi.commGetCompressStats);
  resolve(handle, "ncclMemAlloc", gApi.memAlloc);
  resolve(handle, "ncclMemFree", gApi.memFree);
}

const char* resultName(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "unknown ncclResult_t";
  }
}

}  // namespace

const Api& loadApi(const std::string& path) {
  std::call_once(gOnce, [&] { load(path); });
  if (path != gPath) {
    throw std::runtime_error("conflux: the backend already uses " + gPath + "; it cannot also load " + path);
  }
  return gApi;
}

const Api& api() { return gApi; }

std::string describe(const char* call, ncclResult_t rc) {
  std::string text = std::string(call) + " failed: " + resultName(rc);
  const char* warn = gApi.getLastError != nullptr ? gApi.getLastError(nullptr) : nullptr;
  if (warn != nullptr && *warn != '\0') return text + ": " + warn;
  return text + " (" + gApi.getErrorString(rc) + ")";
}

void check(ncclResult_t rc, const char* call) {
  TORCH_CHECK(rc == ncclSuccess, "conflux: ", describe(call, rc));
}

}  // namespace cfx::torchext
