// SPDX-License-Identifier: Apache-2.0
// Communicator lifecycle and query entry points (api layer).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api/api_call.h"
#include "api/config_api.h"
#include "cfx_config.h"
#include "common/cuda_driver.h"
#include "common/launch_env.h"
#include "common/param.h"
#include "conflux.h"
#include "core/device_direct.h"
#include "core/group.h"
#include "core/lifecycle.h"

namespace cfx::api {

namespace {

Status validateInitArgs(ncclComm_t* comm, int nranks, int rank) {
  if (comm == nullptr) return Status::error(Errc::InvalidArgument, "comm pointer is NULL");
  if (nranks < 1) return Status::error(Errc::InvalidArgument, strprintf("invalid nranks %d (must be >= 1)", nranks));
  if (rank < 0 || rank >= nranks) {
    return Status::error(Errc::InvalidArgument, strprintf("invalid rank %d (must be in 0..%d)", rank, nranks - 1));
  }
  return Status();
}

void logInit(core::Communicator* c, const char* what) {
  CFX_INFO(log::Sys::Init, "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - %s",
           static_cast<void*>(c), c->rank(), c->nRanks(), c->cudaDev(), -1, 0ul,
           static_cast<unsigned long long>(c->commHash()), what);
}

// The calling thread's current CUDA context (null without a driver or a context).
cuda::CUcontext currentContext() {
  cuda::CUcontext ctx = nullptr;
  if (const cuda::Driver* d = cuda::driver(); d == nullptr || d->ctxGetCurrent(&ctx) != cuda::kSuccess) return nullptr;
  return ctx;
}

// Creates a communicator the NCCL way: blocking (possibly deferred to ncclGroupEnd) or non-blocking. It binds to the
// device of `ctx`, by default the calling thread's current one read now: NCCL reads the device at the call, also when
// a group defers the creation to ncclGroupEnd (which runs it on a thread of its own).
Status initRank(ncclComm_t* newcomm, int nranks, const transport::UniqueId& id, int rank, const ncclConfig_t* config,
                cuda::CUcontext ctx) {
  CFX_TRY(validateInitArgs(newcomm, nranks, rank));
  log::printVersionOnce();
  CFX_TRY_ASSIGN(core::CommConfig cfg, parseConfig(config));
  const core::CommOptions options = core::CommOptions::fromParams();
  if (!cfg.blocking) {
    // Non-blocking: the handle exists at once and reports ncclInProgress until every rank has joined.
    auto pending = core::Communicator::createPending(rank, nranks, cfg);
    core::Communicator* c = pending.release();
    core::registerComm(c);
    *newcomm = toHandle(c);
    return core::submitInit([c, id, options]() -> Status {
      c->startAsyncInit(id, options);
      return Status::error(Errc::InProgress, "non-blocking initialization started");
    });
  }
  *newcomm = nullptr;
  return core::submitInit([newcomm, nranks, rank, id, cfg, options, ctx]() -> Status {
    log::setThreadRank(rank);
    const cuda::ScopedContext scope(ctx);
    CFX_TRY_ASSIGN(auto comm, core::Communicator::create(id, rank, nranks, cfg, options));
    core::Communicator* c = comm.release();
    core::registerComm(c);
    logInit(c, "Init COMPLETE");
    *newcomm = toHandle(c);
    return Status();
  });
}

Status initRank(ncclComm_t* newcomm, int nranks, const ncclUniqueId& commId, int rank, const ncclConfig_t* config,
                cuda::CUcontext ctx = currentContext()) {
  CFX_TRY(validateInitArgs(newcomm, nranks, rank));  // the caller's own numbers first, then the id's bytes
  CFX_TRY_ASSIGN(transport::UniqueId id,
                 transport::UniqueId::decode(reinterpret_cast<const uint8_t*>(commId.internal)));
  return initRank(newcomm, nranks, id, rank, config, ctx);
}

// ncclCommInitRankScalable's ids as one id for the bootstrap (UniqueId::allIds). The same id nId times (what
// ncclGetUniqueId returns under NCCL_COMM_ID) is one root; otherwise the ids must be distinct, and at most nranks.
Result<transport::UniqueId> scalableId(int nranks, int nId, const ncclUniqueId* commIds) {
  if (nId < 1 || commIds == nullptr) {
    return Status::error(Errc::InvalidArgument, strprintf("invalid nId %d or NULL commIds", nId));
  }
  std::vector<transport::UniqueId> ids;
  for (int i = 0; i < nId; ++i) {
    Result<transport::UniqueId> id = transport::UniqueId::decode(reinterpret_cast<const uint8_t*>(commIds[i].internal));
    if (!id.ok()) {
      return Status::error(id.status().code(), strprintf("commIds[%d]: %s", i, id.status().message().c_str()));
    }
    ids.push_back(std::move(*id));
  }
  const auto same = [&](int a, int b) {
    return std::memcmp(commIds[a].internal, commIds[b].internal, sizeof(commIds[a].internal)) == 0;
  };
  bool allSame = true;
  for (int i = 1; i < nId; ++i) allSame = allSame && same(0, i);
  if (allSame) return ids[0];
  for (int i = 0; i < nId; ++i) {
    for (int j = 0; j < i; ++j) {
      if (same(i, j) || ids[i].magic == ids[j].magic) {
        return Status::error(Errc::InvalidArgument,
                             strprintf("commIds[%d] and commIds[%d] are the same id: each of the nId roots needs an id "
                                       "of its own (one ncclGetUniqueId call each)",
                                       j, i));
      }
    }
  }
  if (nId > nranks) {
    return Status::error(Errc::InvalidArgument, strprintf("nId %d exceeds nranks %d: every id's root serves at least "
                                                          "one rank, so pass at most nranks ids",
                                                          nId, nranks));
  }
  transport::UniqueId id = ids[0];
  id.allIds = std::move(ids);
  return id;
}

Result<transport::UniqueId> idFromCommId(const transport::BootstrapParams& bp) {
  CFX_TRY_ASSIGN(const std::string secret, transport::launchSecret(bp));
  return transport::uniqueIdFromAddress(bp.commId, secret, /*startRoot=*/true);
}

void destroyComm(core::Communicator* c, const char* what) {
  log::setThreadRank(c->rank());
  core::unregisterComm(c);
  // Formatted before the delete: the pointer is only an identity in the line, never dereferenced after.
  const std::string line = strprintf("comm %p rank %d nranks %d cudaDev %d busId %lx - %s COMPLETE",
                                     static_cast<void*>(c), c->rank(), c->nRanks(), -1, 0ul, what);
  delete c;
  CFX_INFO(log::Sys::Init, "%s", line.c_str());
}

}  // namespace
}  // namespace cfx::api

