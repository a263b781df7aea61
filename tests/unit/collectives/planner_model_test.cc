// SPDX-License-Identifier: Apache-2.0
// The planner's cost model on synthetic topologies: which algorithm each machine shape gets, and why, without
// running any communication.
#include <gtest/gtest.h>

#include "../topology/shapes.h"
#include "collectives/planner.h"
#include "common/status.h"
#include "topology/topology_xml.h"

namespace cfx::coll {
namespace {

constexpr size_t kSlice = 128 * 1024;
constexpr size_t k64MiB = size_t{64} << 20;
// The flat ring against Hier may exceed their ratio of bytes through the busiest link by this much: the ring pays
// its chain of 2 (n - 1) hops again for every loop of one slice per rank (512 loops of 8 x 128 KiB at 64 MiB).
constexpr double kRingHopsOverBytes = 1.05;

// A view and the layout of its placed ranks, as core/ builds them.
struct Machine {
  topo::TopologyView view;
  Layout layout;
  Fabric fabric;
};

Machine machine(const std::string& xml, int rails = 1) {
  Result<topo::TopologyView> view = topo::parseTopologyXml(xml, "test");
  EXPECT_TRUE(view.ok()) << view.status().message();
  Layout layout = layoutOf(view.value());
  Fabric fabric = fabricOf(view.value(), layout, rails);
  return Machine{view.value(), std::move(layout), fabric};
}

// `hosts` hosts of `perHost` ranks, each host with `nics` NICs of 1 Gbit/s behind one switch (the rails bed).
std::string railHosts(int hosts, int perHost, int nics) {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < hosts; ++h) {
    xml += strprintf("  <host id=\"%d\"><numa id=\"0\"/>", h);
    for (int k = 0; k < nics; ++k) xml += strprintf("<nic name=\"eth%d\" speed=\"1000\"/>", k);
    xml += "</host>\n";
  }
  for (int r = 0; r < hosts * perHost; ++r) xml += strprintf("  <rank id=\"%d\" host=\"%d\"/>\n", r, r / perHost);
  return xml + "</system>\n";
}

// `hosts` hosts of `perHost` ranks, each host with one NIC of `mbps` behind a switch.
std::string star(int hosts, int perHost, int mbps) {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < hosts; ++h) {
    xml += strprintf("  <host id=\"%d\"><numa id=\"0\"/><nic name=\"eth0\" speed=\"%d\"/></host>\n", h, mbps);
  }
  for (int r = 0; r < hosts * perHost; ++r) xml += strprintf("  <rank id=\"%d\" host=\"%d\"/>\n", r, r / perHost);
  return xml + "</system>\n";
}

// 3 ranks on one host and 2 on another, each host with one 1 Gbit/s NIC.
std::string unevenHosts() {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < 2; ++h) {
    xml += strprintf("  <host id=\"%d\"><numa id=\"0\"/><nic name=\"e\" speed=\"1000\"/></host>\n", h);
  }
  for (int r = 0; r < 5; ++r) xml += strprintf("  <rank id=\"%d\" host=\"%d\"/>\n", r, r < 3 ? 0 : 1);
  return xml + "</system>\n";
}

// 2 hosts x 2 NUMA nodes (the devices) x 2 ranks: the nodes of a host joined at `deviceMbps`, each node with its
// own 1 Gbit/s NIC on the switch; the namespace bed's 3-level shape (tests/netbed/algo_table.py --shape 3level).
std::string threeLevels(int deviceMbps) {
  std::string xml = "<system version=\"1\">\n";
  for (int h = 0; h < 2; ++h) {
    xml += strprintf(
        "  <host id=\"%d\"><numa id=\"0\"/><numa id=\"1\"/><nic name=\"e0\" speed=\"1000\" numa=\"0\"/>"
        "<nic name=\"e1\" speed=\"1000\" numa=\"1\"/></host>\n",
        h);
    xml += strprintf("  <link a=\"h%d:numa0\" b=\"h%d:numa1\" class=\"smp\" bw=\"%g\" lat=\"20\"/>\n", h, h,
                     deviceMbps / 8000.0);
  }
  for (int r = 0; r < 8; ++r) xml += strprintf("  <rank id=\"%d\" host=\"%d\" numa=\"%d\"/>\n", r, r / 4, r % 4 / 2);
  return xml + "</system>\n";
}

