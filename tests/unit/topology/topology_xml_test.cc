// SPDX-License-Identifier: Apache-2.0
// The topology XML format: lossless round trips, and malformed input reported with its line.
#include "topology/topology_xml.h"

#include <gtest/gtest.h>

#include "shapes.h"
#include "topology/xml.h"

namespace cfx::topo {
namespace {

// A topology using every field, with values that stress the number formatting.
TopologyData everyField() {
  TopologyData d;
  Host& h = d.hosts.emplace_back();
  h.name = "node-<a>&\"b\"";
  h.packages = {Package{0, "Xeon \"Gold\" 6338"}, Package{1, ""}};
  h.numaNodes = {NumaNode{0, 0, 1ull << 36, {0, 1, 2, 3, 8}}, NumaNode{1, 1, 0, {}}};
  h.cores = {Core{0, 0, 0, {0, 8}}, Core{1, -1, -1, {}}};
  h.pci = {PciDevice{"0000:00:01.0", "", 0, true, 0x0604, 0x8086, 0x1234, 15.754},
           PciDevice{"0000:01:00.0", "0000:00:01.0", -1, false, 0x0200, 0x15b3, 0x1017, 0.1},
           PciDevice{"0000:80:00.0", "", 1, false, 0x0302, 0x10de, 0x2330, 0}};
  h.nics = {Nic{"eth0", 25000, {"10.0.0.1", "fe80::1"}, "0000:01:00.0", 0}, Nic{"veth1", std::nullopt, {}, "", -1}};
  h.gpus = {Gpu{"NVIDIA H100", "GPU-1234", "0000:80:00.0", 1, 2, 80ull << 30}};
  d.hosts.push_back(Host{});
  d.hosts[1].numaNodes = {NumaNode{3, -1, 0, {}}};
  d.links = {Link{Endpoint{Endpoint::Kind::Gpu, 0, 0, 1}, Endpoint{Endpoint::Kind::Numa, 0, 1, -1}, LinkClass::Pci,
                  1.0 / 3, std::nullopt},
             Link{Endpoint{Endpoint::Kind::Nic, 0, 0, -1}, Endpoint{Endpoint::Kind::Numa, 1, 3, -1}, LinkClass::Net,
                  std::nullopt, 12.5}};
  d.ranks = {RankPlace{0, 1, 0, 1}, RankPlace{1, 3, -1, -1}, RankPlace{0, -1, -1, -1}};
  d.classFigures[static_cast<size_t>(LinkClass::Smp)] = LinkFigures{0.1 + 0.2, 1e-7};
  d.measured[static_cast<size_t>(LinkClass::Smp)] = true;
  return d;
}

TEST(TopologyXml, RoundTripIsLossless) {
  Result<TopologyView> original = TopologyView::create(everyField());
  ASSERT_TRUE(original.ok()) << original.status().message();
  const std::string text = topologyToXml(*original);
  Result<TopologyView> back = parseTopologyXml(text, "every.xml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(back->data(), original->data()) << text;
  EXPECT_EQ(topologyToXml(*back), text);
}

TEST(TopologyXml, SyntheticShapesRoundTrip) {
  for (const std::string& xml :
       {testing::twoHostsFourRanks(), testing::fourHostRing(), testing::fourNodesFourGpusTwoDies()}) {
    Result<TopologyView> v = parseTopologyXml(xml, "shape.xml");
    ASSERT_TRUE(v.ok()) << v.status().message();
    Result<TopologyView> back = parseTopologyXml(topologyToXml(*v), "dumped.xml");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->data(), v->data());
    EXPECT_EQ(back->links().size(), v->links().size());
  }
}

TEST(TopologyXml, PciChildrenListedBeforeTheirParentAreReorderedNotLost) {
  TopologyData d;
  d.hosts.emplace_back();
  d.hosts[0].pci = {PciDevice{"0000:02:00.0", "0000:01:00.0", -1, false, 0x200, 0, 0, 0},
                    PciDevice{"0000:01:00.0", "", -1, true, 0x604, 0, 0, 0}};
  Result<TopologyView> v = TopologyView::create(d);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->host(0).pci[0].busId, "0000:01:00.0");
  Result<TopologyView> back = parseTopologyXml(topologyToXml(*v), "pci.xml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->data(), v->data());
}

void expectError(const std::string& xml, const std::string& where, const std::string& what) {
  Result<TopologyView> v = parseTopologyXml(xml, "bad.xml");
  ASSERT_FALSE(v.ok()) << xml;
  EXPECT_EQ(v.status().code(), Errc::InvalidArgument);
  EXPECT_NE(v.status().message().find(where), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find(what), std::string::npos) << v.status().message();
}

TEST(TopologyXml, MalformedInputNamesTheLine) {
  expectError("<system version=\"1\">\n  <host id=\"0\">\n    <numa id=\"0\"\n", "bad.xml:3:", "not closed");
  expectError("<system version=\"1\">\n<host id=\"0\">\n<numa id=\"0\">\n</host>\n</system>\n",
              "bad.xml:4:", "</host> closes <numa>, opened at line 3");
  expectError("<system version=\"1\">\n<host>\n\n<nic name=\"e\" speed=\"fast\"/>\n</host></system>",
              "bad.xml:4:", "'speed'");
  expectError("<system version=\"1\">\n<hots/>\n</system>", "bad.xml:2:", "<hots>");
  expectError("<system version=\"1\">\n<link a=\"h0:numa0\" b=\"h0:numa0\" class=\"warp\"/>\n</system>",
              "bad.xml:2:", "warp");
  expectError("<system version=\"1\">\n<link a=\"host0\" b=\"h0:numa0\" class=\"net\"/>\n</system>",
              "bad.xml:2:", "'a'");
  expectError("<system version=\"1\">\n<!-- unterminated\n</system>", "bad.xml:2:", "comment");
  expectError("<system version=\"1\">\n<host name=\"a&b;\"/>\n</system>", "bad.xml:2:", "&b;");
  expectError("<system version=\"1\">\n<host id=\"0\"/>\n<host id=\"2\"/>\n</system>", "bad.xml:3:", "in order");
  expectError("<system version=\"1\">\n<host id=\"0\" id=\"0\"/>\n</system>", "bad.xml:2:", "twice");
  expectError("<system version=\"1\">\nstray text\n</system>", "bad.xml:2:", "text");
  expectError("<system version=\"1\"/>\n<system version=\"1\"/>", "bad.xml:2:", "after the root");
  expectError("<system version=\"2\"/>", "bad.xml:1:", "version 2");
  expectError("", "bad.xml:1:", "empty");
  expectError("<topology/>", "bad.xml:1:", "<system>");
  expectError("<system version=\"1\"><rank id=\"0\" host=\"4\"/></system>", "bad.xml", "host 4");
}

TEST(TopologyXml, EntitiesAndQuotesAreDecoded) {
  Result<xml::Element> el = xml::parse("<a x='&lt;&#65;&#x42;&gt;' y=\"'\"/>", "e.xml");
  ASSERT_TRUE(el.ok()) << el.status().message();
  EXPECT_EQ(*el->attribute("x"), "<AB>");
  EXPECT_EQ(*el->attribute("y"), "'");
  Result<xml::Element> back = xml::parse(xml::write(*el), "e2.xml");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->attributes, el->attributes);
}

}  // namespace
}  // namespace cfx::topo