using namespace cfx;  // NOLINT(google-build-using-namespace): this file is only C entry points

CFX_API ncclResult_t pncclGetVersion(int* version) {
  return api::call("ncclGetVersion", [&]() -> Status {
    if (version == nullptr) return Status::error(Errc::InvalidArgument, "version is NULL");
    *version = NCCL_VERSION_CODE;
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclGetVersion)

CFX_API ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  return api::call("ncclGetUniqueId", [&]() -> Status {
    if (uniqueId == nullptr) return Status::error(Errc::InvalidArgument, "uniqueId is NULL");
    log::printVersionOnce();
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    const transport::BootstrapParams bp = transport::readBootstrapParams();
    if (!bp.commId.empty()) {
      CFX_TRY_ASSIGN(transport::UniqueId id, api::idFromCommId(bp));
      id.encode(reinterpret_cast<uint8_t*>(uniqueId->internal));
      return Status();
    }
    CFX_TRY_ASSIGN(transport::UniqueId id, transport::createUniqueId(bp.options));
    id.encode(reinterpret_cast<uint8_t*>(uniqueId->internal));
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclGetUniqueId)

CFX_API ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return api::call("ncclCommInitRank", [&] { return api::initRank(comm, nranks, commId, rank, nullptr); });
}
CFX_NCCL_ALIAS(ncclCommInitRank)

CFX_API ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                             ncclConfig_t* config) {
  return api::call("ncclCommInitRankConfig", [&] { return api::initRank(comm, nranks, commId, rank, config); });
}
CFX_NCCL_ALIAS(ncclCommInitRankConfig)

CFX_API ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                               ncclUniqueId* commIds, ncclConfig_t* config) {
  return api::call("ncclCommInitRankScalable", [&]() -> Status {
    CFX_TRY(api::validateInitArgs(newcomm, nranks, myrank));
    // Rank r joins the root of id r * nId / nranks, and the roots combine their groups (transport/bootstrap).
    CFX_TRY_ASSIGN(const transport::UniqueId id, api::scalableId(nranks, nId, commIds));
    return api::initRank(newcomm, nranks, id, myrank, config, api::currentContext());
  });
}
CFX_NCCL_ALIAS(ncclCommInitRankScalable)

