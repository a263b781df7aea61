// SPDX-License-Identifier: Apache-2.0
// ncclConfig_t parsing (api layer).
#include "api/config_api.h"

#include <climits>
#include <cstring>

#include "common/log.h"
#include "common/param.h"

namespace cfx::api {

CFX_PARAM(int, commBlockingParam, "NCCL_COMM_BLOCKING", INT_MIN,
          "Default for ncclConfig_t.blocking when the caller leaves it undefined (0 or 1).");
CFX_PARAM(int, cgaClusterSizeParam, "NCCL_CGA_CLUSTER_SIZE", INT_MIN,
          "Default for ncclConfig_t.cgaClusterSize (GPU only; accepted and recorded).");
CFX_PARAM(int, minCtasParam, "NCCL_MIN_CTAS", INT_MIN, "Default for ncclConfig_t.minCTAs (GPU only; recorded).");
CFX_PARAM(int, maxCtasParam, "NCCL_MAX_CTAS", INT_MIN, "Default for ncclConfig_t.maxCTAs (GPU only; recorded).");
CFX_PARAM(std::string, netNameParam, "NCCL_NET", "",
          "Default for ncclConfig_t.netName: the network transport for rank pairs that shared memory does not "
          "connect: Socket (or TCP), UCX, or IB (UCX over verbs; needs a build with UCX). Case-insensitive.");
CFX_PARAM(int, splitShareParam, "NCCL_COMM_SPLIT_SHARE_RESOURCES", INT_MIN,
          "Default for ncclConfig_t.splitShare (0 or 1).");

namespace {

constexpr int kUndef = NCCL_CONFIG_UNDEF_INT;
constexpr int kMaxChannels = 64;

int versionCode(int major, int minor, int patch) { return NCCL_VERSION(major, minor, patch); }

Status checkBool(int v, const char* name) {
  if (v != kUndef && v != 0 && v != 1) {
    return Status::error(Errc::InvalidArgument, strprintf("ncclConfig_t.%s must be 0 or 1, got %d", name, v));
  }
  return Status();
}

}  // namespace

Result<core::CommConfig> parseConfig(const ncclConfig_t* config, const core::CommConfig* inherit) {
  if (config == nullptr && inherit != nullptr) return *inherit;
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (config != nullptr) {
    if (config->magic != 0xcafebeef) {
      return Status::error(Errc::InvalidArgument, "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
    }
    const size_t n = std::min(config->size, sizeof(ncclConfig_t));
    std::memcpy(&c, config, n);
    // Fields newer than the caller's header keep their defaults.
    const unsigned v = config->version;
    const ncclConfig_t d = NCCL_CONFIG_INITIALIZER;
    if (v < static_cast<unsigned>(versionCode(2, 14, 0))) c.blocking = d.blocking;
    if (v < static_cast<unsigned>(versionCode(2, 17, 0))) {
      c.cgaClusterSize = d.cgaClusterSize;
      c.minCTAs = d.minCTAs;
      c.maxCTAs = d.maxCTAs;
      c.netName = d.netName;
    }
    if (v < static_cast<unsigned>(versionCode(2, 25, 0))) c.trafficClass = d.trafficClass;
    if (v < static_cast<unsigned>(versionCode(2, 27, 0))) {
      c.collnetEnable = d.collnetEnable;
      c.CTAPolicy = d.CTAPolicy;
      c.shrinkShare = d.shrinkShare;
      c.nvlsCTAs = d.nvlsCTAs;
    }
    if (v < static_cast<unsigned>(versionCode(2, 28, 0))) {
      c.nChannelsPerNetPeer = d.nChannelsPerNetPeer;
      c.nvlinkCentricSched = d.nvlinkCentricSched;
    }
  }
  // Environment defaults for fields the caller left undefined.
  if (c.blocking == kUndef && commBlockingParam.get() != kUndef) c.blocking = commBlockingParam.get();
  if (c.cgaClusterSize == kUndef && cgaClusterSizeParam.get() != kUndef) c.cgaClusterSize = cgaClusterSizeParam.get();
  if (c.minCTAs == kUndef && minCtasParam.get() != kUndef) c.minCTAs = minCtasParam.get();
  if (c.maxCTAs == kUndef && maxCtasParam.get() != kUndef) c.maxCTAs = maxCtasParam.get();
  if (c.splitShare == kUndef && splitShareParam.get() != kUndef) c.splitShare = splitShareParam.get();

  CFX_TRY(checkBool(c.blocking, "blocking"));
  CFX_TRY(checkBool(c.splitShare, "splitShare"));
  CFX_TRY(checkBool(c.shrinkShare, "shrinkShare"));
  CFX_TRY(checkBool(c.collnetEnable, "collnetEnable"));
  CFX_TRY(checkBool(c.nvlinkCentricSched, "nvlinkCentricSched"));
  if (c.cgaClusterSize != kUndef && c.cgaClusterSize < 0) {
    return Status::error(Errc::InvalidArgument, strprintf("ncclConfig_t.cgaClusterSize must be >= 0, got %d", c.cgaClusterSize));
  }
  if ((c.minCTAs != kUndef && c.minCTAs <= 0) || (c.maxCTAs != kUndef && c.maxCTAs <= 0) ||
      (c.minCTAs != kUndef && c.maxCTAs != kUndef && c.minCTAs > c.maxCTAs)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("ncclConfig_t.minCTAs (%d) and maxCTAs (%d) must be > 0 with min <= max", c.minCTAs, c.maxCTAs));
  }
  if (c.CTAPolicy != kUndef && (c.CTAPolicy < 0 || c.CTAPolicy > 2)) {
    return Status::error(Errc::InvalidArgument, strprintf("ncclConfig_t.CTAPolicy must be 0..2, got %d", c.CTAPolicy));
  }
  if (c.nvlsCTAs != kUndef && c.nvlsCTAs <= 0) {
    return Status::error(Errc::InvalidArgument, strprintf("ncclConfig_t.nvlsCTAs must be > 0, got %d", c.nvlsCTAs));
  }
  if (c.nChannelsPerNetPeer != kUndef && (c.nChannelsPerNetPeer <= 0 || c.nChannelsPerNetPeer > kMaxChannels)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("ncclConfig_t.nChannelsPerNetPeer must be in 1..%d, got %d", kMaxChannels, c.nChannelsPerNetPeer));
  }