PlanRequest request(const Machine& m, Collective coll, size_t bytes) {
  return PlanRequest{coll, bytes, m.layout.nRanks(), kSlice, &m.fabric};
}

Algorithm choose(const Machine& m, Collective coll, size_t bytes, const PlannerOptions& opts = {}) {
  return choosePlan(request(m, coll, bytes), opts).algorithm;
}

PlannerOptions parse(std::string_view spec) {
  Result<PlannerOptions> r = parseAlgoSpec(spec);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : PlannerOptions{};
}

TEST(PlannerModel, TwoHostsOfFourRanksGoHierarchicalForLargeAllReduce) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  EXPECT_TRUE(m.fabric.hier);
  EXPECT_EQ(m.fabric.hosts, 2);
  EXPECT_EQ(m.fabric.localRanks, 4);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  // The flat ring sends 2 (n - 1) / n = 1.75 times the bytes across the host link; the model sees that and the
  // ring's hops.
  const double ring = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Ring);
  const double hier = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  EXPECT_GT(ring / hier, 1.6);
  EXPECT_LE(ring / hier, 1.75 * kRingHopsOverBytes);
  // Four ranks share each host's NIC in the cross-host step: a quarter of 1 Gbit/s each.
  EXPECT_NEAR(m.fabric.cross.gbps, 0.125 / 4, 1e-9);
  EXPECT_NEAR(m.fabric.ring.gbps, 0.125, 1e-9);
}

TEST(PlannerModel, RailsCarryFlowsBetweenHostsAsTheTransportLaysThem) {
  // One rank per host, two NICs: without rails the ring's one flow per host pair takes the first NIC; striped over
  // both, it moves twice as fast.
  const Machine one = machine(railHosts(2, 1, 2));
  const Machine two = machine(railHosts(2, 1, 2), 2);
  EXPECT_NEAR(one.fabric.ring.gbps, 0.125, 1e-9);
  EXPECT_NEAR(two.fabric.ring.gbps, 0.25, 1e-9);
  EXPECT_LT(estimateUs(request(two, Collective::AllReduce, k64MiB), Algorithm::Ring),
            0.55 * estimateUs(request(one, Collective::AllReduce, k64MiB), Algorithm::Ring));
  // Two ranks per host cover two rails themselves: a link is not striped but lies on its listener's (higher
  // rank's) rail, its local index. Hier's two cross-host rings share the first NIC without rails and have one each
  // with them; the flat ring's crossing links (1-2 and 3-0) land on rails 0 and 1, a NIC each.
  const Machine hierOne = machine(railHosts(2, 2, 2));
  const Machine hierTwo = machine(railHosts(2, 2, 2), 2);
  EXPECT_NEAR(hierOne.fabric.cross.gbps, 0.125 / 2, 1e-9);
  EXPECT_NEAR(hierTwo.fabric.cross.gbps, 0.125, 1e-9);
  EXPECT_NEAR(hierTwo.fabric.ring.gbps, 0.125, 1e-9);
  EXPECT_EQ(choose(hierTwo, Collective::AllReduce, k64MiB), Algorithm::Hier);
  // Rails on hosts with one NIC change nothing; more rails than NICs stripe over the NICs there are.
  const Machine single = machine(railHosts(2, 2, 1), 4);
  EXPECT_NEAR(single.fabric.cross.gbps, 0.125 / 2, 1e-9);
  EXPECT_NEAR(single.fabric.ring.gbps, 0.125, 1e-9);
  EXPECT_NEAR(machine(railHosts(2, 1, 2), 4).fabric.ring.gbps, 0.25, 1e-9);
}

TEST(PlannerModel, TwoHostsOfFourRanksGatherHierarchically) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  EXPECT_EQ(choose(m, Collective::AllGather, k64MiB), Algorithm::Hier);
  // The flat ring carries n - 1 = 7 blocks over each host link, Hier L (H - 1) = 4.
  const double ring = estimateUs(request(m, Collective::AllGather, k64MiB), Algorithm::Ring);
  const double hier = estimateUs(request(m, Collective::AllGather, k64MiB), Algorithm::Hier);
  EXPECT_GT(ring / hier, 1.6);
  EXPECT_LE(ring / hier, 1.75 * kRingHopsOverBytes);
}