CFX_API ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return api::call("ncclCommInitAll", [&]() -> Status {
    if (comms == nullptr) return Status::error(Errc::InvalidArgument, "comms is NULL");
    if (ndev < 1) return Status::error(Errc::InvalidArgument, strprintf("invalid ndev %d", ndev));
    if (devlist) {
      for (int i = 0; i < ndev; ++i) {
        for (int j = 0; j < i; ++j) {
          if (devlist[i] == devlist[j]) {
            CFX_INFO(log::Sys::Init, "devlist names device %d twice: several ranks share it (allowed here)", devlist[i]);
          }
        }
      }
    }
    ncclUniqueId id;
    if (ncclResult_t r = pncclGetUniqueId(&id); r != ncclSuccess) {
      return Status::error(static_cast<Errc>(r), "ncclCommInitAll: could not create a unique id");
    }
    core::groupStart();
    Status first;
    for (int i = 0; i < ndev; ++i) {
      // As in NCCL, communicator i is on device devlist[i] (device i without a list).
      Status st = api::initRank(&comms[i], ndev, id, i, nullptr, cuda::primaryContext(devlist ? devlist[i] : i));
      if (!st.ok() && first.ok()) first = st;
    }
    Status end = core::groupEnd();
    return first.ok() ? end : first;
  });
}
CFX_NCCL_ALIAS(ncclCommInitAll)

CFX_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return api::call("ncclCommSplit", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * parent, api::checkComm(comm));
    if (newcomm == nullptr) return Status::error(Errc::InvalidArgument, "newcomm is NULL");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      return Status::error(Errc::InvalidArgument, strprintf("invalid color %d (must be >= 0 or NCCL_SPLIT_NOCOLOR)", color));
    }
    if (parent->asyncError() == Errc::InProgress || parent->windowSetupPending() || parent->finalized()) {
      return Status::error(Errc::InvalidUsage,
                           "parent communicator is initializing, registering a window (non-blocking) or finalized");
    }
    *newcomm = nullptr;
    CFX_TRY_ASSIGN(core::CommConfig cfg, api::parseConfig(config, &parent->config()));
    CFX_TRY_ASSIGN(auto child, core::splitComm(*parent, color, key, cfg, core::CommOptions::fromParams()));
    if (child) {
      core::Communicator* c = child.release();
      core::registerComm(c);
      CFX_INFO(log::Sys::Init, "comm %p rank %d nranks %d - Init COMPLETE (split of %p, color %d key %d)",
               static_cast<void*>(c), c->rank(), c->nRanks(), static_cast<void*>(comm), color, key);
      *newcomm = api::toHandle(c);
    }
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommSplit)

CFX_API ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return api::call("ncclCommGetUniqueId", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (uniqueId == nullptr) return Status::error(Errc::InvalidArgument, "uniqueId is NULL");
    if (c->asyncError() == Errc::InProgress || c->windowSetupPending() || c->finalized() || c->revoked()) {
      return Status::error(
          Errc::InvalidUsage,
          "communicator is initializing, registering a window (non-blocking), finalized or revoked: it "
          "cannot grow");
    }
    CFX_TRY_ASSIGN(transport::UniqueId id, c->newGrowId(core::CommOptions::fromParams().bootstrap.options));
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    id.encode(reinterpret_cast<uint8_t*>(uniqueId->internal));
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommGetUniqueId)

