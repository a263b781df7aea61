// SPDX-License-Identifier: Apache-2.0
// Communicator configuration after ncclConfig_t parsing and knob overrides (core layer).
#pragma once

#include <chrono>
#include <string>

#include "collectives/planner.h"
#include "topology/discovery.h"
#include "faulttol/health_monitor.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::core {

// The fields of ncclConfig_t that mean something here, with NCCL's defaults. The api layer fills it.
struct CommConfig {
  bool blocking = true;
  int cgaClusterSize = 4;
  int minCTAs = 1;
  int maxCTAs = 32;
  std::string netName;
  bool splitShare = false;
  int trafficClass = -1;
  std::string commName;
  bool collnetEnable = false;
  int ctaPolicy = 0;
  bool shrinkShare = false;
  int nvlsCTAs = -1;
  int nChannelsPerNetPeer = -1;
  bool nvlinkCentricSched = false;
};

// Everything a communicator reads from knobs, read once when it is created and passed down.
struct CommOptions {
  std::chrono::milliseconds timeout{600000};       // CFX_TIMEOUT_MS: no progress for this long fails an op
  transport::BootstrapParams bootstrap;             // NCCL_SOCKET_IFNAME, NCCL_COMM_ID, CFX_SECRET, timeouts
  int spins = 2000;                                 // CFX_SPIN_COUNT
  bool shmDisable = false;                          // NCCL_SHM_DISABLE
  std::string hostId;                               // NCCL_HOSTID
  std::string net;                                  // CFX_NET (NCCL_NET arrives through CommConfig::netName)
  coll::PlannerOptions planner;                     // NCCL_ALGO
  topo::TopologyOptions topology;                   // NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE
  ft::HealthOptions health;                         // CFX_HEARTBEAT_MS, CFX_HEARTBEAT_MISSES
  bool checkCalls = false;                          // CFX_CHECK_CALLS: every collective agrees on its call first
  int hostLanes = 0;                                // CFX_HOST_LANES (core/host_lanes.h); 0 until init resolves it
  static CommOptions fromParams();
};

}  // namespace cfx::core
