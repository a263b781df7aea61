// SPDX-License-Identifier: Apache-2.0
// The planner's compressed side on synthetic machines: a codec is used where it pays (slow links between hosts) and
// not on shared memory; Always and Never are obeyed; top-k gathers; hierarchical machines compress only across
// hosts; NCCL_ALGO chooses among the compressed forms and reaches the requantising ring only by name.
#include <gtest/gtest.h>

#include "collectives/planner.h"
#include "common/status.h"
#include "topology/topology_xml.h"

namespace cfx::coll {
namespace {

constexpr size_t kSlice = 128 * 1024;

// `hosts` hosts of `perHost` ranks, each with one NIC of `mbps` behind a switch.
std::string star(int hosts, int perHost, int mbps) {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < hosts; ++h) {
    xml += strprintf("  <host id=\"%d\"><numa id=\"0\"/><nic name=\"eth0\" speed=\"%d\"/></host>\n", h, mbps);
  }
  for (int r = 0; r < hosts * perHost; ++r) xml += strprintf("  <rank id=\"%d\" host=\"%d\"/>\n", r, r / perHost);
  return xml + "</system>\n";
}

struct Machine {
  Layout layout;
  Fabric fabric;
};

Machine machine(const std::string& xml) {
  Result<topo::TopologyView> view = topo::parseTopologyXml(xml, "test");
  EXPECT_TRUE(view.ok()) << view.status().message();
  Layout layout = layoutOf(view.value());
  return Machine{layout, fabricOf(view.value(), layout)};
}

PlanRequest request(const Machine& m, Collective coll, size_t bytes, const compress::Codec* codec,
                    CompressArgs::Mode mode = CompressArgs::Mode::Auto) {
  PlanRequest req;
  req.coll = coll;
  req.bytes = bytes;
  req.nRanks = m.layout.nRanks();
  req.sliceBytes = kSlice;
  req.fabric = &m.fabric;
  req.codec = codec;
  req.compressMode = mode;
  return req;
}

compress::Codec codec(const char* text) { return *compress::Codec::make(*compress::parseCodec(text), DataType::Float32); }

TEST(PlannerCompress, SlowLinksBetweenHostsCompressAndSharedMemoryDoesNot) {
  const compress::Codec int8 = codec("int8");
  const Machine wan = machine(star(4, 1, 100));
  const Plan p = choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8), PlannerOptions{});
  EXPECT_EQ(p.algorithm, Algorithm::QuantOnce);
  EXPECT_EQ(p.codec, &int8);
  // The model: a quarter of the bytes on a 100 Mbit/s link is about a quarter of the time.
  const PlanRequest req = request(wan, Collective::AllReduce, size_t{64} << 20, &int8);
  PlanRequest plain = req;
  plain.codec = nullptr;
  EXPECT_LT(estimateCompressedUs(req, Algorithm::QuantOnce), 0.35 * estimateUs(plain, Algorithm::Ring));

  const Machine oneHost = machine(star(1, 4, 1000));
  EXPECT_EQ(choosePlan(request(oneHost, Collective::AllReduce, size_t{64} << 20, &int8), PlannerOptions{}).codec, nullptr)
      << "memory moves bytes faster than the codec encodes them";
  const Plan forced =
      choosePlan(request(oneHost, Collective::AllReduce, size_t{64} << 20, &int8, CompressArgs::Mode::Always), {});
  EXPECT_EQ(forced.codec, &int8) << "Always compresses anyway";
  EXPECT_EQ(forced.algorithm, Algorithm::QuantOnce);
  EXPECT_EQ(choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8, CompressArgs::Mode::Never), {}).codec,
            nullptr);
}

TEST(PlannerCompress, TinyOpsStayPlainEvenOnSlowLinks) {
  const compress::Codec int8 = codec("int8");
  const Machine wan = machine(star(4, 1, 100));
  EXPECT_EQ(choosePlan(request(wan, Collective::AllReduce, 64, &int8), PlannerOptions{}).codec, nullptr)
      << "a latency-bound op gains nothing from fewer bytes";
}

TEST(PlannerCompress, TopKGathersAndHierarchicalMachinesCompressOnlyAcrossHosts) {
  const compress::Codec topk = codec("topk:0.01");
  const compress::Codec int8 = codec("int8");
  const Machine wan = machine(star(4, 1, 100));
  const Plan sparse = choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &topk), PlannerOptions{});
  EXPECT_EQ(sparse.algorithm, Algorithm::SparseGather);
  EXPECT_EQ(sparse.codec, &topk);
  const Machine hier = machine(star(2, 4, 1000));
  const Plan h = choosePlan(request(hier, Collective::AllReduce, size_t{64} << 20, &int8, CompressArgs::Mode::Always), {});
  EXPECT_EQ(h.algorithm, Algorithm::Hier) << "plain within a host, compressed across hosts";
  EXPECT_EQ(h.codec, &int8);
}

TEST(PlannerCompress, OtherCollectivesAndNcclAlgo) {
  const compress::Codec int8 = codec("int8");
  const Machine wan = machine(star(4, 1, 100));
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather}) {
    const Plan p = choosePlan(request(wan, c, size_t{64} << 20, &int8), PlannerOptions{});
    EXPECT_EQ(p.algorithm, Algorithm::QuantOnce) << collectiveName(c);
    EXPECT_EQ(p.codec, &int8);
  }
  const Plan b = choosePlan(request(wan, Collective::Broadcast, size_t{64} << 20, &int8), PlannerOptions{});
  EXPECT_EQ(b.algorithm, Algorithm::Chain);
  EXPECT_EQ(b.codec, &int8);
  EXPECT_EQ(choosePlan(request(wan, Collective::Reduce, size_t{64} << 20, &int8, CompressArgs::Mode::Always), {}).codec,
            nullptr)
      << "no compressed reduce: it stays plain";
  // NCCL_ALGO names the requantising ring: the only way to get it.
  const PlannerOptions ring = parseAlgoSpec("allreduce:ring").value();
  const Plan r = choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8, CompressArgs::Mode::Always), ring);
  EXPECT_EQ(r.algorithm, Algorithm::Ring);
  EXPECT_EQ(r.codec, &int8);
  const PlannerOptions quant = parseAlgoSpec("allreduce:quantonce").value();
  EXPECT_EQ(choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8), quant).algorithm, Algorithm::QuantOnce);
  const std::string line = describePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8),
                                        choosePlan(request(wan, Collective::AllReduce, size_t{64} << 20, &int8), {}), {});
  EXPECT_NE(line.find("codec int8"), std::string::npos) << line;
  EXPECT_NE(line.find("QuantOnce+int8"), std::string::npos) << line;
}

}  // namespace
}  // namespace cfx::coll