CFX_API ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                   ncclComm_t* newcomm, ncclConfig_t* config) {
  return api::call("ncclCommGrow", [&]() -> Status {
    if (newcomm == nullptr) return Status::error(Errc::InvalidArgument, "newcomm is NULL");
    if (comm == nullptr) {
      // A joining rank: it knows only the id, so it joins as any rank of a fresh communicator would.
      if (uniqueId == nullptr) {
        return Status::error(Errc::InvalidArgument, "a joining rank (comm NULL) must pass the unique id of the grow");
      }
      return api::initRank(newcomm, nRanks, *uniqueId, rank, config);
    }
    CFX_TRY_ASSIGN(core::Communicator * parent, api::checkComm(comm));
    if (parent->asyncError() == Errc::InProgress || parent->windowSetupPending() || parent->finalized()) {
      return Status::error(Errc::InvalidUsage,
                           "parent communicator is initializing, registering a window (non-blocking) or finalized");
    }
    if (nRanks <= parent->nRanks()) {
      return Status::error(Errc::InvalidArgument, strprintf("ncclCommGrow: nRanks %d must exceed the parent's %d ranks",
                                                            nRanks, parent->nRanks()));
    }
    if (rank != -1 && rank != parent->rank()) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("ncclCommGrow: an existing rank passes rank -1 (it keeps rank %d), got %d",
                                     parent->rank(), rank));
    }
    std::optional<transport::UniqueId> given;
    if (uniqueId != nullptr) {
      CFX_TRY_ASSIGN(given, transport::UniqueId::decode(reinterpret_cast<const uint8_t*>(uniqueId->internal)));
    }
    CFX_TRY_ASSIGN(core::CommConfig cfg, api::parseConfig(config, &parent->config()));
    const core::CommOptions options = core::CommOptions::fromParams();
    const int myRank = parent->rank();
    auto resolve = [parent, nRanks, given]() -> Result<transport::UniqueId> {
      return core::agreeGrowId(*parent, nRanks, given ? &*given : nullptr);
    };
    *newcomm = nullptr;
    if (!cfg.blocking) {
      core::Communicator* c = core::Communicator::createPending(myRank, nRanks, cfg).release();
      core::registerComm(c);
      *newcomm = api::toHandle(c);
      return core::submitInit([c, resolve, options]() -> Status {
        c->startAsyncInit(resolve, options);
        return Status::error(Errc::InProgress, "non-blocking grow started");
      });
    }
    return core::submitInit([newcomm, myRank, nRanks, cfg, options, resolve, comm]() -> Status {
      log::setThreadRank(myRank);
      CFX_TRY_ASSIGN(transport::UniqueId id, resolve());
      CFX_TRY_ASSIGN(auto child, core::Communicator::create(id, myRank, nRanks, cfg, options));
      core::Communicator* c = child.release();
      core::registerComm(c);
      CFX_INFO(log::Sys::Init, "comm %p rank %d nranks %d - Init COMPLETE (grow of %p)", static_cast<void*>(c),
               c->rank(), c->nRanks(), static_cast<void*>(comm));
      *newcomm = api::toHandle(c);
      return Status();
    });
  });
}
CFX_NCCL_ALIAS(ncclCommGrow)

CFX_API ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                                     ncclConfig_t* config, int shrinkFlags) {
  return api::call("ncclCommShrink", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * parent, api::checkComm(comm));
    if (newcomm == nullptr) return Status::error(Errc::InvalidArgument, "newcomm is NULL");
    if (excludeRanksCount <= 0 || excludeRanksList == nullptr) {
      return Status::error(Errc::InvalidArgument, "excludeRanksCount must be > 0 with a non-NULL excludeRanksList");
    }
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
      return Status::error(Errc::InvalidArgument, strprintf("invalid shrinkFlags %d", shrinkFlags));
    }
    CFX_TRY(parent->checkNoWindowSetup());  // the registration holds the parent's bootstrap until it ends
    if (shrinkFlags == NCCL_SHRINK_ABORT) (void)parent->revoke();
    *newcomm = nullptr;
    CFX_TRY_ASSIGN(core::CommConfig cfg, api::parseConfig(config, &parent->config()));
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    CFX_TRY_ASSIGN(auto child, core::shrinkComm(*parent, exclude, cfg, core::CommOptions::fromParams()));
    core::Communicator* c = child.release();
    core::registerComm(c);
    *newcomm = api::toHandle(c);
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommShrink)

