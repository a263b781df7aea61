// SPDX-License-Identifier: Apache-2.0
// TopologyView on the synthetic shapes: rank queries, routes and the figures the planner will read.
#include <gtest/gtest.h>

#include "shapes.h"
#include "topology/topology_xml.h"

namespace cfx::topo {
namespace {

TopologyView load(const std::string& xml, const char* name) {
  Result<TopologyView> view = parseTopologyXml(xml, name);
  EXPECT_TRUE(view.ok()) << view.status().message();
  return std::move(view).value();
}

TEST(TopologyView, TwoHostsFourRanksAnswerRankQueries) {
  const TopologyView v = load(testing::twoHostsFourRanks(), "2x4.xml");
  EXPECT_EQ(v.nHosts(), 2);
  EXPECT_EQ(v.nRanks(), 8);
  EXPECT_EQ(v.hostOf(5), 1);
  EXPECT_EQ(v.ranksOnHost(1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(v.localRankOf(6), 2);

  const PathFigures self = v.linkBetween(3, 3);
  EXPECT_EQ(self.cls, LinkClass::Self);
  const PathFigures local = v.linkBetween(0, 1);
  EXPECT_EQ(local.cls, LinkClass::Memory);
  EXPECT_DOUBLE_EQ(local.gbps, v.figures(LinkClass::Memory).gbps);

  const PathFigures remote = v.linkBetween(0, 4);
  EXPECT_EQ(remote.cls, LinkClass::Net);
  EXPECT_DOUBLE_EQ(remote.gbps, 0.125);  // 1000 Mbps
  // numa -> nic (pci), nic -> switch -> nic (half the net latency each), nic -> numa (pci)
  EXPECT_DOUBLE_EQ(remote.latencyUs, 2 * v.figures(LinkClass::Pci).latencyUs + v.figures(LinkClass::Net).latencyUs);
  EXPECT_EQ(remote.hops, 4);
  const std::vector<LinkId> path = v.pathBetween(0, 4);
  const PathFigures viaPath = v.bottleneck(path);
  EXPECT_EQ(viaPath.cls, remote.cls);
  EXPECT_DOUBLE_EQ(viaPath.latencyUs, remote.latencyUs);
}

TEST(TopologyView, RailRoutesLeaveAndEnterThroughTheRailsNic) {
  // Two hosts with two NICs each (the second on NUMA node 1), and a host with one NIC; ranks on NUMA node 0.
  const TopologyView v = load(
      "<system version=\"1\">\n"
      "  <host id=\"0\"><numa id=\"0\"/><numa id=\"1\"/><nic name=\"a\" speed=\"1000\"/>"
      "<nic name=\"b\" speed=\"1000\" numa=\"1\"/></host>\n"
      "  <host id=\"1\"><numa id=\"0\"/><numa id=\"1\"/><nic name=\"a\" speed=\"1000\"/>"
      "<nic name=\"b\" speed=\"1000\" numa=\"1\"/></host>\n"
      "  <host id=\"2\"><numa id=\"0\"/><nic name=\"a\" speed=\"1000\"/></host>\n"
      "  <rank id=\"0\" host=\"0\" numa=\"0\"/><rank id=\"1\" host=\"1\" numa=\"0\"/>"
      "<rank id=\"2\" host=\"2\"/><rank id=\"3\" host=\"0\" numa=\"0\"/>\n"
      "</system>\n",
      "rails.xml");
  EXPECT_EQ(v.railsOf(0), 2);
  EXPECT_EQ(v.railsOf(2), 1);
  const auto names = [&](const std::vector<TopologyView::Hop>& route) {
    std::vector<std::string> out;
    for (const TopologyView::Hop& hop : route) {
      const GraphLink& l = v.links()[static_cast<size_t>(hop.link)];
      out.push_back(v.nodeName(hop.forward ? l.nodeA : l.nodeB) + ">" + v.nodeName(hop.forward ? l.nodeB : l.nodeA));
    }
    return out;
  };
  using Path = std::vector<std::string>;
  EXPECT_EQ(names(v.routeBetween(0, 1, 0)), names(v.routeBetween(0, 1)));
  EXPECT_EQ(names(v.routeBetween(0, 1, 0)),
            (Path{"h0:numa0>h0:nic0", "h0:nic0>switch", "switch>h1:nic0", "h1:nic0>h1:numa0"}));
  // Rail 1 leaves through the second NIC, reached from node 0 over the host's NUMA link.
  EXPECT_EQ(names(v.routeBetween(0, 1, 1)), (Path{"h0:numa0>h0:numa1", "h0:numa1>h0:nic1", "h0:nic1>switch",
                                                  "switch>h1:nic1", "h1:nic1>h1:numa1", "h1:numa1>h1:numa0"}));
  EXPECT_EQ(names(v.routeBetween(0, 1, 2)), names(v.routeBetween(0, 1, 0))) << "rails wrap around";
  // A host with one NIC uses it on every rail; the other end still takes its rail's NIC.
  EXPECT_EQ(names(v.routeBetween(2, 0, 1)),
            (Path{"h2:numa0>h2:nic0", "h2:nic0>switch", "switch>h0:nic1", "h0:nic1>h0:numa1", "h0:numa1>h0:numa0"}));
  // Within a host there is no switch to cross: the plain route.
  EXPECT_TRUE(v.routeBetween(0, 3, 1).empty());
}

TEST(TopologyView, FourHostRingRoutesAroundTheRingNotThroughASwitch) {
  const TopologyView v = load(testing::fourHostRing(), "ring.xml");
  EXPECT_EQ(v.nHosts(), 4);
  const double pci = v.figures(LinkClass::Pci).latencyUs;
  const PathFigures neighbour = v.linkBetween(0, 1);
  EXPECT_EQ(neighbour.cls, LinkClass::Net);
  EXPECT_DOUBLE_EQ(neighbour.gbps, 0.125);
  EXPECT_DOUBLE_EQ(neighbour.latencyUs, 50 + 2 * pci);
  EXPECT_EQ(neighbour.hops, 3);
  // The other way round is a neighbour too.
  EXPECT_DOUBLE_EQ(v.linkBetween(0, 3).latencyUs, 50 + 2 * pci);
  const PathFigures across = v.linkBetween(0, 2);
  EXPECT_EQ(across.cls, LinkClass::Net);
  EXPECT_DOUBLE_EQ(across.latencyUs, 2 * (50 + 2 * pci));
  EXPECT_EQ(across.hops, 6);
  for (LinkId id : v.pathBetween(0, 2)) EXPECT_NE(v.nodeName(v.links()[id].nodeB), "switch");
}

TEST(TopologyView, FourNodesFourGpusTwoDiesHasThreeLevels) {
  const TopologyView v = load(testing::fourNodesFourGpusTwoDies(), "4x4x2.xml");
  EXPECT_EQ(v.nHosts(), 4);
  EXPECT_EQ(v.nRanks(), 32);
  EXPECT_EQ(v.ranksOnHost(3).front(), 24);
  EXPECT_EQ(v.placeOf(13).gpu, 2);
  EXPECT_EQ(v.placeOf(13).die, 1);

  const PathFigures die = v.linkBetween(0, 1);
  EXPECT_EQ(die.cls, LinkClass::DieToDie);
  EXPECT_EQ(die.hops, 1);
  const PathFigures device = v.linkBetween(0, 3);  // gpu0 die0 -> gpu1 die1
  EXPECT_EQ(device.cls, LinkClass::NvLink);
  EXPECT_DOUBLE_EQ(device.gbps, 300);
  EXPECT_EQ(device.hops, 1);
  const PathFigures host = v.linkBetween(0, 8);
  EXPECT_EQ(host.cls, LinkClass::Net);
  EXPECT_DOUBLE_EQ(host.gbps, 12.5);  // 100 Gbit/s
  // The three levels order by speed: die > device > host.
  EXPECT_GT(die.gbps, host.gbps);
  EXPECT_GT(device.gbps, host.gbps);
  EXPECT_LT(die.latencyUs, host.latencyUs);
  EXPECT_LT(device.latencyUs, host.latencyUs);
}

TEST(TopologyView, RanksSharingOneNodeUseMemoryFigures) {
  Result<TopologyView> v = parseTopologyXml(
      R"(<system version="1"><host id="0"><gpu id="0"/></host>
         <rank id="0" host="0" gpu="0"/><rank id="1" host="0" gpu="0"/><rank id="2" host="0"/></system>)",
      "shared.xml");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->linkBetween(0, 1).cls, LinkClass::Memory);
  EXPECT_TRUE(v->pathBetween(0, 1).empty());
  EXPECT_EQ(v->linkBetween(0, 2).cls, LinkClass::Pci);
}

TEST(TopologyView, ADeclaredLinkReplacesTheImplicitOneBetweenTheSameNodes) {
  const TopologyView v = load(
      R"(<system version="1"><host id="0"><numa id="0"/><numa id="1"/></host>
         <link a="h0:numa0" b="h0:numa1" class="smp" bw="0.25" lat="40"/>
         <rank id="0" host="0" numa="0"/><rank id="1" host="0" numa="1"/></system>)",
      "slow-smp.xml");
  const PathFigures p = v.linkBetween(0, 1);
  EXPECT_EQ(p.cls, LinkClass::Smp);
  EXPECT_DOUBLE_EQ(p.gbps, 0.25);
  EXPECT_DOUBLE_EQ(p.latencyUs, 40);  // slower than the net class: no path through the switch wins
  int smp = 0;
  for (const GraphLink& l : v.links()) smp += l.cls == LinkClass::Smp;
  EXPECT_EQ(smp, 1);
}

TEST(TopologyView, UnreachableRanksAreRejectedAtCreate) {
  // Hosts 0 and 1 are joined point to point; host 2's two NICs are joined only to each other.
  Result<TopologyView> v = parseTopologyXml(
      R"(<system version="1">
           <host id="0"><nic name="a"/></host><host id="1"><nic name="b"/></host>
           <host id="2"><nic name="c"/><nic name="d"/></host>
           <link a="h0:nic0" b="h1:nic0" class="net"/><link a="h2:nic0" b="h2:nic1" class="net"/>
           <rank id="0" host="0"/><rank id="1" host="2"/></system>)",
      "island.xml");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("cannot reach"), std::string::npos) << v.status().message();
}