TEST(PlannerModel, TwoHostsOfFourRanksReduceScatterHierarchically) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  EXPECT_EQ(choose(m, Collective::ReduceScatter, k64MiB), Algorithm::Hier);
  // As the all-gather run backwards: the flat ring carries n - 1 = 7 blocks over each host link, Hier L (H - 1) = 4.
  const double ring = estimateUs(request(m, Collective::ReduceScatter, k64MiB), Algorithm::Ring);
  const double hier = estimateUs(request(m, Collective::ReduceScatter, k64MiB), Algorithm::Hier);
  EXPECT_GT(ring / hier, 1.6);
  EXPECT_LE(ring / hier, 1.75 * kRingHopsOverBytes);
  EXPECT_EQ(choose(m, Collective::ReduceScatter, k64MiB, parse("reducescatter:ring")), Algorithm::Ring);
  EXPECT_EQ(choose(m, Collective::ReduceScatter, k64MiB, parse("^hier")), Algorithm::Ring);
  const PlanRequest req = request(m, Collective::ReduceScatter, k64MiB);
  const std::string line = describePlan(req, choosePlan(req, {}), {});
  EXPECT_NE(line.find("ReduceScatter 67108864 B on 8 ranks: Hier"), std::string::npos) << line;
}

TEST(PlannerModel, ReduceScatterStaysFlatOnOneHostAndOnUnevenHosts) {
  const Machine one = machine(star(1, 4, 1000));
  EXPECT_EQ(estimateUs(request(one, Collective::ReduceScatter, k64MiB), Algorithm::Hier), -1);
  EXPECT_EQ(choose(one, Collective::ReduceScatter, k64MiB), Algorithm::Ring);
  // Forced where it does not apply, it falls back to the default.
  EXPECT_EQ(choose(one, Collective::ReduceScatter, k64MiB, parse("reducescatter:hier")), Algorithm::Ring);
  const Machine uneven = machine(unevenHosts());
  EXPECT_EQ(estimateUs(request(uneven, Collective::ReduceScatter, k64MiB), Algorithm::Hier), -1);
  EXPECT_NE(choose(uneven, Collective::ReduceScatter, k64MiB), Algorithm::Hier);
}

TEST(PlannerModel, SmallAllReduceStaysWithTheLatencyAlgorithmsOnOneHost) {
  const Machine m = machine(star(1, 4, 1000));
  EXPECT_EQ(choose(m, Collective::AllReduce, 4096), Algorithm::Exchange);
  EXPECT_EQ(choose(m, Collective::AllReduce, kSlice), Algorithm::Exchange);
  const Machine odd = machine(star(1, 3, 1000));
  EXPECT_EQ(choose(odd, Collective::AllReduce, kSlice), Algorithm::RecDouble);
}

TEST(PlannerModel, BetweenHostsTheLatencyAlgorithmsArePricedToo) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  // A few bytes: the fewest message latencies win.
  EXPECT_EQ(choose(m, Collective::AllReduce, 1024), Algorithm::Exchange);
  // A whole slice: Exchange sends all of it across the host link in one round of four flows per NIC; the
  // hierarchical all-reduce sends a quarter per rank.
  EXPECT_EQ(choose(m, Collective::AllReduce, kSlice), Algorithm::Hier);
}

TEST(PlannerModel, BidirectionalRingPaysOnARingOfPointToPointLinks) {
  const Machine m = machine(topo::testing::fourHostRing());
  // Each rank reaches its two neighbours over different links: both directions add up.
  EXPECT_NEAR(m.fabric.biRing.gbps, m.fabric.ring.gbps, 1e-9);
  for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_EQ(choose(m, coll, k64MiB), Algorithm::BiRing) << collectiveName(coll);
    const double ring = estimateUs(request(m, coll, k64MiB), Algorithm::Ring);
    const double bi = estimateUs(request(m, coll, k64MiB), Algorithm::BiRing);
    EXPECT_NEAR(ring / bi, 2.0, 0.01) << collectiveName(coll);
  }
  EXPECT_FALSE(m.fabric.hier);  // one rank per host
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("^biring")), Algorithm::Ring);
}

TEST(PlannerModel, BidirectionalRingGainsNothingThroughOneNicPerHost) {
  const Machine m = machine(star(4, 1, 1000));
  // Both directions leave through the same NIC: each flow gets half of it.
  EXPECT_NEAR(m.fabric.biRing.gbps, m.fabric.ring.gbps / 2, 1e-9);
  for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_EQ(choose(m, coll, k64MiB), Algorithm::Ring) << collectiveName(coll);
  }
  // Forced, it still runs.
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("allreduce:biring")), Algorithm::BiRing);
}

