// SPDX-License-Identifier: Apache-2.0
// Shared-state entry points: cfxSharedStateSync and cfxStateHash (api layer).
#include <vector>

#include "api/api_call.h"
#include "common/cuda_driver.h"
#include "conflux.h"
#include "core/group.h"
#include "core/state_sync.h"

namespace cfx::api {
namespace {

Result<std::vector<core::StateBuffer>> checkEntries(const char* call, const cfxStateEntry* entries, int nEntries) {
  if (nEntries < 0) return Status::error(Errc::InvalidArgument, strprintf("nEntries is %d", nEntries));
  if (nEntries > 0 && entries == nullptr) return Status::error(Errc::InvalidArgument, "entries is NULL");
  std::vector<core::StateBuffer> out;
  out.reserve(static_cast<size_t>(nEntries));
  for (int i = 0; i < nEntries; ++i) {
    const cfxStateEntry& e = entries[i];
    const int type = rawEnum(e.datatype);
    CFX_TRY(checkDataType(type));
    const std::string what = strprintf("entries[%d].buffer", i);
    CFX_TRY_ASSIGN(const size_t bytes, checkBufferBytes(call, what.c_str(), e.buffer, e.count, type));
    if (e.count > 0 && cuda::classify(e.buffer).kind != cuda::MemKind::Host) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("entries[%d].buffer is GPU memory: cfxSharedStateSync supports host memory only "
                                     "so far; stage the state in host memory",
                                     i));
    }
    out.push_back(core::StateBuffer{e.buffer, bytes, type});
  }
  return out;
}

}  // namespace
}  // namespace cfx::api

using namespace cfx;  // NOLINT(google-build-using-namespace): this file is only C entry points

CFX_API ncclResult_t cfxSharedStateSync(ncclComm_t comm, const cfxStateEntry* entries, int nEntries,
                                        cfxStateSyncInfo* info) {
  return api::call("cfxSharedStateSync", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    log::setThreadRank(c->rank());
    CFX_TRY_ASSIGN(std::vector<core::StateBuffer> buffers, api::checkEntries("cfxSharedStateSync", entries, nEntries));
    if (core::groupDepth() > 0) {
      return Status::error(Errc::InvalidUsage, "cfxSharedStateSync must be called outside ncclGroupStart/ncclGroupEnd");
    }
    CFX_TRY(c->checkUsable());
    CFX_TRY_ASSIGN(core::StateSyncOutcome out, core::syncSharedState(*c, buffers));
    if (info != nullptr) {
      info->hash[0] = out.hash.low;
      info->hash[1] = out.hash.high;
      info->replaced = out.replaced ? 1 : 0;
      info->sourceRank = out.source;
      info->nOutdated = out.outdated;
      info->bytesReceived = out.bytesReceived;
    }
    return Status();
  });
}

CFX_API ncclResult_t cfxStateHash(const cfxStateEntry* entries, int nEntries, unsigned long long hash[2]) {
  return api::call("cfxStateHash", [&]() -> Status {
    if (hash == nullptr) return Status::error(Errc::InvalidArgument, "hash is NULL");
    CFX_TRY_ASSIGN(std::vector<core::StateBuffer> buffers, api::checkEntries("cfxStateHash", entries, nEntries));
    const ft::StateHash h = core::hashState(buffers);
    hash[0] = h.low;
    hash[1] = h.high;
    return Status();
  });
}
