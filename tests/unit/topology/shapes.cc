// SPDX-License-Identifier: Apache-2.0
// Synthetic topologies in the XML format, shared by the topology tests.
#include "shapes.h"

#include "common/status.h"

namespace cfx::topo::testing {

std::string twoHostsFourRanks() {
  return R"(<?xml version="1.0"?>
<!-- 2 hosts x 4 ranks: shared memory within a host, 1 Gbit/s between them -->
<system version="1">
  <host id="0" name="a">
    <numa id="0" cpus="0-3"/>
    <nic name="veth0" speed="1000" addr="10.0.0.1"/>
  </host>
  <host id="1" name="b">
    <numa id="0" cpus="0-3"/>
    <nic name="veth0" speed="1000" addr="10.0.0.2"/>
  </host>
  <rank id="0" host="0"/> <rank id="1" host="0"/> <rank id="2" host="0"/> <rank id="3" host="0"/>
  <rank id="4" host="1"/> <rank id="5" host="1"/> <rank id="6" host="1"/> <rank id="7" host="1"/>
</system>
)";
}

std::string fourHostRing() {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < 4; ++h)
    xml += strprintf("  <host id=\"%d\"><numa id=\"0\"/><nic name=\"left\"/><nic name=\"right\"/></host>\n", h);
  for (int h = 0; h < 4; ++h)
    xml += strprintf("  <link a=\"h%d:nic1\" b=\"h%d:nic0\" class=\"net\" bw=\"0.125\" lat=\"50\"/>\n", h, (h + 1) % 4);
  for (int h = 0; h < 4; ++h) xml += strprintf("  <rank id=\"%d\" host=\"%d\"/>\n", h, h);
  return xml + "</system>\n";
}

std::string fourNodesFourGpusTwoDies() {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < 4; ++h) {
    xml += strprintf(
        "  <host id=\"%d\">\n    <numa id=\"0\" cpus=\"0-31\"/>\n    <nic name=\"ib0\" speed=\"100000\" numa=\"0\"/>\n",
        h);
    for (int g = 0; g < 4; ++g) xml += strprintf("    <gpu id=\"%d\" numa=\"0\" dies=\"2\"/>\n", g);
    xml += "  </host>\n";
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        xml += strprintf("  <link a=\"h%d:gpu%d\" b=\"h%d:gpu%d\" class=\"nvlink\" bw=\"300\"/>\n", h, a, h, b);
  }
  for (int r = 0; r < 32; ++r)
    xml += strprintf("  <rank id=\"%d\" host=\"%d\" gpu=\"%d\" die=\"%d\"/>\n", r, r / 8, (r % 8) / 2, r % 2);
  return xml + "</system>\n";
}

}  // namespace cfx::topo::testing