CFX_API ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return api::call("ncclCommFinalize", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (c->revoked()) return Status::error(Errc::InvalidArgument, "ncclCommFinalize after ncclCommRevoke is not allowed");
    CFX_TRY(c->checkNoWindowSetup());
    return c->finalize();
  });
}
CFX_NCCL_ALIAS(ncclCommFinalize)

CFX_API ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return api::call("ncclCommDestroy", [&]() -> Status {
    if (comm == nullptr) return Status();
    if (!core::isLiveComm(comm)) {
      return Status::error(Errc::InvalidArgument, strprintf("comm %p has already been destroyed", static_cast<void*>(comm)));
    }
    core::Communicator* c = api::unchecked(comm);
    if (!c->finalized() && c->asyncError() != Errc::InProgress) (void)c->drain();
    api::destroyComm(c, "Destroy");
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommDestroy)

CFX_API ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return api::call("ncclCommAbort", [&]() -> Status {
    if (comm == nullptr) return Status();
    if (!core::isLiveComm(comm)) {
      return Status::error(Errc::InvalidArgument, strprintf("comm %p has already been destroyed", static_cast<void*>(comm)));
    }
    core::Communicator* c = api::unchecked(comm);
    CFX_INFO(log::Sys::Init, "comm %p rank %d nranks %d - Abort START", static_cast<void*>(c), c->rank(), c->nRanks());
    c->abort();
    api::destroyComm(c, "Abort");
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommAbort)

CFX_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return api::call("ncclCommRevoke", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
      return Status::error(Errc::InvalidArgument, strprintf("revokeFlags must be NCCL_REVOKE_DEFAULT, got %d", revokeFlags));
    }
    CFX_INFO(log::Sys::Init, "comm %p rank %d - Revoke START", static_cast<void*>(c), c->rank());
    Status st = c->revoke();
    CFX_INFO(log::Sys::Init, "comm %p rank %d - Revoke COMPLETE, result %d", static_cast<void*>(c), c->rank(),
             static_cast<int>(st.code()));
    return st;
  });
}
CFX_NCCL_ALIAS(ncclCommRevoke)

CFX_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return api::call("ncclCommGetAsyncError", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (asyncError == nullptr) return Status::error(Errc::InvalidArgument, "asyncError is NULL");
    *asyncError = api::toResult(c->userAsyncError());
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommGetAsyncError)

CFX_API ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return api::call("ncclCommCount", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (count == nullptr) return Status::error(Errc::InvalidArgument, "count is NULL");
    *count = c->nRanks();
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommCount)

CFX_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return api::call("ncclCommCuDevice", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (device == nullptr) return Status::error(Errc::InvalidArgument, "device is NULL");
    *device = c->cudaDev();  // -1: a host-memory communicator has no CUDA device
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommCuDevice)

CFX_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return api::call("ncclCommUserRank", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (rank == nullptr) return Status::error(Errc::InvalidArgument, "rank is NULL");
    *rank = c->rank();
    return Status();
  });
}
CFX_NCCL_ALIAS(ncclCommUserRank)

