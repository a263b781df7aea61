// SPDX-License-Identifier: Apache-2.0
// GpuProbe (topology layer): lists this host's GPUs and the links between them. The real probe loads NVML, or
// failing that the CUDA driver, with dlopen at run time; nothing links against CUDA, so the same library runs
// on machines with no GPU and no CUDA installed. Tests substitute a fake through TopologyOptions::gpuProbe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "topology/topology_data.h"

namespace cfx::topo {

struct GpuProbeResult {
  std::vector<Gpu> gpus;    // numa is filled in by discovery from the PCI tree when the probe leaves it at -1
  std::vector<Link> links;  // between GPUs of host 0 (NvLink), endpoints by position in `gpus`
  std::string source;       // "nvml", "cuda" or "" when no runtime was found; for the INFO line
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // Lists the GPUs. Never fails: a missing or broken runtime yields no GPUs (and an INFO line saying why), since
  // a host without GPUs is a supported configuration, not an error. Blocking; called once per discovery, from
  // one thread at a time.
  virtual GpuProbeResult probe() = 0;
};

// NVML (libnvidia-ml.so.1) for GPUs, names, memory and NVLink; else the CUDA driver (libcuda.so.1) for GPUs
// only; else nothing.
std::unique_ptr<GpuProbe> makeDlopenGpuProbe();

// "00000000:3B:00.0" or "0000:3b:00.0" -> "0000:3b:00.0" (the form sysfs and hwloc use).
std::string normalizeBusId(const std::string& busId);

}  // namespace cfx::topo
