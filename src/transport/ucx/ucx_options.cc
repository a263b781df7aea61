// SPDX-License-Identifier: Apache-2.0
// The UCX transport's knobs (transport layer). Compiled with or without UCX, so docs/ENV.md is the same for
// every build.
#include <dirent.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/param.h"
#include "transport/ucx/ucx_transport.h"

namespace cfx::transport::ucx {

namespace {

constexpr int64_t kMaxSlotBytes = int64_t{1} << 30;

std::optional<std::string> validSlotBytes(const int64_t& v) {
  if (v < 64 || v > kMaxSlotBytes) return "out of range [64, " + param::toText(kMaxSlotBytes) + "]";
  if (v % 64 != 0) return "not a multiple of 64";
  return std::nullopt;
}

CFX_PARAM(int64_t, slotBytesParam, "CFX_UCX_SLOT_BYTES", 262144,
          "Bytes per slot of a UCX connection's FIFOs (a multiple of 64): the largest message one post() sends. "
          "Above UCX's rendezvous threshold a slot moves zero-copy (RDMA on verbs); every rank must use the same "
          "value.",
          validSlotBytes);
CFX_PARAM(int, slotsParam, "CFX_UCX_SLOTS", 8,
          "Slots per direction of each UCX connection: how many messages may be in flight to a peer before the "
          "sender waits (at most 1024). Every rank must use the same value.",
          param::inRange(1, 1024));
CFX_PARAM(std::chrono::milliseconds, connectTimeoutParam, "CFX_UCX_CONNECT_TIMEOUT_MS",
          std::chrono::milliseconds(30000),
          "How long connecting the UCX endpoints (wireup and the authenticated hello) may take before it fails "
          "with a timeout that names the peers still missing.",
          param::atLeast(std::chrono::milliseconds(100)));
CFX_PARAM(std::chrono::milliseconds, lingerParam, "CFX_UCX_LINGER_MS", std::chrono::milliseconds(1000),
          "How long tearing down a communicator keeps flushing messages already posted to live UCX peers before it "
          "closes the endpoints (not after an abort).",
          param::inRange(std::chrono::milliseconds(0), std::chrono::milliseconds(60000)));

CFX_PARAM(std::string, eagerParam, "CFX_UCX_EAGER", "auto",
          "Whether UCX sends each slot eagerly instead of by rendezvous (UCX's RNDV_THRESH raised to inf for this "
          "library's context). auto: eagerly where the host has no RDMA device (/sys/class/infiniband empty) and "
          "UCX_RNDV_THRESH is not set, since over tcp, sm and cma rendezvous only adds round trips (1-4 MiB "
          "all-reduces 1.5x faster over loopback); on RDMA fabrics rendezvous is the zero-copy path. 1 or 0: "
          "always or never.",
          [](const std::string& v) -> std::optional<std::string> {
            if (v == "auto" || v == "0" || v == "1") return std::nullopt;
            return std::string("not auto, 0 or 1");
          });

CFX_PARAM(bool, inlineParam, "CFX_UCX_INLINE", true,
          "Inline progress: a rank waiting for a UCX message now and then runs the UCX worker's progress itself, "
          "instead of waiting for the proxy thread to wake up and do it. Applies only where this host's ranks do not "
          "outnumber its CPUs. 0: only the proxy thread calls into UCX.");

// Any entry in /sys/class/infiniband: an RDMA device (InfiniBand, RoCE, iWARP) that UCX may use zero-copy.
bool hostHasRdmaDevice() {
  DIR* dir = ::opendir("/sys/class/infiniband");
  if (dir == nullptr) return false;
  bool any = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') {
      any = true;
      break;
    }
  }
  ::closedir(dir);
  return any;
}

}  // namespace

UcxOptions UcxOptions::fromParams() {
  UcxOptions options;
  options.geometry.slotBytes = static_cast<size_t>(slotBytesParam.get());
  options.geometry.nSlots = slotsParam.get();
  options.connectTimeout = connectTimeoutParam.get();
  options.closeLinger = lingerParam.get();
  options.inlineProgress = inlineParam.get();
  options.eagerSlots = eagerSlotsFor(eagerParam.get(), std::getenv("UCX_RNDV_THRESH") != nullptr, hostHasRdmaDevice());
  return options;
}

bool UcxOptions::eagerSlotsFor(const std::string& knob, bool userSetRndvThresh, bool hostHasRdma) {
  if (knob == "1") return true;
  if (knob == "0") return false;
  return !userSetRndvThresh && !hostHasRdma;
}

}  // namespace cfx::transport::ucx
