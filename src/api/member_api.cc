// SPDX-License-Identifier: Apache-2.0
// Dynamic membership entry points: cfxMasterStart/Stop and cfxMemberJoin/Update/Leave (api layer).
#include <cstring>
#include <memory>

#include "api/api_call.h"
#include "api/config_api.h"
#include "common/crypto.h"
#include "conflux.h"
#include "core/membership.h"
#include "transport/bootstrap/bootstrap.h"

struct cfxMaster {
  std::unique_ptr<cfx::core::Master> master;
};
struct cfxMember {
  std::unique_ptr<cfx::core::Member> member;
};

namespace cfx::api {
namespace {

Result<transport::UniqueId> decodeMasterId(const ncclUniqueId* id) {
  if (id == nullptr) return Status::error(Errc::InvalidArgument, "masterId is NULL");
  return transport::UniqueId::decode(reinterpret_cast<const uint8_t*>(id->internal));
}

}  // namespace
}  // namespace cfx::api

using namespace cfx;  // NOLINT(google-build-using-namespace): this file is only C entry points

CFX_API ncclResult_t cfxMasterStart(const ncclUniqueId* restartFrom, ncclUniqueId* masterId, cfxMaster_t* master) {
  return api::call("cfxMasterStart", [&]() -> Status {
    if (masterId == nullptr || master == nullptr) return Status::error(Errc::InvalidArgument, "masterId or master is NULL");
    *master = nullptr;
    transport::UniqueId id;
    if (restartFrom != nullptr) {
      // A restart: the same address and secret, so members find it again and trust it.
      CFX_TRY_ASSIGN(id, api::decodeMasterId(restartFrom));
    } else {
      CFX_TRY_ASSIGN(id.root, transport::listenAddress(transport::readBootstrapParams().options));
      CFX_TRY(crypto::randomBytes(id.secret));
      CFX_TRY(crypto::randomBytes(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&id.magic), sizeof(id.magic))));
    }
    CFX_TRY_ASSIGN(auto m, core::Master::start(id.root, std::vector<uint8_t>(id.secret.begin(), id.secret.end())));
    id.root = m->address();  // the port the listener got
    std::memset(masterId, 0, sizeof(*masterId));
    id.encode(reinterpret_cast<uint8_t*>(masterId->internal));
    *master = new cfxMaster{std::move(m)};
    return Status();
  });
}

CFX_API ncclResult_t cfxMasterStop(cfxMaster_t master) {
  return api::call("cfxMasterStop", [&]() -> Status {
    delete master;  // NULL is a no-op, as for free()
    return Status();
  });
}

CFX_API ncclResult_t cfxMasterGetEpoch(cfxMaster_t master, unsigned long long* epoch, int* members) {
  return api::call("cfxMasterGetEpoch", [&]() -> Status {
    if (master == nullptr || epoch == nullptr || members == nullptr) {
      return Status::error(Errc::InvalidArgument, "master, epoch or members is NULL");
    }
    const core::Master::Snapshot snap = master->master->snapshot();
    *epoch = snap.epoch;
    *members = snap.members;
    return Status();
  });
}

CFX_API ncclResult_t cfxMemberJoin(const ncclUniqueId* masterId, ncclConfig_t* config, cfxMember_t* member) {
  return api::call("cfxMemberJoin", [&]() -> Status {
    if (member == nullptr) return Status::error(Errc::InvalidArgument, "member is NULL");
    *member = nullptr;
    CFX_TRY_ASSIGN(transport::UniqueId id, api::decodeMasterId(masterId));
    CFX_TRY_ASSIGN(core::CommConfig cfg, api::parseConfig(config));
    if (!cfg.blocking) {
      return Status::error(Errc::InvalidUsage, "cfxMemberJoin: members' communicators are blocking; pass a config "
                                               "with blocking = 1 (or NULL)");
    }
    CFX_TRY_ASSIGN(auto m, core::Member::join(id.root, std::vector<uint8_t>(id.secret.begin(), id.secret.end()), cfg,
                                              core::CommOptions::fromParams()));
    *member = new cfxMember{std::move(m)};
    return Status();
  });
}

CFX_API ncclResult_t cfxMemberUpdate(cfxMember_t member, ncclComm_t* comm, cfxEpochInfo* info) {
  return api::call("cfxMemberUpdate", [&]() -> Status {
    if (member == nullptr || comm == nullptr) return Status::error(Errc::InvalidArgument, "member or comm is NULL");
    *comm = nullptr;
    Result<core::EpochInfo> e = member->member->update();
    if (!e.ok()) return e.status();
    *comm = api::toHandle(member->member->comm());
    if (info != nullptr) {
      info->epoch = e->epoch;
      info->rank = e->rank;
      info->nRanks = e->nRanks;
      info->changed = e->changed ? 1 : 0;
      info->joined = e->joined;
      info->left = e->left;
    }
    return Status();
  });
}

CFX_API ncclResult_t cfxMemberLeave(cfxMember_t member) {
  return api::call("cfxMemberLeave", [&]() -> Status {
    delete member;
    return Status();
  });
}