CFX_API const char* pncclGetErrorString(ncclResult_t result) {
  switch (api::rawEnum(result)) {  // any int may arrive; loading it as the enum would be undefined
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}
CFX_NCCL_ALIAS(ncclGetErrorString)

CFX_API const char* pncclGetLastError(ncclComm_t comm) {
  (void)comm;  // process-global, as in NCCL
  return log::lastError();
}
CFX_NCCL_ALIAS(ncclGetLastError)

CFX_API void pncclResetDebugInit() { log::reset(); }
CFX_NCCL_ALIAS(ncclResetDebugInit)

// cfx extensions

CFX_API ncclResult_t cfxGetVersion(int* release) {
  return api::call("cfxGetVersion", [&]() -> Status {
    if (release == nullptr) return Status::error(Errc::InvalidArgument, "release is NULL");
    int major = 0, minor = 0, patch = 0;
    std::sscanf(CFX_RELEASE_STRING, "%d.%d.%d", &major, &minor, &patch);
    *release = major * 10000 + minor * 100 + patch;
    return Status();
  });
}

CFX_API ncclResult_t cfxCommInitFromEnv(ncclComm_t* comm) {
  return api::call("cfxCommInitFromEnv", [&]() -> Status {
    if (comm == nullptr) return Status::error(Errc::InvalidArgument, "comm pointer is NULL");
    CFX_TRY_ASSIGN(const launch::LaunchEnv env, launch::parseLaunchEnv(launch::processEnv));
    if (!env.found()) {
      return Status::error(Errc::InvalidUsage,
                           "no launcher environment found: set RANK and WORLD_SIZE (torchrun, "
                           "cfxrun), or run under Open MPI, Slurm or a PMI launcher");
    }
    if (env.rootAddress.empty()) return Status::error(Errc::InvalidUsage, launch::kRootHint);
    CFX_INFO(log::Sys::Init, "%s launch: rank %d of %d, bootstrap root %s (from %s)", env.launcher.c_str(), env.rank,
             env.nRanks, env.rootAddress.c_str(), env.rootFrom.c_str());
    // A launcher's job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID) is no secret: anyone can guess it.
    CFX_TRY_ASSIGN(const std::string secret, transport::launchSecret(transport::readBootstrapParams()));
    CFX_TRY_ASSIGN(transport::UniqueId id, transport::uniqueIdFromAddress(env.rootAddress, secret, /*startRoot=*/true));
    ncclUniqueId raw;
    std::memset(&raw, 0, sizeof(raw));
    id.encode(reinterpret_cast<uint8_t*>(raw.internal));
    return api::initRank(comm, env.nRanks, raw, env.rank, nullptr);
  });
}

CFX_API ncclResult_t cfxGetLaunchInfo(cfxLaunchInfo* info) {
  return api::call("cfxGetLaunchInfo", [&]() -> Status {
    if (info == nullptr) return Status::error(Errc::InvalidArgument, "info is NULL");
    CFX_TRY_ASSIGN(const launch::LaunchEnv env, launch::parseLaunchEnv(launch::processEnv));
    std::memset(info, 0, sizeof(*info));
    info->rank = env.rank;
    info->nRanks = env.nRanks;
    info->localRank = env.localRank;
    info->localRanks = env.localRanks;
    std::snprintf(info->launcher, sizeof(info->launcher), "%s", env.launcher.c_str());
    std::snprintf(info->rootAddress, sizeof(info->rootAddress), "%s", env.rootAddress.c_str());
    return Status();
  });
}

static_assert(static_cast<int>(ft::FailureReason::Exited) == cfxFailureExited &&
                  static_cast<int>(ft::FailureReason::ConnectionLost) == cfxFailureConnectionLost &&
                  static_cast<int>(ft::FailureReason::Hung) == cfxFailureHung,
              "cfxFailureReason mirrors ft::FailureReason");

namespace {
// Copies a NUL-terminated, possibly shortened, text into a fixed array.
template <size_t N>
void copyText(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}
// The checks every cfx query of an initialised communicator starts with: a valid comm, an output pointer, and an
// initialisation that has finished (a non-blocking init may still be running).
Result<core::Communicator*> initializedComm(ncclComm_t comm, const void* out, const char* outName) {
  CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
  if (out == nullptr) return Status::error(Errc::InvalidArgument, strprintf("%s is NULL", outName));
  if (c->asyncError() == Errc::InProgress) {
    return Status::error(Errc::InvalidUsage, "the communicator has not finished initializing");
  }
  return c;
}

}  // namespace

CFX_API ncclResult_t cfxCommGetFailures(ncclComm_t comm, cfxFailureInfo* failures, int maxFailures, int* nFailures) {
  return api::call("cfxCommGetFailures", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, api::checkComm(comm));
    if (nFailures == nullptr) return Status::error(Errc::InvalidArgument, "nFailures is NULL");
    if (maxFailures < 0) return Status::error(Errc::InvalidArgument, strprintf("maxFailures is %d", maxFailures));
    if (maxFailures > 0 && failures == nullptr) {
      return Status::error(Errc::InvalidArgument, "failures is NULL while maxFailures > 0");
    }
    if (c->asyncError() == Errc::InProgress || c->health() == nullptr) {
      return Status::error(Errc::InvalidUsage, "the communicator has not finished initializing");
    }
    const std::vector<ft::Failure> all = c->health()->failures();
    *nFailures = static_cast<int>(all.size());
    for (size_t i = 0; i < all.size() && i < static_cast<size_t>(maxFailures); ++i) {
      const ft::Failure& f = all[i];
      cfxFailureInfo& out = failures[i];
      std::memset(&out, 0, sizeof(out));
      out.rank = f.rank;
      out.reason = static_cast<int>(f.reason);
      out.detectedBy = f.detectedBy;
      out.pid = f.pid;
      out.opSeq = f.opSeq;
      copyText(out.host, f.host);
      copyText(out.op, f.op);
      copyText(out.text, f.text);
    }
    return Status();
  });
}