TEST(PlannerModel, TwoHostsOfTwoRanksStillPayForHierarchy) {
  const Machine m = machine(star(2, 2, 1000));
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  const double ring = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Ring);
  const double hier = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  EXPECT_GT(ring / hier, 1.35);
  EXPECT_LE(ring / hier, 1.5 * kRingHopsOverBytes);
}

TEST(PlannerModel, RanksSharingCpusPayTheSchedulerAtEveryStep) {
  EXPECT_EQ(stepOverheadUs(0.25), kStepOverheadUs);
  EXPECT_EQ(stepOverheadUs(1), kStepOverheadUs);  // a CPU each: nobody waits for one
  EXPECT_EQ(stepOverheadUs(1.5), kSharedCpuStepOverheadUs);
  Machine m = machine(topo::testing::twoHostsFourRanks());
  // A CPU each: at 4 KiB, Hier's eight short steps (six within hosts, two across) cost less than Exchange's round
  // of four whole buffers through each host's NIC.
  EXPECT_EQ(choose(m, Collective::AllReduce, 4096), Algorithm::Hier);
  const double hierOwn = estimateUs(request(m, Collective::AllReduce, 4096), Algorithm::Hier);
  const double exchangeOwn = estimateUs(request(m, Collective::AllReduce, 4096), Algorithm::Exchange);
  // Eight ranks on two CPUs: every step waits for the scheduler, and the three rounds win.
  m.fabric.stepUs = stepOverheadUs(4);
  EXPECT_EQ(choose(m, Collective::AllReduce, 4096), Algorithm::Exchange);
  const double extra = kSharedCpuStepOverheadUs - kStepOverheadUs;
  EXPECT_NEAR(estimateUs(request(m, Collective::AllReduce, 4096), Algorithm::Hier) - hierOwn, 8 * extra, 1e-6);
  EXPECT_NEAR(estimateUs(request(m, Collective::AllReduce, 4096), Algorithm::Exchange) - exchangeOwn, 3 * extra, 1e-6);
  // Where bytes dominate, the steps' overhead changes nothing.
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  EXPECT_EQ(choose(m, Collective::AllGather, k64MiB), Algorithm::Hier);
  // The namespace bed's 2 hosts x 2 ranks on 2 cores: Exchange while a few latencies decide, Hier from 16 KiB on,
  // as measured there (docs/notes/algorithms.md).
  Machine bed = machine(star(2, 2, 1000));
  bed.fabric.stepUs = stepOverheadUs(2);
  EXPECT_EQ(choose(bed, Collective::AllReduce, 1024), Algorithm::Exchange);
  EXPECT_EQ(choose(bed, Collective::AllReduce, 4096), Algorithm::Exchange);
  for (size_t bytes = 16 * 1024; bytes <= (size_t{256} << 20); bytes *= 4) {
    EXPECT_EQ(choose(bed, Collective::AllReduce, bytes), Algorithm::Hier) << bytes;
  }
}

TEST(PlannerModel, OneHostKeepsTheRing) {
  const Machine m = machine(star(1, 4, 1000));
  EXPECT_FALSE(m.fabric.hier);
  for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_EQ(choose(m, coll, k64MiB), Algorithm::Ring) << collectiveName(coll);
  }
  // Mid sizes too: Rabenseifner's fewer steps do not pay on shared memory (measured), whatever the model says.
  for (size_t bytes : {kSlice + 1, size_t{256} << 10, size_t{1} << 20}) {
    EXPECT_EQ(choose(m, Collective::AllReduce, bytes), Algorithm::Ring) << bytes;
  }
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("allreduce:rabenseifner")), Algorithm::Rabenseifner);
  // Hier does not apply: forcing it falls back to the default.
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("allreduce:hier")), Algorithm::Ring);
}

