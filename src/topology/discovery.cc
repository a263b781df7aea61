// SPDX-License-Identifier: Apache-2.0
// Discovery of this host with hwloc (packages, NUMA nodes, cores, the PCI tree), sysfs/getifaddrs (NICs) and
// the GPU probe; and buildTopology, which also serves NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE (topology layer).
#include "topology/discovery.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>

#include "common/log.h"
#include "common/param.h"
#include "topology/calibration.h"
#include "topology/nic_probe.h"
#include "topology/topology_xml.h"

namespace cfx::topo {

CFX_PARAM(std::string, topoFileParam, "NCCL_TOPO_FILE", "",
          "Load the topology from this XML file instead of discovering it; the file may describe several hosts "
          "and place every rank, to emulate multi-host shapes on one machine.");
CFX_PARAM(std::string, topoDumpFileParam, "NCCL_TOPO_DUMP_FILE", "",
          "Write the topology (discovered or loaded) to this XML file when a communicator is created.");
CFX_PARAM(bool, topoCalibrateParam, "CFX_TOPO_CALIBRATE", false,
          "Measure link figures at init (about 10 ms of copying on every rank) instead of using the per-class "
          "defaults; a communicator's ranks plan with the median of their measurements, so their plans agree.");

TopologyOptions TopologyOptions::fromParams() {
  TopologyOptions options;
  options.loadFile = topoFileParam.get();
  options.dumpFile = topoDumpFileParam.get();
  options.calibrate = topoCalibrateParam.get();
  return options;
}

namespace {

using LogSys = log::Sys;

struct HwlocDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocDeleter>;

int osIndex(hwloc_obj_t obj) { return obj->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(obj->os_index); }

std::vector<int> bitmapToList(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set || hwloc_bitmap_weight(set) < 0) return out;  // infinite or missing sets are unknown
  int i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(i); }
  hwloc_bitmap_foreach_end();
  return out;
}

int packageOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
  return pkg ? osIndex(pkg) : -1;
}

// The NUMA node whose cpuset holds `cpuset` entirely, or -1.
int numaCovering(hwloc_topology_t topo, hwloc_const_cpuset_t cpuset) {
  if (!cpuset || hwloc_bitmap_iszero(cpuset)) return -1;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));)
    if (hwloc_bitmap_isincluded(cpuset, n->cpuset)) return osIndex(n);
  return -1;
}

std::string busIdOf(hwloc_obj_t obj) {
  return strprintf("%04x:%02x:%02x.%x", obj->attr->pcidev.domain, obj->attr->pcidev.bus, obj->attr->pcidev.dev,
                   obj->attr->pcidev.func);
}

// Walks the I/O children below `obj`, recording PCI devices and PCI-to-PCI bridges in pre-order. Host bridges
// are not recorded (they have no bus id of their own); what hangs below one is a root of the PCI tree.
void walkPci(hwloc_topology_t topo, hwloc_obj_t obj, const std::string& parent, Host& host) {
  for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) {
    const bool pciDevice = c->type == HWLOC_OBJ_PCI_DEVICE;
    const bool pciBridge = c->type == HWLOC_OBJ_BRIDGE && c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
    if (!pciDevice && !pciBridge) {
      walkPci(topo, c, parent, host);  // a host bridge: its children are roots
      continue;
    }
    PciDevice d;
    d.busId = busIdOf(c);
    d.parentBusId = parent;
    d.bridge = pciBridge;
    d.classId = c->attr->pcidev.class_id;
    d.vendor = c->attr->pcidev.vendor_id;
    d.device = c->attr->pcidev.device_id;
    d.linkGBps = c->attr->pcidev.linkspeed;
    if (parent.empty()) {
      hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo, c);
      if (local && local->nodeset && hwloc_bitmap_weight(local->nodeset) == 1)
        d.numa = hwloc_bitmap_first(local->nodeset);
    }
    host.pci.push_back(d);
    walkPci(topo, c, d.busId, host);
  }
}

void walkNormal(hwloc_topology_t topo, hwloc_obj_t obj, Host& host) {
  if (obj->io_first_child) walkPci(topo, obj, "", host);
  for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling) walkNormal(topo, c, host);
}

