// SPDX-License-Identifier: Apache-2.0
// The Conflux C calls the torch backend makes, resolved at run time from the library the `conflux` Python package
// located (CFX_LIBRARY, the checkout's build, or the installed one), so the extension never links libnccl.so.2 and
// the package and the backend always bind the same file.
#pragma once

#include <string>

#include "conflux.h"

namespace cfx::torchext {

struct Api {
  decltype(&::ncclGetUniqueId) getUniqueId;
  decltype(&::ncclCommInitRank) commInitRank;
  decltype(&::ncclCommSplit) commSplit;
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclCommAbort) commAbort;
  decltype(&::ncclCommRevoke) commRevoke;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError;
  decltype(&::ncclCommCount) commCount;
  decltype(&::ncclCommUserRank) commUserRank;
  decltype(&::ncclGetErrorString) getErrorString;
  decltype(&::ncclGetLastError) getLastError;
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclReduce) reduce;
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclReduceScatter) reduceScatter;
  decltype(&::ncclAlltoAll) alltoAll;
  decltype(&::ncclGather) gather;
  decltype(&::ncclScatter) scatter;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
  decltype(&::cfxHostStreamCreate) hostStreamCreate;
  decltype(&::cfxHostStreamQuery) hostStreamQuery;
  decltype(&::cfxHostStreamSynchronize) hostStreamSynchronize;
  decltype(&::cfxHostStreamDestroy) hostStreamDestroy;
  decltype(&::cfxCommGetFailures) commGetFailures;
  decltype(&::cfxCodecParse) codecParse;
  decltype(&::cfxCommSetCodec) commSetCodec;
  decltype(&::cfxCommGetCompressStats) commGetCompressStats;
  decltype(&::ncclMemAlloc) memAlloc;
  decltype(&::ncclMemFree) memFree;
};

// Loads the library at `path` once per process (later calls must name the same file) and resolves every call.
// Throws std::runtime_error naming the path and the first missing symbol.
const Api& loadApi(const std::string& path);
// The table loadApi filled; loadApi must have succeeded before.
const Api& api();

// "<call> failed: <ncclResult name>: <the library's last WARN>" (or the code's description when no WARN).
std::string describe(const char* call, ncclResult_t rc);
// Throws a c10::Error (a RuntimeError in Python) with describe()'s text unless rc is ncclSuccess.
void check(ncclResult_t rc, const char* call);

}  // namespace cfx::torchext