// Issue 40: 64 and 128 ranks on one host of 2 CPUs, with the slices the per-host shared-memory bound gives them
// (3,968 and 3,904 B). The model prices the all-reduce there, and halving-doubling's few steps win from mid sizes on,
// also over Direct messages; 16 ranks keep the measured few-rank rules.
TEST(PlannerModel, ManyRanksOnOneHostArePricedAndTakeFewSteps) {
  for (int n : {64, 128}) {
    Machine m = machine(star(1, n, 1000));
    m.fabric.stepUs = stepOverheadUs(n / 2.0);
    const size_t slice = n == 64 ? 3968 : 3904;
    auto pick = [&](size_t bytes, size_t directMin) {
      PlanRequest req{Collective::AllReduce, bytes, n, slice, &m.fabric};
      req.directMinBytes = directMin;
      req.directAnyBuffer = directMin > 0;
      return choosePlan(req, {}).algorithm;
    };
    for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
      EXPECT_EQ(pick(bytes, 0), Algorithm::Rabenseifner) << n << " ranks, " << bytes;
      EXPECT_EQ(pick(bytes, 4096), Algorithm::Rabenseifner) << n << " ranks, " << bytes << ", direct";
    }
    // One small message: the rounds of one exchange are still the fewest steps.
    EXPECT_EQ(pick(1024, 0), Algorithm::Exchange) << n;
    // Other collectives keep their rules (not measured at many ranks).
    EXPECT_EQ(choose(m, Collective::AllGather, k64MiB), Algorithm::Ring) << n;
  }
  Machine sixteen = machine(star(1, 16, 1000));
  sixteen.fabric.stepUs = stepOverheadUs(8);
  EXPECT_EQ(choose(sixteen, Collective::AllReduce, size_t{1} << 20), Algorithm::Ring);
  EXPECT_EQ(choose(sixteen, Collective::AllReduce, size_t{64} << 10), Algorithm::Exchange);
}

// One host where receivers read senders' buffers in place (directMinBytes): AllReduce (above one slice),
// AllGather, ReduceScatter and Broadcast go Direct from the threshold per message on; a broadcast whose root may have to
// slice (not every buffer goes direct) stays a chain beyond 4 ranks; NCCL_ALGO still decides.
TEST(PlannerModel, OneHostWithDirectMessagesTakesTheDirectAlgorithms) {
  const Machine m = machine(star(1, 4, 1000));
  auto pick = [&](Collective coll, size_t bytes, size_t directMin, bool anyBuffer, const PlannerOptions& opts = {}) {
    PlanRequest req = request(m, coll, bytes);
    req.directMinBytes = directMin;
    req.directAnyBuffer = anyBuffer;
    return choosePlan(req, opts).algorithm;
  };
  constexpr size_t kMin = 4096;
  // Per-rank-count collectives: bytes is the whole buffer, 4 ranks, so a block is bytes / 4.
  EXPECT_EQ(pick(Collective::AllGather, 4 * kMin, kMin, false), Algorithm::Direct);
  EXPECT_EQ(pick(Collective::AllGather, 4 * kMin - 4, kMin, false), Algorithm::Ring);
  EXPECT_EQ(pick(Collective::ReduceScatter, k64MiB, kMin, false), Algorithm::Direct);
  EXPECT_EQ(pick(Collective::AllGather, k64MiB, 0, false), Algorithm::Ring);  // some pair without direct messages
  EXPECT_EQ(pick(Collective::Broadcast, kMin, kMin, false), Algorithm::Direct);
  EXPECT_EQ(pick(Collective::Broadcast, kMin - 1, kMin, false), Algorithm::Chain);
  EXPECT_EQ(pick(Collective::AllReduce, k64MiB, kMin, false), Algorithm::Direct);
  // Within a slice the latency algorithms go first while the buffer is small; from 64 KiB Direct's single copies
  // win (measured with 4 ranks: docs/notes/algorithms.md).
  EXPECT_EQ(pick(Collective::AllReduce, 32 * 1024, kMin, false), Algorithm::Exchange);
  EXPECT_EQ(pick(Collective::AllReduce, 64 * 1024, kMin, false), Algorithm::Direct);
  EXPECT_EQ(pick(Collective::AllReduce, kSlice, kMin, false), Algorithm::Direct);
  EXPECT_EQ(pick(Collective::AllReduce, kSlice, 0, false), Algorithm::Exchange);  // no direct messages
  EXPECT_EQ(pick(Collective::AllReduce, kSlice, kMin, false, parse("^direct")), Algorithm::Exchange);
  EXPECT_EQ(pick(Collective::AllGather, k64MiB, kMin, false, parse("allgather:ring")), Algorithm::Ring);
  EXPECT_EQ(pick(Collective::AllGather, k64MiB, kMin, false, parse("^direct")), Algorithm::Ring);

  const Machine eight = machine(star(1, 8, 1000));
  PlanRequest bcast = request(eight, Collective::Broadcast, k64MiB);
  bcast.directMinBytes = kMin;
  EXPECT_EQ(choosePlan(bcast, {}).algorithm, Algorithm::Chain);
  bcast.directAnyBuffer = true;
  EXPECT_EQ(choosePlan(bcast, {}).algorithm, Algorithm::Direct);
}

