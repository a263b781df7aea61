// SPDX-License-Identifier: Apache-2.0
// Link classes and their bandwidth/latency figures (topology layer). The planner's alpha-beta cost model reads
// these: alpha is latencyUs, beta is 1 / gbps. Defaults are textbook figures per class; a calibration replaces
// them with measured ones (TopologyView::calibrated).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace cfx::topo {

// Ordered from the most local to the most remote: a path's class is the most remote class among its hops.
enum class LinkClass : int {
  Self = 0,      // a rank to itself
  DieToDie = 1,  // two dies of one GPU package (NV-HBI, xGMI inside an MI250X)
  NvLink = 2,    // GPU to GPU: NVLink, xGMI, or any GPU fabric
  Memory = 3,    // through the memory of one NUMA node: shared memory between CPU ranks, or co-located ranks
  Pci = 4,       // a PCIe hop: a GPU or NIC to its NUMA node
  Smp = 5,       // between NUMA nodes or sockets of one host (QPI, UPI, Infinity Fabric)
  Net = 6,       // between hosts, through a NIC
};
inline constexpr size_t kNumLinkClasses = 7;

// Bandwidth per direction in GB/s (1e9 bytes per second) and one-way latency in microseconds.
struct LinkFigures {
  double gbps = 0;
  double latencyUs = 0;
  bool operator==(const LinkFigures&) const = default;
};

using LinkClassTable = std::array<LinkFigures, kNumLinkClasses>;

// "self", "dietodie", "nvlink", "memory", "pci", "smp", "net": the names used in XML and log lines.
const char* linkClassName(LinkClass cls) noexcept;
// Case-insensitive inverse of linkClassName; "qpi" and "sys" are accepted for Smp, "nvl" for NvLink.
std::optional<LinkClass> parseLinkClass(std::string_view name) noexcept;

// The figures used when nothing was declared or measured: conservative for commodity hardware, so a plan built
// on them is never wildly optimistic.
const LinkClassTable& defaultLinkFigures() noexcept;

}  // namespace cfx::topo