TEST(TopologyView, BadReferencesNameTheirOwner) {
  TopologyData data;
  data.hosts.emplace_back();
  data.ranks.push_back(RankPlace{0, -1, 3, -1});
  Result<TopologyView> v = TopologyView::create(data);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Errc::InvalidArgument);
  EXPECT_NE(v.status().message().find("rank 0"), std::string::npos) << v.status().message();

  data.ranks.clear();
  data.hosts[0].pci.push_back(PciDevice{"0000:01:00.0", "0000:00:01.0", -1, false, 0x200, 0, 0, 0});
  v = TopologyView::create(data);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("0000:00:01.0"), std::string::npos) << v.status().message();
}

TEST(TopologyView, CalibrationReplacesClassFiguresButKeepsDeclaredOnes) {
  TopologyView v = [] {
    Result<TopologyView> r = parseTopologyXml(testing::fourNodesFourGpusTwoDies(), "4x4x2.xml");
    return std::move(r).value();
  }();
  Calibration c;
  c.measured[static_cast<size_t>(LinkClass::NvLink)] = LinkFigures{99, 2};
  c.measured[static_cast<size_t>(LinkClass::DieToDie)] = LinkFigures{400, 0.25};
  Result<TopologyView> cal = v.calibrated(c);
  ASSERT_TRUE(cal.ok()) << cal.status().message();
  EXPECT_TRUE(cal->data().measured[static_cast<size_t>(LinkClass::DieToDie)]);
  EXPECT_FALSE(cal->data().measured[static_cast<size_t>(LinkClass::Net)]);
  EXPECT_DOUBLE_EQ(cal->linkBetween(0, 1).gbps, 400);
  EXPECT_DOUBLE_EQ(cal->linkBetween(0, 2).gbps, 300);     // declared bw kept
  EXPECT_DOUBLE_EQ(cal->linkBetween(0, 2).latencyUs, 2);  // latency was not declared: measured one applies
}

