// SPDX-License-Identifier: Apache-2.0
// Names and default figures of the link classes (topology layer).
#include "topology/link_class.h"

#include <cctype>
#include <string>

namespace cfx::topo {

namespace {
constexpr std::array<const char*, kNumLinkClasses> kNames = {"self", "dietodie", "nvlink", "memory",
                                                             "pci",  "smp",      "net"};
}  // namespace

const char* linkClassName(LinkClass cls) noexcept {
  const auto i = static_cast<size_t>(cls);
  return i < kNames.size() ? kNames[i] : "unknown";
}

std::optional<LinkClass> parseLinkClass(std::string_view name) noexcept {
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (size_t i = 0; i < kNames.size(); ++i)
    if (lower == kNames[i]) return static_cast<LinkClass>(i);
  if (lower == "qpi" || lower == "sys") return LinkClass::Smp;
  if (lower == "nvl") return LinkClass::NvLink;
  return std::nullopt;
}

const LinkClassTable& defaultLinkFigures() noexcept {
  // Self: a memcpy within one buffer's cache/memory. DieToDie: package-internal fabric (MI250X: 200 GB/s).
  // NvLink: one direction of a few NVLink4 links. Memory: one core's shared-memory copy rate. Pci: Gen4 x16.
  // Smp: a cross-socket copy. Net: 10 Gbit/s Ethernet with a kernel TCP stack.
  static const LinkClassTable table = {{
      {100.0, 0.0},  // Self
      {200.0, 0.5},  // DieToDie
      {150.0, 1.0},  // NvLink
      {10.0, 0.3},   // Memory
      {24.0, 1.0},   // Pci
      {8.0, 0.6},    // Smp
      {1.25, 20.0},  // Net
  }};
  return table;
}

}  // namespace cfx::topo