TEST(PlannerModel, UnevenHostsNeverGoHierarchical) {
  const Machine m = machine(unevenHosts());
  EXPECT_FALSE(m.fabric.hier);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB), Algorithm::Ring);
}

TEST(PlannerModel, NcclAlgoOverridesTheModel) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("allreduce:ring")), Algorithm::Ring);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("^hier")), Algorithm::Ring);
  const PlannerOptions opts = parse("allreduce:ring");
  const PlanRequest req = request(m, Collective::AllReduce, k64MiB);
  const std::string line = describePlan(req, choosePlan(req, opts), opts);
  EXPECT_NE(line.find("chosen by NCCL_ALGO=allreduce:ring"), std::string::npos) << line;
  EXPECT_NE(line.find("model: Ring"), std::string::npos) << line;
  EXPECT_NE(line.find("Hier"), std::string::npos) << line;
}

TEST(PlannerModel, EveryChoiceIsImplementedOnEveryShape) {
  const std::string shapes[] = {topo::testing::twoHostsFourRanks(), topo::testing::fourHostRing(), star(3, 2, 100),
                                star(1, 1, 1000)};
  for (const std::string& xml : shapes) {
    const Machine m = machine(xml);
    for (int c = 0; c < kNumCollectives; ++c) {
      for (size_t bytes : {size_t{0}, kSlice, kSlice + 1, k64MiB}) {
        const auto coll = static_cast<Collective>(c);
        const Algorithm a = choose(m, coll, bytes);
        EXPECT_TRUE(hasAlgorithm(coll, a)) << collectiveName(coll);
      }
    }
  }
}

TEST(PlannerModel, LongLinksTakeRabenseifnerForMidSizedAllReduce) {
  std::string xml = star(8, 1, 1000);
  xml.insert(xml.find('\n') + 1, "  <linkclass name=\"net\" lat=\"25000\"/>\n");  // 50 ms round trips
  const Machine m = machine(xml);
  // log2(8) = 3 rounds each way against the ring's 7 steps each way, at the same bytes per rank.
  EXPECT_EQ(choose(m, Collective::AllReduce, size_t{4} << 20), Algorithm::Rabenseifner);
  const double ring = estimateUs(request(m, Collective::AllReduce, size_t{4} << 20), Algorithm::Ring);
  const double rab = estimateUs(request(m, Collective::AllReduce, size_t{4} << 20), Algorithm::Rabenseifner);
  EXPECT_GT(ring / rab, 1.5);
}

TEST(PlannerModel, FourHostsFiftyMillisecondsApartPickAsMeasured) {
  // The namespace bed's 4x1_rtt50 shape: 4 hosts of one rank on a 1 Gbit/s switch, 25 ms each way through the delay
  // relay, 4 ranks on 2 cores; its TCP slots, sized to the path's bandwidth-delay product, grow to 8 MiB, and a ring
  // chunk spans 7 of them (the bed's INFO/TUNING lines). Measured (docs/notes/algorithms.md): Exchange fastest up to
  // 4 MiB, then Rabenseifner, BiRing and Ring within 7 % of each other at 16 MiB, and Rabenseifner the model's pick;
  // at 64 and 256 MiB the ring (871 and 3394 ms against Rabenseifner's 1040 and 4013).
  std::string xml = star(4, 1, 1000);
  xml.insert(xml.find('\n') + 1, "  <linkclass name=\"net\" lat=\"25020\"/>\n");
  Machine m = machine(xml);
  m.fabric.stepUs = stepOverheadUs(2);
  constexpr size_t kBedSlice = size_t{8} << 20;
  auto bedPick = [&m](size_t bytes) {
    PlanRequest req{Collective::AllReduce, bytes, 4, kBedSlice, &m.fabric};
    req.ringChunkSlices = 7;
    return choosePlan(req, {}).algorithm;
  };
  for (size_t bytes = 1024; bytes <= (size_t{4} << 20); bytes *= 4)
    EXPECT_EQ(bedPick(bytes), Algorithm::Exchange) << bytes;
  EXPECT_EQ(bedPick(size_t{16} << 20), Algorithm::Rabenseifner);
  EXPECT_EQ(bedPick(size_t{64} << 20), Algorithm::Ring);
  EXPECT_EQ(bedPick(size_t{256} << 20), Algorithm::Ring);
}