Status readHwloc(Host& host) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    return Status::error(Errc::SystemError, "hwloc_topology_init failed; topology discovery is impossible");
  HwlocTopology topo(raw);
  // Keep PCI devices and bridges that matter (hwloc drops plain bridges with nothing interesting below).
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // hwloc's Linux backend reads the PCI tree from sysfs; its "pci" plugin (libpciaccess) finds the same devices
  // on Linux but leaks on every load, which LeakSanitizer reports against every communicator init.
  (void)hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(raw) != 0)
    return Status::error(Errc::SystemError,
                         "hwloc_topology_load failed; set NCCL_TOPO_FILE to describe this host instead");

  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_PACKAGE, p));) {
    Package pkg;
    pkg.osIndex = osIndex(p);
    if (const char* model = hwloc_obj_get_info_by_name(p, "CPUModel")) pkg.model = model;
    if (pkg.osIndex >= 0) host.packages.push_back(std::move(pkg));
  }
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n));) {
    NumaNode node;
    node.osIndex = osIndex(n);
    node.package = packageOf(raw, n);
    node.memoryBytes = n->attr->numanode.local_memory;
    node.cpus = bitmapToList(n->cpuset);
    if (node.osIndex >= 0) host.numaNodes.push_back(std::move(node));
  }
  for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_CORE, c));) {
    Core core;
    core.osIndex = osIndex(c);
    core.numa = numaCovering(raw, c->cpuset);
    core.package = packageOf(raw, c);
    core.pus = bitmapToList(c->cpuset);
    host.cores.push_back(std::move(core));
  }
  walkNormal(raw, hwloc_get_root_obj(raw), host);
  return {};
}

// GPUs and NICs whose NUMA node is unknown inherit the one of their PCI root.
int numaOfBusId(const Host& host, const std::string& busId) {
  std::map<std::string, const PciDevice*> byId;
  for (const PciDevice& d : host.pci) byId[d.busId] = &d;
  for (auto it = byId.find(busId); it != byId.end(); it = byId.find(it->second->parentBusId))
    if (it->second->parentBusId.empty()) return it->second->numa;
  return -1;
}

bool hasNuma(const Host& host, int osIdx) {
  return std::any_of(host.numaNodes.begin(), host.numaNodes.end(),
                     [&](const NumaNode& n) { return n.osIndex == osIdx; });
}

}  // namespace

Result<TopologyView> discoverLocalHost(const TopologyOptions& options) {
  TopologyData data;
  Host& host = data.hosts.emplace_back();
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) host.name = name;
  CFX_TRY(readHwloc(host));

  host.nics = probeNics(options.sysfsRoot);
  std::unique_ptr<GpuProbe> ownProbe;
  GpuProbe* probe = options.gpuProbe;
  if (!probe) probe = (ownProbe = makeDlopenGpuProbe()).get();
  GpuProbeResult gpus = probe->probe();
  host.gpus = std::move(gpus.gpus);
  data.links = std::move(gpus.links);

  // sysfs and the runtimes may name NUMA nodes hwloc did not report (containers restrict the visible nodes).
  for (Nic& n : host.nics) {
    if (n.numa < 0 && !n.pciBusId.empty()) n.numa = numaOfBusId(host, n.pciBusId);
    if (!hasNuma(host, n.numa)) n.numa = -1;
  }
  for (Gpu& g : host.gpus) {
    if (g.numa < 0 && !g.pciBusId.empty()) g.numa = numaOfBusId(host, g.pciBusId);
    if (!hasNuma(host, g.numa)) g.numa = -1;
  }
  for (const Nic& n : host.nics)
    CFX_INFO(LogSys::Graph, "Topology: NIC %s speed %s Mbps, PCI %s, NUMA %d, %zu address%s", n.name.c_str(),
             n.speedMbps ? std::to_string(*n.speedMbps).c_str() : "unknown",
             n.pciBusId.empty() ? "none" : n.pciBusId.c_str(), n.numa, n.addresses.size(),
             n.addresses.size() == 1 ? "" : "es");
  if (!gpus.source.empty())
    CFX_INFO(LogSys::Graph, "Topology: %zu GPU%s from %s, %zu NVLink pair%s", host.gpus.size(),
             host.gpus.size() == 1 ? "" : "s", gpus.source.c_str(), data.links.size(),
             data.links.size() == 1 ? "" : "s");
  return TopologyView::create(std::move(data));
}

Result<TopologyView> buildTopology(const TopologyOptions& options) {
  std::optional<TopologyView> view;
  if (!options.loadFile.empty()) {
    CFX_TRY_ASSIGN(view, loadTopologyFile(options.loadFile));
    CFX_INFO(LogSys::Graph, "Topology: loaded from %s (NCCL_TOPO_FILE)", options.loadFile.c_str());
  } else {
    CFX_TRY_ASSIGN(view, discoverLocalHost(options));
  }
  if (options.agreed || options.calibrate) {
    CFX_TRY_ASSIGN(view, view->calibrated(options.agreed ? *options.agreed : measureLocalCalibration(*view)));
    const LinkFigures mem = view->figures(LinkClass::Memory);
    CFX_INFO(LogSys::Graph, "Topology: calibrated memory class %.2f GB/s, %.2f us", mem.gbps, mem.latencyUs);
  }
  CFX_INFO(LogSys::Init, "Topology: %s", view->summary().c_str());
  if (!options.dumpFile.empty()) {
    CFX_TRY(dumpTopologyFile(*view, options.dumpFile));
    CFX_INFO(LogSys::Graph, "Topology: written to %s (NCCL_TOPO_DUMP_FILE)", options.dumpFile.c_str());
  }
  return std::move(*view);
}

}  // namespace cfx::topo
