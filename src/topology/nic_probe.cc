// SPDX-License-Identifier: Apache-2.0
// NIC discovery through getifaddrs and sysfs (topology layer).
#include "topology/nic_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "topology/gpu_probe.h"

namespace cfx::topo {

namespace {

std::optional<long> readLong(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  long v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::string numericAddress(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

struct IfaddrsDeleter {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};

}  // namespace

void readNicSysfs(const std::string& sysfsRoot, Nic& nic) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(sysfsRoot) / "class" / "net" / nic.name;
  // Reading speed of a down or virtual link fails with EINVAL, or gives -1; both mean unknown.
  if (auto speed = readLong(dir / "speed"); speed && *speed > 0 && *speed < (1L << 30))
    nic.speedMbps = static_cast<int>(*speed);
  std::error_code ec;
  const fs::path device = fs::canonical(dir / "device", ec);
  // A virtio NIC's device is virtioN under its PCI function, so the function may be one level up.
  for (fs::path p = device; !ec && !p.empty() && p != p.root_path(); p = p.parent_path()) {
    const std::string base = p.filename().string();
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    char tail = 0;
    if (std::sscanf(base.c_str(), "%4x:%2x:%2x.%1x%c", &domain, &bus, &dev, &fn, &tail) == 4) {
      nic.pciBusId = normalizeBusId(base);
      break;
    }
    if (p != device) break;  // look at most one level up
  }
  if (auto numa = readLong(dir / "device" / "numa_node"); numa && *numa >= 0 && *numa < (1L << 20))
    nic.numa = static_cast<int>(*numa);
}

std::vector<Nic> probeNics(const std::string& sysfsRoot) {
  std::vector<Nic> nics;
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return nics;
  std::unique_ptr<ifaddrs, IfaddrsDeleter> list(raw);
  for (ifaddrs* ifa = raw; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_name || (ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP)) continue;
    auto it = std::find_if(nics.begin(), nics.end(), [&](const Nic& n) { return n.name == ifa->ifa_name; });
    if (it == nics.end()) {
      nics.push_back(Nic{});
      nics.back().name = ifa->ifa_name;
      it = nics.end() - 1;
    }
    if (ifa->ifa_addr) {
      std::string addr = numericAddress(ifa->ifa_addr);
      if (!addr.empty()) it->addresses.push_back(std::move(addr));
    }
  }
  for (Nic& n : nics) readNicSysfs(sysfsRoot, n);
  return nics;
}

}  // namespace cfx::topo