TEST(PlannerModel, TreeIsPricedAsTwoDepthsOfHalfMessagesAndCanBeForced) {
  std::string xml = star(6, 1, 1000);
  xml.insert(xml.find('\n') + 1, "  <linkclass name=\"net\" lat=\"25000\"/>\n");
  const Machine m = machine(xml);
  // Six ranks: two trees of depth 3 (six hops of half the buffer) against recursive doubling's four rounds plus
  // the fold (six hops of all of it).
  const double tree = estimateUs(request(m, Collective::AllReduce, 64 * 1024), Algorithm::Tree);
  const double recDouble = estimateUs(request(m, Collective::AllReduce, 64 * 1024), Algorithm::RecDouble);
  EXPECT_GT(tree, 6 * 25000.0);
  EXPECT_LT(tree, recDouble);
  // Halves of many slices go segment by segment, a full climb and descent each: the ring wins there. (With slices
  // and ring chunks as the TCP transport grows them on a 50 ms path: 8 MiB, 7 slices to a chunk.)
  auto longPath = [&m](Collective coll) {
    PlanRequest req = request(m, coll, k64MiB);
    req.sliceBytes = size_t{8} << 20;
    req.ringChunkSlices = 7;
    return req;
  };
  EXPECT_NE(choosePlan(longPath(Collective::AllReduce), {}).algorithm, Algorithm::Tree);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("Tree")), Algorithm::Tree);
  // An all-reduce-only spec leaves the all-gather as the model plans it.
  EXPECT_EQ(choosePlan(longPath(Collective::AllGather), parse("allreduce:tree")).algorithm,
            choosePlan(longPath(Collective::AllGather), {}).algorithm);
}

TEST(PlannerModel, ButterflyPartnersTwoHopsAwayShareTheRingsLinks) {
  const Machine m = machine(topo::testing::fourHostRing());
  // r <-> r ^ 2 crosses two links, which the r <-> r ^ 2 flows of the other pair cross too.
  ASSERT_EQ(m.fabric.butterfly.size(), 2u);
  EXPECT_NEAR(m.fabric.butterfly[0].gbps, m.fabric.ring.gbps, 1e-9);
  EXPECT_LT(m.fabric.butterfly[1].gbps, m.fabric.ring.gbps);
  EXPECT_NE(choose(m, Collective::AllReduce, k64MiB), Algorithm::Rabenseifner);
}

TEST(PlannerModel, ParserKnowsTheNewAlgorithms) {
  EXPECT_TRUE(parseAlgoSpec("allreduce:biring,hier,rabenseifner;allgather:biring;reducescatter:biring").ok());
  EXPECT_TRUE(parseAlgoSpec("reducescatter:hier").ok());
  Result<PlannerOptions> r = parseAlgoSpec("alltoall:hier");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AlltoAll has no Hier algorithm"), std::string::npos);
}

TEST(PlannerModel, ThreeLevelsGoHier3WhereTheLinkBetweenDevicesIsSlow) {
  const Machine m = machine(threeLevels(2000));
  ASSERT_TRUE(m.layout.threeLevel());
  EXPECT_TRUE(m.fabric.hier3);
  EXPECT_EQ(m.fabric.devices, 2);
  EXPECT_EQ(m.fabric.deviceRanks, 2);
  // Two ranks of each node share its NIC, and the link between nodes carries one flow each way.
  EXPECT_NEAR(m.fabric.crossDev.gbps, 0.125 / 2, 1e-9);
  EXPECT_NEAR(m.fabric.midHost.gbps, 0.25 / 2, 1e-9);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB), Algorithm::Hier3);
  // Hier with the host as its upper level sends 1.5 times the bytes over the link between nodes that Hier3 does.
  const double hier = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Hier);
  const double hier3 = estimateUs(request(m, Collective::AllReduce, k64MiB), Algorithm::Hier3);
  EXPECT_GT(hier / hier3, 1.3);
  EXPECT_EQ(choose(m, Collective::AllReduce, k64MiB, parse("^hier3")), Algorithm::Hier);
  // Below a slice per rank it is not offered (its steps' wake-ups cost more than the model's latencies), and
  // forcing it there falls back to the default.
  EXPECT_EQ(estimateUs(request(m, Collective::AllReduce, 8 * kSlice - 1), Algorithm::Hier3), -1);
  EXPECT_NE(choose(m, Collective::AllReduce, 256 * 1024), Algorithm::Hier3);
  EXPECT_EQ(choose(m, Collective::AllReduce, 8 * kSlice, parse("allreduce:hier3")), Algorithm::Hier3);
  EXPECT_NE(choose(m, Collective::AllReduce, 1024, parse("allreduce:hier3")), Algorithm::Hier3);
  // The gathering pair too: the devices' link carries H (D - 1) blocks per rank instead of H (DG - 1).
  EXPECT_EQ(choose(m, Collective::AllGather, k64MiB), Algorithm::Hier3);
  EXPECT_EQ(choose(m, Collective::ReduceScatter, k64MiB), Algorithm::Hier3);
  EXPECT_GT(estimateUs(request(m, Collective::AllGather, k64MiB), Algorithm::Hier) /
                estimateUs(request(m, Collective::AllGather, k64MiB), Algorithm::Hier3),
            1.3);
  EXPECT_FALSE(parseAlgoSpec("broadcast:hier3").ok());
  // With the nodes of a host as fast as its memory, the middle level is worth nothing and costs latency.
  const Machine fast = machine(threeLevels(400000));
  EXPECT_TRUE(fast.fabric.hier3);
  EXPECT_NE(choose(fast, Collective::AllReduce, 8 * kSlice), Algorithm::Hier3);
}

