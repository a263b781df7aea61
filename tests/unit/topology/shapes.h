// SPDX-License-Identifier: Apache-2.0
// Synthetic topologies in the XML format, shared by the topology tests.
#pragma once

#include <string>

namespace cfx::topo::testing {

// 2 hosts x 4 CPU ranks, one 1 Gbit/s NIC each, joined through the implicit switch.
std::string twoHostsFourRanks();
// 4 hosts, one rank each, in a ring of point-to-point links (1 Gbit/s, 50 us), two NICs per host.
std::string fourHostRing();
// 4 hosts x 4 GPUs x 2 dies, one rank per die; NVLink between every GPU pair, a 100 Gbit/s NIC per host.
std::string fourNodesFourGpusTwoDies();

}  // namespace cfx::topo::testing