  core::CommConfig out;
  auto setInt = [](int v, int& field, const char* name) {
    if (v == kUndef) return;
    field = v;
    CFX_INFO(log::Sys::Init, "Comm config %s set to %d", name, v);
  };
  auto setBool = [](int v, bool& field, const char* name) {
    if (v == kUndef) return;
    field = v != 0;
    CFX_INFO(log::Sys::Init, "Comm config %s set to %d", name, v);
  };
  setBool(c.blocking, out.blocking, "Blocking");
  setInt(c.cgaClusterSize, out.cgaClusterSize, "CGA cluster size");
  setInt(c.minCTAs, out.minCTAs, "minCTAs");
  setInt(c.maxCTAs, out.maxCTAs, "maxCTAs");
  setBool(c.splitShare, out.splitShare, "splitShare");
  setInt(c.trafficClass, out.trafficClass, "traffic class");
  setBool(c.collnetEnable, out.collnetEnable, "collnetEnable");
  setInt(c.CTAPolicy, out.ctaPolicy, "CTA policy flags");
  setBool(c.shrinkShare, out.shrinkShare, "shrinkShare");
  setInt(c.nvlsCTAs, out.nvlsCTAs, "nvlsCTAs");
  setInt(c.nChannelsPerNetPeer, out.nChannelsPerNetPeer, "nChannelsPerNetPeer");
  setBool(c.nvlinkCentricSched, out.nvlinkCentricSched, "nvlinkCentricSched");
  if (c.netName) {
    out.netName = c.netName;
    CFX_INFO(log::Sys::Init, "Comm config net name set to %s", c.netName);
  } else if (!netNameParam.get().empty()) {
    out.netName = netNameParam.get();
  }
  if (c.commName) out.commName = c.commName;
  return out;
}

}  // namespace cfx::api
