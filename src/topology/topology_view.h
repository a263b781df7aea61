// SPDX-License-Identifier: Apache-2.0
// TopologyView (topology layer): the immutable, validated topology a communicator plans over.
//
// A view is built once from TopologyData (discovery, or an XML file) by create(), which checks every reference,
// derives the implicit links, and precomputes the routes between the places where ranks run. After that it
// never changes: copies share the same state, and every const method is safe to call from any thread.
//
// The routing graph has one node per NUMA node, per GPU die, per NIC, plus one network switch. Implicit links:
//   NUMA <-> NUMA of one host        Smp
//   die  <-> die of one GPU          DieToDie
//   GPU die <-> its NUMA node        Pci (every NUMA node of the host when the GPU's node is unknown)
//   NIC  <-> its NUMA node           Pci (likewise)
//   NIC  <-> switch                  Net, at the NIC's speed, half the class latency per side; only for NICs
//                                    that no explicit Net link names, so a declared ring of point-to-point
//                                    links is not short-circuited through the switch
//   NUMA <-> switch                  Net, from the first NUMA node of a host with no NIC at all (synthetic
//                                    shapes may omit them): one host link, as if it had one NIC
// Explicit links (TopologyData::links) are added as declared; a link naming a GPU without a die joins every die.
// A route is the path of least total latency, ties broken by the wider bottleneck and then by node order, so
// the same data always gives the same routes.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "topology/topology_data.h"

namespace cfx::topo {

using LinkId = int;  // index into TopologyView::links()

// One edge of the routing graph, with its figures resolved (declared, else the class table).
struct GraphLink {
  int nodeA = 0;
  int nodeB = 0;
  LinkClass cls = LinkClass::Net;
  LinkFigures figures;
  bool implicit = true;  // derived by create(), not declared in TopologyData::links
};

// What a path offers: its most remote class, its narrowest bandwidth and its summed latency.
struct PathFigures {
  LinkClass cls = LinkClass::Self;
  double gbps = 0;
  double latencyUs = 0;
  int hops = 0;
};

// Measured figures per link class; classes left empty keep their current figures.
struct Calibration {
  std::array<std::optional<LinkFigures>, kNumLinkClasses> measured{};
};

class TopologyView {
 public:
  // Validates and indexes `data`. InvalidArgument, naming the offending host/rank/link, when: a reference
  // (NUMA node, package, GPU, NIC, die, PCI parent) does not exist; a PCI bus id repeats; figures are not
  // positive; or two placed ranks cannot reach each other.
  static Result<TopologyView> create(TopologyData data);

  const TopologyData& data() const;
  int nHosts() const;
  const Host& host(int h) const;
  int nRanks() const;

  // Rank queries. Ranks must be in [0, nRanks()); checked with assertions, as the layers above validate them.
  int hostOf(int rank) const;
  const RankPlace& placeOf(int rank) const;
  const std::vector<int>& ranksOnHost(int h) const;
  // Position of `rank` among the ranks of its host, in rank order.
  int localRankOf(int rank) const;

  // The route between two ranks: empty for the same rank or for ranks sharing one graph node.
  std::vector<LinkId> pathBetween(int rankA, int rankB) const;
  // The same route with the direction each link is crossed in: forward when from its nodeA to its nodeB. Links
  // are full duplex, so two flows share bandwidth only where they cross one link in one direction.
  struct Hop {
    LinkId link = 0;
    bool forward = true;
  };
  std::vector<Hop> routeBetween(int rankA, int rankB) const;
  // The route when traffic between hosts goes over rail `rail`: where routeBetween() crosses the switch, it leaves
  // rankA's host through that host's switch-attached NIC rail % (its count) and enters rankB's host through NIC
  // rail % (that host's count), in NIC order; the rest follows the shortest paths to and from those NICs. Routes
  // that do not cross the switch (one host, declared point-to-point links) are routeBetween()'s.
  std::vector<Hop> routeBetween(int rankA, int rankB, int rail) const;
  // How many switch-attached links host h has: its NICs that no declared link names, or 1 for a host without NICs.
  int railsOf(int h) const;
  // The figures between two ranks: Self for the same rank, Memory figures for two ranks on one NUMA node or
  // one GPU die, else bottleneck(pathBetween(rankA, rankB)).
  PathFigures linkBetween(int rankA, int rankB) const;
  // Most remote class, narrowest bandwidth, summed latency. An empty path gives Self figures.
  PathFigures bottleneck(std::span<const LinkId> path) const;

  const std::vector<GraphLink>& links() const;
  // A printable name for a graph node: "h0:numa1", "h0:gpu2.1", "h1:nic0", "switch".
  const std::string& nodeName(int node) const;
  LinkFigures figures(LinkClass cls) const;

  // A new view with ranks placed as given (what core/ does once it knows where its peers run).
  Result<TopologyView> withRanks(std::vector<RankPlace> ranks) const;
  // A new view whose class table takes the measured figures; declared per-link figures are kept, since they
  // describe that one link (a NIC's speed) better than a class-wide measurement does.
  Result<TopologyView> calibrated(const Calibration& calibration) const;

  // One line for INFO/INIT, e.g. "1 host, 2 NUMA nodes, 16 cores, 3 NICs, 0 GPUs, 0 ranks".
  std::string summary() const;

  // Internal to the topology layer; public so the layer's helpers can build it.
  struct State;

 private:
  explicit TopologyView(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// The state behind a view; internal to the topology layer but declared here so its members can be inline.
struct TopologyView::State {
  TopologyData data;
  std::vector<GraphLink> links;
  std::vector<std::string> nodeNames;
  std::vector<int> rankNode;  // graph node of each rank
  std::vector<std::vector<int>> ranksOnHost;
  std::vector<int> localRank;
  // Shortest-path trees from every node a rank runs on: prevLink[source][node], -1 at the source or when unreached.
  std::vector<int> sourceOfNode;  // node -> row in prevLink, -1 when no rank runs there
  std::vector<std::vector<int>> prevLink;
  std::vector<std::vector<LinkId>> railLinks;  // per host: its links to the switch, in NIC order
  int switchNode = -1;
};

inline const TopologyData& TopologyView::data() const { return state_->data; }
inline int TopologyView::nHosts() const { return static_cast<int>(state_->data.hosts.size()); }
inline const Host& TopologyView::host(int h) const { return state_->data.hosts[h]; }
inline int TopologyView::nRanks() const { return static_cast<int>(state_->data.ranks.size()); }
inline int TopologyView::hostOf(int rank) const { return state_->data.ranks[rank].host; }
inline const RankPlace& TopologyView::placeOf(int rank) const { return state_->data.ranks[rank]; }
inline const std::vector<int>& TopologyView::ranksOnHost(int h) const { return state_->ranksOnHost[h]; }
inline int TopologyView::localRankOf(int rank) const { return state_->localRank[rank]; }
inline const std::vector<GraphLink>& TopologyView::links() const { return state_->links; }
inline int TopologyView::railsOf(int h) const { return static_cast<int>(state_->railLinks[h].size()); }
inline const std::string& TopologyView::nodeName(int node) const { return state_->nodeNames[node]; }
inline LinkFigures TopologyView::figures(LinkClass cls) const {
  return state_->data.classFigures[static_cast<size_t>(cls)];
}

}  // namespace cfx::topo
