// SPDX-License-Identifier: Apache-2.0
// NIC discovery (topology layer): interfaces and addresses from getifaddrs, speed and PCI attachment from sysfs.
// Containers and VMs often hide or fake sysfs entries: a missing or unreadable file leaves that field unknown.
#pragma once

#include <string>
#include <vector>

#include "topology/topology_data.h"

namespace cfx::topo {

// Every interface that is up, except loopback, in getifaddrs order, with its numeric addresses; sysfs fields
// read from `sysfsRoot` (normally "/sys"). Never fails: with no interfaces it returns none.
std::vector<Nic> probeNics(const std::string& sysfsRoot);

// Fills nic.speedMbps, nic.pciBusId and nic.numa from <sysfsRoot>/class/net/<nic.name>/. Fields whose files are
// missing or hold nonsense (speed -1 on virtual interfaces, numa_node -1) are left unknown.
void readNicSysfs(const std::string& sysfsRoot, Nic& nic);

}  // namespace cfx::topo