CFX_API ncclResult_t cfxCommGetTopology(ncclComm_t comm, cfxTopologyInfo* info) {
  return api::call("cfxCommGetTopology", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, initializedComm(comm, info, "info"));
    const coll::Layout& layout = c->layout();
    std::memset(info, 0, sizeof(*info));
    const int r = c->rank();
    info->nRanks = c->nRanks();
    info->nHosts = layout.nHosts();
    info->host = layout.hostOf[static_cast<size_t>(r)];
    info->localRank = layout.localIndex[static_cast<size_t>(r)];
    info->localRanks = static_cast<int>(layout.hostRanks[static_cast<size_t>(info->host)].size());
    info->uniform = layout.uniform() ? 1 : 0;
    if (const coll::Fabric* f = c->fabric()) {
      info->priced = 1;
      info->ringGbps = f->ring.gbps;
      info->ringLatencyUs = f->ring.latencyUs;
      info->biRingGbps = c->nRanks() >= 3 ? f->biRing.gbps : 0;
      if (f->hier) {
        info->hostGbps = f->host.gbps;
        info->hostLatencyUs = f->host.latencyUs;
        info->crossGbps = f->cross.gbps;
        info->crossLatencyUs = f->cross.latencyUs;
      }
    }
    return Status();
  });
}

CFX_API ncclResult_t cfxCommGetTopologyLevels(ncclComm_t comm, cfxTopologyLevels* levels) {
  return api::call("cfxCommGetTopologyLevels", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, initializedComm(comm, levels, "levels"));
    const coll::Layout& layout = c->layout();
    std::memset(levels, 0, sizeof(*levels));
    const auto r = static_cast<size_t>(c->rank());
    const auto h = static_cast<size_t>(layout.hostOf[r]);
    if (layout.deviceOf.empty()) {  // nothing known below hosts: each host is one device
      levels->devices = 1;
      levels->deviceRank = layout.localIndex[r];
      levels->deviceRanks = static_cast<int>(layout.hostRanks[h].size());
      return Status();
    }
    const int dev = layout.deviceOf[r];
    const std::vector<int>& devices = layout.hostDevices[h];
    levels->threeLevel = layout.threeLevel() ? 1 : 0;
    levels->devices = static_cast<int>(devices.size());
    levels->device = static_cast<int>(std::find(devices.begin(), devices.end(), dev) - devices.begin());
    levels->deviceRank = layout.deviceIndex[r];
    levels->deviceRanks = static_cast<int>(layout.deviceRanks[static_cast<size_t>(dev)].size());
    if (const coll::Fabric* f = c->fabric(); f != nullptr && f->hier3) {
      levels->deviceGbps = f->device.gbps;
      levels->deviceLatencyUs = f->device.latencyUs;
      levels->midGbps = f->midHost.gbps;
      levels->midLatencyUs = f->midHost.latencyUs;
      levels->crossGbps = f->crossDev.gbps;
      levels->crossLatencyUs = f->crossDev.latencyUs;
    }
    return Status();
  });
}

