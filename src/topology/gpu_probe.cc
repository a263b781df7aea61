// SPDX-License-Identifier: Apache-2.0
// The dlopen-based GpuProbe (topology layer). Only the handful of NVML and CUDA driver entry points it needs
// are declared here, with their documented C signatures; the libraries are never linked.
#include "topology/gpu_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "common/log.h"
#include "common/status.h"

namespace cfx::topo {

namespace {

using LogSys = log::Sys;

struct DlCloser {
  void operator()(void* h) const {
    if (h) dlclose(h);
  }
};
using DlHandle = std::unique_ptr<void, DlCloser>;

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// NVML's nvmlPciInfo_t (nvml.h): the layout NVML has kept since the _v3 entry points.
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
using NvmlDevice = void*;
constexpr unsigned kNvmlMaxLinks = 18;
constexpr double kNvLinkGBpsPerLink = 25.0;  // one NVLink4 link, one direction

class DlopenGpuProbe final : public GpuProbe {
 public:
  GpuProbeResult probe() override {
    GpuProbeResult out = probeNvml();
    if (out.source.empty()) out = probeCuda();
    if (out.source.empty())
      CFX_INFO(LogSys::Graph, "Topology: no GPU runtime (libnvidia-ml.so.1, libcuda.so.1) found; no GPUs");
    return out;
  }

 private:
  static GpuProbeResult probeNvml() {
    GpuProbeResult out;
    DlHandle lib(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!lib) return out;
    auto init = symbol<int (*)()>(lib.get(), "nvmlInit_v2");
    auto shutdown = symbol<int (*)()>(lib.get(), "nvmlShutdown");
    auto count = symbol<int (*)(unsigned*)>(lib.get(), "nvmlDeviceGetCount_v2");
    auto byIndex = symbol<int (*)(unsigned, NvmlDevice*)>(lib.get(), "nvmlDeviceGetHandleByIndex_v2");
    auto name = symbol<int (*)(NvmlDevice, char*, unsigned)>(lib.get(), "nvmlDeviceGetName");
    auto uuid = symbol<int (*)(NvmlDevice, char*, unsigned)>(lib.get(), "nvmlDeviceGetUUID");
    auto pci = symbol<int (*)(NvmlDevice, NvmlPciInfo*)>(lib.get(), "nvmlDeviceGetPciInfo_v3");
    auto memory = symbol<int (*)(NvmlDevice, NvmlMemory*)>(lib.get(), "nvmlDeviceGetMemoryInfo");
    auto linkState = symbol<int (*)(NvmlDevice, unsigned, int*)>(lib.get(), "nvmlDeviceGetNvLinkState");
    auto linkRemote =
        symbol<int (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(lib.get(), "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    if (!init || !shutdown || !count || !byIndex || !pci) {
      CFX_INFO(LogSys::Graph, "Topology: libnvidia-ml.so.1 lacks the entry points we need; ignoring it");
      return out;
    }
    if (int rc = init(); rc != 0) {
      CFX_INFO(LogSys::Graph, "Topology: nvmlInit_v2 failed (%d); trying the CUDA driver", rc);
      return out;
    }
    unsigned n = 0;
    if (count(&n) != 0) n = 0;
    std::vector<NvmlDevice> devices;
    std::map<std::string, int> byBusId;
    for (unsigned i = 0; i < n; ++i) {
      NvmlDevice dev = nullptr;
      NvmlPciInfo info{};
      if (byIndex(i, &dev) != 0 || pci(dev, &info) != 0) continue;
      Gpu g;
      char text[96] = {};
      if (name && name(dev, text, sizeof text) == 0) g.name = text;
      if (uuid && uuid(dev, text, sizeof text) == 0) g.uuid = text;
      info.busId[sizeof info.busId - 1] = '\0';
      g.pciBusId = normalizeBusId(info.busId);
      NvmlMemory mem{};
      if (memory && memory(dev, &mem) == 0) g.memoryBytes = mem.total;
      byBusId[g.pciBusId] = static_cast<int>(out.gpus.size());
      out.gpus.push_back(std::move(g));
      devices.push_back(dev);
    }
    if (linkState && linkRemote) out.links = nvlinks(devices, byBusId, linkState, linkRemote);
    (void)shutdown();
    out.source = "nvml";
    return out;
  }

  // NVLink: count the active links from each GPU to each peer GPU. Links that end at something other than a
  // GPU of this host are NVSwitch ports: GPUs that all reach NVSwitches are joined pairwise at the smaller
  // count, which is what a non-blocking NVSwitch fabric gives a pair.
  template <typename StateFn, typename RemoteFn>
  static std::vector<Link> nvlinks(const std::vector<NvmlDevice>& devices, const std::map<std::string, int>& byBusId,
                                   StateFn linkState, RemoteFn linkRemote) {
    const int n = static_cast<int>(devices.size());
    std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
    std::vector<int> toSwitch(n, 0);
    for (int i = 0; i < n; ++i) {
      for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
        int active = 0;
        NvmlPciInfo remote{};
        if (linkState(devices[i], l, &active) != 0 || active != 1) continue;
        if (linkRemote(devices[i], l, &remote) != 0) continue;
        remote.busId[sizeof remote.busId - 1] = '\0';
        auto it = byBusId.find(normalizeBusId(remote.busId));
        if (it != byBusId.end())
          ++direct[i][it->second];
        else
          ++toSwitch[i];
      }
    }
    std::vector<Link> links;
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        const int count = std::min(direct[i][j], direct[j][i]) + std::min(toSwitch[i], toSwitch[j]);
        if (count == 0) continue;
        Link l;
        l.a = Endpoint{Endpoint::Kind::Gpu, 0, i, -1};
        l.b = Endpoint{Endpoint::Kind::Gpu, 0, j, -1};
        l.cls = LinkClass::NvLink;
        l.gbps = count * kNvLinkGBpsPerLink;
        links.push_back(l);
      }
    }
    return links;
  }

