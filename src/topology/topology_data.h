// SPDX-License-Identifier: Apache-2.0
// The plain data a topology is made of (topology layer): what discovery and the XML reader produce, and what
// TopologyView::create() validates and indexes. Plain structs with defaulted ==, so a round trip can be
// compared field by field.
//
// References between components use what a person reads in numactl and lspci: NUMA nodes and packages by OS
// index, PCI devices by bus id. GPUs and NICs are referenced by their position in the host's list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/link_class.h"

namespace cfx::topo {

struct Package {
  int osIndex = 0;
  std::string model;  // "" when unknown
  bool operator==(const Package&) const = default;
};

struct NumaNode {
  int osIndex = 0;
  int package = -1;          // OS index of the package, -1 when unknown
  uint64_t memoryBytes = 0;  // local memory, 0 when unknown
  std::vector<int> cpus;     // OS indices of the processing units (hardware threads), ascending
  bool operator==(const NumaNode&) const = default;
};

struct Core {
  int osIndex = -1;
  int numa = -1;         // OS index of the NUMA node whose cpuset holds this core, -1 when unknown
  int package = -1;      // OS index of the package, -1 when unknown
  std::vector<int> pus;  // OS indices of its hardware threads, ascending
  bool operator==(const Core&) const = default;
};

struct PciDevice {
  std::string busId;        // "dddd:bb:dd.f", lower-case hex
  std::string parentBusId;  // the bridge above it, "" for a device or bridge right under a host bridge
  int numa = -1;            // OS index of the NUMA node it is attached to, -1 when unknown (roots only)
  bool bridge = false;      // a PCI-to-PCI bridge (or switch port)
  uint32_t classId = 0;     // PCI class and subclass, e.g. 0x0200 Ethernet, 0x0302 3D controller, 0x0604 bridge
  uint32_t vendor = 0;
  uint32_t device = 0;
  double linkGBps = 0;  // negotiated link bandwidth, 0 when unknown
  bool operator==(const PciDevice&) const = default;
};

struct Nic {
  std::string name;                    // interface name, e.g. "eth0"
  std::optional<int> speedMbps;        // from /sys/class/net/<if>/speed, empty when unreadable or unknown
  std::vector<std::string> addresses;  // numeric IPv4/IPv6 addresses
  std::string pciBusId;                // "" for a virtual interface
  int numa = -1;                       // OS index, -1 when unknown: then it is treated as close to every node
  bool operator==(const Nic&) const = default;
};

struct Gpu {
  std::string name;      // "NVIDIA H100 80GB HBM3"
  std::string uuid;      // "" when unknown
  std::string pciBusId;  // "" when unknown
  int numa = -1;         // OS index, -1 when unknown
  int dies = 1;          // compute dies in the package; ranks may be placed on one die each
  uint64_t memoryBytes = 0;
  bool operator==(const Gpu&) const = default;
};

struct Host {
  std::string name;  // host name, "" in synthetic topologies
  std::vector<Package> packages;
  std::vector<NumaNode> numaNodes;  // TopologyView::create() adds node 0 to a host that declares none
  std::vector<Core> cores;
  std::vector<PciDevice> pci;  // parents before children (pre-order); create() restores that order
  std::vector<Nic> nics;
  std::vector<Gpu> gpus;
  bool operator==(const Host&) const = default;
};

// One end of a link.
struct Endpoint {
  enum class Kind : int { Numa = 0, Gpu = 1, Nic = 2 };
  Kind kind = Kind::Numa;
  int host = 0;
  int index = 0;  // Numa: OS index; Gpu and Nic: position in the host's list
  int die = -1;   // Gpu only: one die, or -1 for every die of the GPU
  bool operator==(const Endpoint&) const = default;
};

// An explicitly declared link: NVLink between GPUs, a point-to-point network link between NICs of two hosts,
// or an override of an implicit one. Figures left empty come from the view's class table.
struct Link {
  Endpoint a;
  Endpoint b;
  LinkClass cls = LinkClass::Net;
  std::optional<double> gbps;
  std::optional<double> latencyUs;
  bool operator==(const Link&) const = default;
};

// Where a rank runs. Emulated multi-host shapes map ranks onto hosts here.
struct RankPlace {
  int host = 0;
  int numa = -1;  // OS index, -1: the host's first NUMA node
  int gpu = -1;   // position in the host's GPU list, -1: a CPU rank
  int die = -1;   // -1: die 0 of the GPU
  bool operator==(const RankPlace&) const = default;
};

struct TopologyData {
  int version = 1;
  std::vector<Host> hosts;
  std::vector<Link> links;       // explicit links only; implicit ones are derived by the view
  std::vector<RankPlace> ranks;  // ranks[r] is where rank r runs; empty until a communicator places ranks
  LinkClassTable classFigures = defaultLinkFigures();
  std::vector<bool> measured = std::vector<bool>(kNumLinkClasses, false);  // per class: figures came from calibration
  bool operator==(const TopologyData&) const = default;
};

// "0-3,8,10-11" from {0,1,2,3,8,10,11}, and back. parseCpuList returns false on malformed text.
std::string formatCpuList(const std::vector<int>& cpus);
bool parseCpuList(const std::string& text, std::vector<int>& out);

}  // namespace cfx::topo
