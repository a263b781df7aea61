// SPDX-License-Identifier: Apache-2.0
// Topology discovery (topology layer): this host through hwloc, sysfs and the GPU probe, or a whole emulated
// system from NCCL_TOPO_FILE; optionally dumped to NCCL_TOPO_DUMP_FILE and calibrated.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "topology/gpu_probe.h"
#include "topology/topology_view.h"

namespace cfx::topo {

struct TopologyOptions {
  std::string loadFile;            // NCCL_TOPO_FILE: load this view instead of discovering
  std::string dumpFile;            // NCCL_TOPO_DUMP_FILE: write the view here once built
  bool calibrate = false;          // CFX_TOPO_CALIBRATE: measure the Memory class at init
  // Figures the ranks of a communicator agreed on (core/ measures on every rank, topo::agreeOn): applied instead
  // of a local measurement, before the dump.
  std::optional<Calibration> agreed;
  std::string sysfsRoot = "/sys";  // test hook: a fake sysfs tree
  GpuProbe* gpuProbe = nullptr;    // test hook: null means the dlopen probe; not owned

  // Reads the knobs once (core/ calls this when a communicator is created).
  static TopologyOptions fromParams();
};

// This host alone (host 0, no ranks placed). hwloc failures are errors (SystemError naming the call); anything
// sysfs or the GPU runtimes cannot tell is left unknown, so containers and VMs still get a usable view.
Result<TopologyView> discoverLocalHost(const TopologyOptions& options);

// What a communicator uses: loadFile if set, else discoverLocalHost; then calibrated with `agreed` if set, else
// measured here if asked; then dumped if dumpFile is set. Logs the summary at INFO/GRAPH. Errors: those of loading, discovery or dumping.
Result<TopologyView> buildTopology(const TopologyOptions& options);

}  // namespace cfx::topo