namespace {
// What cfxCommGetPlan and cfxCommGetPlanForBuffers check of their arguments: the communicator they plan on.
Result<core::Communicator*> planTarget(ncclComm_t comm, int coll, ncclDataType_t datatype, const cfxPlanInfo* plan) {
  CFX_TRY_ASSIGN(core::Communicator * c, initializedComm(comm, plan, "plan"));
  if (coll < 0 || coll >= coll::kNumCollectives) {
    return Status::error(Errc::InvalidArgument, strprintf("coll %d is not a cfxCollective", coll));
  }
  CFX_TRY(api::checkDataType(datatype));
  return c;
}
}  // namespace

CFX_API ncclResult_t cfxCommGetPlan(ncclComm_t comm, int coll, size_t count, ncclDataType_t datatype,
                                    cfxPlanInfo* plan) {
  return api::call("cfxCommGetPlan", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, planTarget(comm, coll, datatype, plan));
    CFX_TRY(api::checkedBytes("cfxCommGetPlan", "count", count, datatype, static_cast<size_t>(c->nRanks())).status());
    const coll::PlanRequest req =
        c->planRequest(static_cast<coll::Collective>(coll), count, static_cast<DataType>(datatype));
    const coll::Plan chosen = c->plan(req);
    std::memset(plan, 0, sizeof(*plan));
    copyText(plan->algorithm, coll::algorithmName(chosen.algorithm));
    plan->bytes = req.bytes;
    plan->sliceBytes = req.sliceBytes;
    plan->estimateUs = coll::estimateUs(req, chosen.algorithm);
    copyText(plan->text, coll::describePlan(req, chosen, c->options().planner));
    return Status();
  });
}

CFX_API ncclResult_t cfxCommGetPlanForBuffers(ncclComm_t comm, int coll, const void* sendbuff, void* recvbuff,
                                              size_t count, ncclDataType_t datatype, int root, cfxPlanInfo* plan) {
  return api::call("cfxCommGetPlanForBuffers", [&]() -> Status {
    CFX_TRY_ASSIGN(core::Communicator * c, planTarget(comm, coll, datatype, plan));
    coll::CollArgs args;
    args.coll = static_cast<coll::Collective>(coll);
    args.sendbuff = sendbuff;
    args.recvbuff = recvbuff;
    args.count = count;
    args.type = static_cast<DataType>(datatype);
    args.root = root;
    args.op = ReduceOp::builtin(args.type, RedOpKind::Sum, c->nRanks());
    std::string deviceText;
    const coll::DevicePlan device = core::planDeviceOp(c, args, false, false, &deviceText);
    const coll::PlanRequest req = c->planRequest(args.coll, count, args.type);
    std::memset(plan, 0, sizeof(*plan));
    plan->bytes = req.bytes;
    plan->sliceBytes = req.sliceBytes;
    if (device.algorithm) {
      copyText(plan->algorithm, coll::algorithmName(*device.algorithm));
      plan->estimateUs = -1;
      copyText(plan->text, deviceText);
      return Status();
    }
    // Staged, or host memory: the host algorithm runs, on the staged bytes where the buffers are device memory.
    const coll::Plan chosen = c->plan(req);
    copyText(plan->algorithm, coll::algorithmName(chosen.algorithm));
    plan->estimateUs = coll::estimateUs(req, chosen.algorithm);
    const std::string host = coll::describePlan(req, chosen, c->options().planner);
    copyText(plan->text, device.onDevice ? deviceText + "; then " + host : host);
    return Status();
  });
}