TEST(TopologyView, WithRanksPlacesRanksOnADiscoveredShape) {
  Result<TopologyView> v = parseTopologyXml(testing::twoHostsFourRanks(), "2x4.xml");
  ASSERT_TRUE(v.ok());
  Result<TopologyView> two = v->withRanks({RankPlace{1}, RankPlace{0}});
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(two->nRanks(), 2);
  EXPECT_EQ(two->ranksOnHost(0), std::vector<int>{1});
  EXPECT_EQ(two->linkBetween(0, 1).cls, LinkClass::Net);
  EXPECT_FALSE(v->withRanks({RankPlace{2}}).ok());
}

TEST(TopologyView, CpuListsRoundTrip) {
  std::vector<int> cpus;
  ASSERT_TRUE(parseCpuList("0-3,8,10-11", cpus));
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(formatCpuList(cpus), "0-3,8,10-11");
  EXPECT_FALSE(parseCpuList("3-1", cpus));
  EXPECT_FALSE(parseCpuList("1,", cpus));
  EXPECT_FALSE(parseCpuList("2,1", cpus));
  EXPECT_FALSE(parseCpuList("a", cpus));
  EXPECT_TRUE(parseCpuList("", cpus));
  EXPECT_TRUE(cpus.empty());
}

}  // namespace
}  // namespace cfx::topo