  static GpuProbeResult probeCuda() {
    GpuProbeResult out;
    DlHandle lib(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!lib) return out;
    auto init = symbol<int (*)(unsigned)>(lib.get(), "cuInit");
    auto count = symbol<int (*)(int*)>(lib.get(), "cuDeviceGetCount");
    auto get = symbol<int (*)(int*, int)>(lib.get(), "cuDeviceGet");
    auto name = symbol<int (*)(char*, int, int)>(lib.get(), "cuDeviceGetName");
    auto busId = symbol<int (*)(char*, int, int)>(lib.get(), "cuDeviceGetPCIBusId");
    auto total = symbol<int (*)(size_t*, int)>(lib.get(), "cuDeviceTotalMem_v2");
    if (!init || !count || !get) return out;
    if (int rc = init(0); rc != 0) {
      CFX_INFO(LogSys::Graph, "Topology: cuInit failed (%d); no GPUs", rc);
      return out;
    }
    int n = 0;
    if (count(&n) != 0) n = 0;
    for (int i = 0; i < n; ++i) {
      int dev = 0;
      if (get(&dev, i) != 0) continue;
      Gpu g;
      char text[96] = {};
      if (name && name(text, sizeof text, dev) == 0) g.name = text;
      if (busId && busId(text, sizeof text, dev) == 0) g.pciBusId = normalizeBusId(text);
      size_t bytes = 0;
      if (total && total(&bytes, dev) == 0) g.memoryBytes = bytes;
      out.gpus.push_back(std::move(g));
    }
    out.source = "cuda";
    return out;
  }
};

}  // namespace

std::unique_ptr<GpuProbe> makeDlopenGpuProbe() { return std::make_unique<DlopenGpuProbe>(); }

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4)
    return strprintf("%04x:%02x:%02x.%x", domain, bus, dev, fn);
  if (std::sscanf(busId.c_str(), "%x:%x.%x", &bus, &dev, &fn) == 3) return strprintf("0000:%02x:%02x.%x", bus, dev, fn);
  std::string lower;
  for (char c : busId) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return lower;
}

}  // namespace cfx::topo
