// SPDX-License-Identifier: Apache-2.0
// Discovery on this machine, NIC sysfs parsing on fake trees, and NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE through
// TopologyOptions (never through the environment).
#include "topology/discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/param.h"
#include "shapes.h"
#include "topology/calibration.h"
#include "topology/nic_probe.h"
#include "topology/topology_xml.h"

namespace cfx::topo {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cfx-topo-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void writeFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Two GPUs joined by NVLink, as NVML would report them.
class FakeGpuProbe final : public GpuProbe {
 public:
  GpuProbeResult probe() override {
    GpuProbeResult r;
    r.gpus = {Gpu{"Fake GPU", "GPU-0", "", -1, 1, 1ull << 30}, Gpu{"Fake GPU", "GPU-1", "", -1, 2, 1ull << 30}};
    r.links = {Link{Endpoint{Endpoint::Kind::Gpu, 0, 0, -1}, Endpoint{Endpoint::Kind::Gpu, 0, 1, -1}, LinkClass::NvLink,
                    50.0, std::nullopt}};
    r.source = "fake";
    return r;
  }
};

TEST(Discovery, ThisHostHasNumaNodesAndCores) {
  TopologyOptions options;
  FakeGpuProbe gpus;
  options.gpuProbe = &gpus;
  Result<TopologyView> v = discoverLocalHost(options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->nHosts(), 1);
  const Host& h = v->host(0);
  EXPECT_GE(h.numaNodes.size(), 1u);
  EXPECT_GE(h.cores.size(), 1u);
  EXPECT_FALSE(h.name.empty());
  EXPECT_EQ(h.gpus.size(), 2u);
  for (const Nic& n : h.nics) EXPECT_NE(n.name, "lo");
  // A rank on each GPU die and one on the CPU: every pair is reachable and NVLink joins the GPUs.
  Result<TopologyView> placed = v->withRanks({RankPlace{0, -1, 0, -1}, RankPlace{0, -1, 1, 1}, RankPlace{0}});
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->linkBetween(0, 1).cls, LinkClass::NvLink);
  EXPECT_DOUBLE_EQ(placed->linkBetween(0, 1).gbps, 50);
  EXPECT_EQ(placed->linkBetween(0, 2).cls, LinkClass::Pci);
  // The discovered view survives a dump and a reload unchanged.
  Result<TopologyView> back = parseTopologyXml(topologyToXml(*v), "local.xml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->data(), v->data());
}

TEST(Discovery, MissingSysfsLeavesNicFieldsUnknown) {
  TopologyOptions options;
  options.sysfsRoot = "/nonexistent-sysfs";
  FakeGpuProbe gpus;
  options.gpuProbe = &gpus;
  Result<TopologyView> v = discoverLocalHost(options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  for (const Nic& n : v->host(0).nics) {
    EXPECT_FALSE(n.speedMbps.has_value()) << n.name;
    EXPECT_TRUE(n.pciBusId.empty()) << n.name;
  }
}

TEST(Discovery, NicSysfsFieldsAreReadStrictly) {
  TempDir dir;
  const fs::path net = dir.path() / "class" / "net";
  const fs::path pciDev = dir.path() / "devices" / "pci0000:00" / "0000:3b:00.0";
  writeFile(pciDev / "numa_node", "1\n");
  writeFile(net / "eth0" / "speed", "25000\n");
  fs::create_directory_symlink(pciDev, net / "eth0" / "device");
  writeFile(net / "veth0" / "speed", "-1\n");
  writeFile(net / "bad0" / "speed", "10G\n");
  fs::create_directories(net / "virt0");
  fs::create_directories(pciDev / "virtio3");
  fs::create_directory_symlink(pciDev / "virtio3", net / "virt0" / "device");

  Nic eth0{"eth0", {}, {}, "", -1};
  readNicSysfs(dir.path(), eth0);
  EXPECT_EQ(eth0.speedMbps, 25000);
  EXPECT_EQ(eth0.pciBusId, "0000:3b:00.0");
  EXPECT_EQ(eth0.numa, 1);
  Nic veth{"veth0", {}, {}, "", -1};
  readNicSysfs(dir.path(), veth);
  EXPECT_FALSE(veth.speedMbps.has_value());
  EXPECT_EQ(veth.numa, -1);
  Nic bad{"bad0", {}, {}, "", -1};
  readNicSysfs(dir.path(), bad);
  EXPECT_FALSE(bad.speedMbps.has_value());
  Nic virt{"virt0", {}, {}, "", -1};
  readNicSysfs(dir.path(), virt);
  EXPECT_EQ(virt.pciBusId, "0000:3b:00.0");
  Nic missing{"nope0", {}, {}, "", -1};
  readNicSysfs(dir.path(), missing);
  EXPECT_EQ(missing, (Nic{"nope0", {}, {}, "", -1}));
}

TEST(Discovery, DlopenGpuProbeNeverFails) {
  // On a machine without NVML or CUDA this finds nothing; on a GPU machine it finds what is there.
  GpuProbeResult r = makeDlopenGpuProbe()->probe();
  if (r.source.empty()) {
    EXPECT_TRUE(r.gpus.empty());
  }
  for (const Link& l : r.links) EXPECT_EQ(l.cls, LinkClass::NvLink);
}

TEST(Discovery, BusIdsAreNormalised) {
  EXPECT_EQ(normalizeBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalizeBusId("0000:3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(normalizeBusId("3B:00.0"), "0000:3b:00.0");
}

TEST(TopologyOptions, TopoFileIsLoadedInsteadOfDiscovering) {
  TempDir dir;
  const fs::path file = dir.path() / "ring.xml";
  writeFile(file, testing::fourHostRing());
  TopologyOptions options;
  options.loadFile = file.string();
  Result<TopologyView> v = buildTopology(options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->nHosts(), 4);
  EXPECT_EQ(v->nRanks(), 4);
}

TEST(TopologyOptions, MissingTopoFileIsASystemErrorNamingThePath) {
  TopologyOptions options;
  options.loadFile = "/nonexistent/topo.xml";
  Result<TopologyView> v = buildTopology(options);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Errc::SystemError);
  EXPECT_NE(v.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

TEST(TopologyOptions, MalformedTopoFileNamesFileAndLine) {
  TempDir dir;
  const fs::path file = dir.path() / "broken.xml";
  writeFile(file, "<system version=\"1\">\n<host id=\"0\">\n<nic speed=\"1\"/>\n</host>\n</system>\n");
  TopologyOptions options;
  options.loadFile = file.string();
  Result<TopologyView> v = buildTopology(options);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find(file.string() + ":3:"), std::string::npos) << v.status().message();
}

// Discovery through `gpus`, calibrated, dumped into `dir`.
TopologyOptions calibratedDumpInto(const TempDir& dir, FakeGpuProbe* gpus) {
  TopologyOptions options;
  options.gpuProbe = gpus;
  options.dumpFile = (dir.path() / "dump.xml").string();
  options.calibrate = true;
  return options;
}

// The view `dumped` wrote, loaded back.
Result<TopologyView> loadDump(const TopologyOptions& dumped) {
  TopologyOptions reload;
  reload.loadFile = dumped.dumpFile;
  return buildTopology(reload);
}

TEST(TopologyOptions, DumpFileHoldsTheViewAndLoadsBack) {
  TempDir dir;
  FakeGpuProbe gpus;
  const TopologyOptions options = calibratedDumpInto(dir, &gpus);
  Result<TopologyView> v = buildTopology(options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_TRUE(v->data().measured[static_cast<size_t>(LinkClass::Memory)]);
  EXPECT_GT(v->figures(LinkClass::Memory).gbps, 0);

  Result<TopologyView> back = loadDump(options);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->data(), v->data());
}

TEST(TopologyOptions, AgreedFiguresWinOverALocalMeasurementAndReachTheDump) {
  TempDir dir;
  FakeGpuProbe gpus;
  TopologyOptions options = calibratedDumpInto(dir, &gpus);
  Calibration agreed;
  agreed.measured[static_cast<size_t>(LinkClass::Memory)] = LinkFigures{3.25, 0.75};
  options.agreed = agreed;
  Result<TopologyView> v = buildTopology(options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->figures(LinkClass::Memory), (LinkFigures{3.25, 0.75}));
  Result<TopologyView> back = loadDump(options);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->figures(LinkClass::Memory), (LinkFigures{3.25, 0.75}));
  EXPECT_TRUE(back->data().measured[static_cast<size_t>(LinkClass::Memory)]);
}

TEST(Calibration, RanksAgreeOnThePerClassMedian) {
  auto one = [](LinkClass c, double gbps, double lat) {
    Calibration k;
    k.measured[static_cast<size_t>(c)] = LinkFigures{gbps, lat};
    return k;
  };
  // Bandwidth and latency take their medians separately; a class measured by some ranks only still agrees.
  std::vector<Calibration> ranks = {one(LinkClass::Memory, 9.0, 0.5), one(LinkClass::Memory, 30.0, 0.1),
                                    one(LinkClass::Memory, 12.0, 0.9), one(LinkClass::Net, 1.0, 40.0)};
  const Calibration agreed = agreeOn(ranks);
  ASSERT_TRUE(agreed.measured[static_cast<size_t>(LinkClass::Memory)]);
  EXPECT_EQ(*agreed.measured[static_cast<size_t>(LinkClass::Memory)], (LinkFigures{12.0, 0.5}));
  ASSERT_TRUE(agreed.measured[static_cast<size_t>(LinkClass::Net)]);
  EXPECT_EQ(*agreed.measured[static_cast<size_t>(LinkClass::Net)], (LinkFigures{1.0, 40.0}));
  EXPECT_FALSE(agreed.measured[static_cast<size_t>(LinkClass::Smp)]);
  // An even count takes the lower middle value, and the order of the ranks does not matter.
  std::vector<Calibration> even = {one(LinkClass::Memory, 8.0, 1.0), one(LinkClass::Memory, 4.0, 2.0)};
  std::vector<Calibration> swapped = {even[1], even[0]};
  EXPECT_EQ(*agreeOn(even).measured[static_cast<size_t>(LinkClass::Memory)], (LinkFigures{4.0, 1.0}));
  EXPECT_EQ(agreeOn(even).measured, agreeOn(swapped).measured);
  EXPECT_FALSE(agreeOn({}).measured[static_cast<size_t>(LinkClass::Memory)]);
}

TEST(TopologyOptions, UnwritableDumpFileIsASystemError) {
  TopologyOptions options;
  options.loadFile.clear();
  FakeGpuProbe gpus;
  options.gpuProbe = &gpus;
  options.dumpFile = "/nonexistent-dir/dump.xml";
  Result<TopologyView> v = buildTopology(options);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Errc::SystemError);
}

TEST(TopologyOptions, KnobsAreRegisteredWithHelp) {
  (void)TopologyOptions::fromParams();
  int found = 0;
  for (const param::ParamBase* p : param::all()) {
    for (const char* name : {"NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", "CFX_TOPO_CALIBRATE"}) {
      if (std::strcmp(p->name(), name) != 0) continue;
      ++found;
      EXPECT_GT(std::strlen(p->help()), 10u) << name;
      EXPECT_TRUE(p->defaultIsValid()) << name;
    }
  }
  EXPECT_EQ(found, 3);
}

}  // namespace
}  // namespace cfx::topo