TEST(PlannerModel, Hier3NeedsThreeEvenLevels) {
  EXPECT_FALSE(machine(topo::testing::twoHostsFourRanks()).fabric.hier3);
  EXPECT_EQ(
      estimateUs(request(machine(topo::testing::twoHostsFourRanks()), Collective::AllReduce, k64MiB), Algorithm::Hier3),
      -1);
  // 4 nodes x 4 GPUs x 2 dies: the GPUs are the devices, their dies the ranks of each.
  const Machine gpus = machine(topo::testing::fourNodesFourGpusTwoDies());
  EXPECT_TRUE(gpus.fabric.hier3);
  EXPECT_EQ(gpus.fabric.devices, 4);
  EXPECT_EQ(gpus.fabric.deviceRanks, 2);
}

TEST(PlannerModel, LayoutOfAViewFollowsItsPlacement) {
  // Ranks on the first NUMA node by default or by name are on one device; ranks interleaved across hosts keep
  // their hosts' order.
  const Layout l = Layout::fromPlaces({3, 5, 3, 5, 3, 5}, {-2, 0, -2, 0, 8, 0});
  EXPECT_EQ(l.nHosts(), 2);
  EXPECT_EQ(l.hostRanks[0], (std::vector<int>{0, 2, 4}));
  ASSERT_EQ(l.deviceRanks.size(), 3u);
  EXPECT_EQ(l.deviceRanks[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(l.deviceRanks[1], (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(l.deviceRanks[2], (std::vector<int>{4}));
  EXPECT_EQ(l.hostDevices[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(l.deviceIndex[3], 1);
  EXPECT_FALSE(l.threeLevel());
  EXPECT_TRUE(Layout::fromPlaces({0, 0, 0, 0, 1, 1, 1, 1}, {1, 1, 2, 2, 1, 1, 2, 2}).threeLevel());
  EXPECT_FALSE(Layout::fromHostIds({0, 0, 0, 0, 1, 1, 1, 1}).threeLevel());
}

TEST(PlannerModel, BroadcastBetweenHostsGoesHierarchicalAlsoOnUnevenHosts) {
  const Machine m = machine(topo::testing::twoHostsFourRanks());
  EXPECT_EQ(choose(m, Collective::Broadcast, k64MiB), Algorithm::Hier);
  EXPECT_EQ(choose(m, Collective::Broadcast, 1024), Algorithm::Hier);
  EXPECT_GT(estimateUs(request(m, Collective::Broadcast, k64MiB), Algorithm::Hier), 0);
  EXPECT_EQ(choose(m, Collective::Broadcast, k64MiB, parse("broadcast:chain")), Algorithm::Chain);
  const Machine uneven = machine(unevenHosts());
  EXPECT_EQ(choose(uneven, Collective::Broadcast, k64MiB), Algorithm::Hier);
  // One host: the measured shared-memory rules, untouched.
  const Machine one = machine(star(1, 4, 1000));
  EXPECT_NE(choose(one, Collective::Broadcast, k64MiB), Algorithm::Hier);
}

}  // namespace
}  // namespace cfx::coll
