// SPDX-License-Identifier: Apache-2.0
// TopologyView: validation, the routing graph and rank queries (topology layer).
#include "topology/topology_view.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>

namespace cfx::topo {

namespace {

Status invalid(std::string message) { return Status::error(Errc::InvalidArgument, "topology: " + std::move(message)); }

int findNuma(const Host& host, int osIndex) {
  for (size_t i = 0; i < host.numaNodes.size(); ++i)
    if (host.numaNodes[i].osIndex == osIndex) return static_cast<int>(i);
  return -1;
}

bool hasPackage(const Host& host, int osIndex) {
  return std::any_of(host.packages.begin(), host.packages.end(),
                     [&](const Package& p) { return p.osIndex == osIndex; });
}

// Puts the PCI list in pre-order (parents first, siblings in their original order) and checks the parents.
Status sortPci(Host& host, int h) {
  std::map<std::string, std::vector<size_t>> children;
  std::set<std::string> ids;
  for (size_t i = 0; i < host.pci.size(); ++i) {
    if (host.pci[i].busId.empty()) return invalid(strprintf("host %d has a PCI device without a bus id", h));
    if (!ids.insert(host.pci[i].busId).second)
      return invalid(strprintf("host %d lists PCI bus id %s twice", h, host.pci[i].busId.c_str()));
  }
  for (size_t i = 0; i < host.pci.size(); ++i) {
    const std::string& parent = host.pci[i].parentBusId;
    if (!parent.empty() && !ids.count(parent))
      return invalid(strprintf("host %d: PCI device %s names parent %s, which does not exist", h,
                               host.pci[i].busId.c_str(), parent.c_str()));
    children[parent].push_back(i);
  }
  std::vector<PciDevice> ordered;
  ordered.reserve(host.pci.size());
  std::vector<size_t> stack;
  const auto pushChildren = [&](const std::string& parent) {
    auto it = children.find(parent);
    if (it == children.end()) return;
    for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) stack.push_back(*c);
  };
  pushChildren("");
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    ordered.push_back(host.pci[i]);
    pushChildren(host.pci[i].busId);
  }
  if (ordered.size() != host.pci.size()) return invalid(strprintf("host %d: the PCI parents form a cycle", h));
  host.pci = std::move(ordered);
  return {};
}

Status checkHost(Host& host, int h) {
  if (host.numaNodes.empty()) host.numaNodes.push_back(NumaNode{});
  std::set<int> numaIds;
  for (const NumaNode& n : host.numaNodes) {
    if (!numaIds.insert(n.osIndex).second) return invalid(strprintf("host %d lists NUMA node %d twice", h, n.osIndex));
    if (n.package >= 0 && !hasPackage(host, n.package))
      return invalid(
          strprintf("host %d: NUMA node %d names package %d, which does not exist", h, n.osIndex, n.package));
  }
  for (const Core& c : host.cores) {
    if (c.numa >= 0 && findNuma(host, c.numa) < 0)
      return invalid(strprintf("host %d: core %d names NUMA node %d, which does not exist", h, c.osIndex, c.numa));
    if (c.package >= 0 && !hasPackage(host, c.package))
      return invalid(strprintf("host %d: core %d names package %d, which does not exist", h, c.osIndex, c.package));
  }
  CFX_TRY(sortPci(host, h));
  for (const PciDevice& d : host.pci)
    if (d.numa >= 0 && findNuma(host, d.numa) < 0)
      return invalid(
          strprintf("host %d: PCI device %s names NUMA node %d, which does not exist", h, d.busId.c_str(), d.numa));
  for (const Nic& n : host.nics) {
    if (n.numa >= 0 && findNuma(host, n.numa) < 0)
      return invalid(strprintf("host %d: NIC %s names NUMA node %d, which does not exist", h, n.name.c_str(), n.numa));
    if (n.speedMbps && *n.speedMbps <= 0)
      return invalid(
          strprintf("host %d: NIC %s has speed %d Mbps; omit the speed when unknown", h, n.name.c_str(), *n.speedMbps));
  }
  for (size_t g = 0; g < host.gpus.size(); ++g) {
    const Gpu& gpu = host.gpus[g];
    if (gpu.numa >= 0 && findNuma(host, gpu.numa) < 0)
      return invalid(strprintf("host %d: GPU %zu names NUMA node %d, which does not exist", h, g, gpu.numa));
    if (gpu.dies < 1) return invalid(strprintf("host %d: GPU %zu has %d dies; it needs at least 1", h, g, gpu.dies));
  }
  return {};
}

Status checkEndpoint(const TopologyData& data, const Endpoint& e, size_t link) {
  if (e.host < 0 || e.host >= static_cast<int>(data.hosts.size()))
    return invalid(strprintf("link %zu names host %d, which does not exist", link, e.host));
  const Host& host = data.hosts[e.host];
  switch (e.kind) {
    case Endpoint::Kind::Numa:
      if (findNuma(host, e.index) < 0)
        return invalid(
            strprintf("link %zu names NUMA node %d of host %d, which does not exist", link, e.index, e.host));
      return {};
    case Endpoint::Kind::Gpu:
      if (e.index < 0 || e.index >= static_cast<int>(host.gpus.size()))
        return invalid(strprintf("link %zu names GPU %d of host %d, which does not exist", link, e.index, e.host));
      if (e.die < -1 || e.die >= host.gpus[e.index].dies)
        return invalid(strprintf("link %zu names die %d of GPU %d on host %d, which has %d", link, e.die, e.index,
                                 e.host, host.gpus[e.index].dies));
      return {};
    case Endpoint::Kind::Nic:
      if (e.index < 0 || e.index >= static_cast<int>(host.nics.size()))
        return invalid(strprintf("link %zu names NIC %d of host %d, which does not exist", link, e.index, e.host));
      return {};
  }
  return invalid(strprintf("link %zu has an unknown endpoint kind", link));
}

Status checkFigures(const TopologyData& data) {
  for (size_t c = 0; c < kNumLinkClasses; ++c) {
    const LinkFigures& f = data.classFigures[c];
    if (!(f.gbps > 0) || !(f.latencyUs >= 0))
      return invalid(
          strprintf("class %s has bandwidth %g GB/s and latency %g us; bandwidth must be positive and "
                    "latency not negative",
                    linkClassName(static_cast<LinkClass>(c)), f.gbps, f.latencyUs));
  }
  if (data.measured.size() != kNumLinkClasses) return invalid("the measured flags must have one entry per link class");
  for (size_t i = 0; i < data.links.size(); ++i) {
    const Link& l = data.links[i];
    CFX_TRY(checkEndpoint(data, l.a, i));
    CFX_TRY(checkEndpoint(data, l.b, i));
    if ((l.gbps && !(*l.gbps > 0)) || (l.latencyUs && !(*l.latencyUs >= 0)))
      return invalid(strprintf("link %zu has a non-positive bandwidth or a negative latency", i));
  }
  return {};
}

// Builds the graph nodes and links; see the table in topology_view.h.
class GraphBuilder {
 public:
  explicit GraphBuilder(TopologyView::State& st) : st_(st), data_(st.data) {}

  void build() {
    for (size_t h = 0; h < data_.hosts.size(); ++h) addHost(static_cast<int>(h));
    for (const Link& l : data_.links) addExplicit(l);
    for (size_t h = 0; h < data_.hosts.size(); ++h) connectToSwitch(static_cast<int>(h));
  }

  int nodeOf(int host, Endpoint::Kind kind, int index, int die) const {
    auto it = nodes_.find({host, static_cast<int>(kind), index, die});
    return it == nodes_.end() ? -1 : it->second;
  }

 private:
  int addNode(int host, int kind, int index, int die, std::string name) {
    const int id = static_cast<int>(st_.nodeNames.size());
    nodes_[{host, kind, index, die}] = id;
    st_.nodeNames.push_back(std::move(name));
    return id;
  }

  void addLink(int a, int b, LinkClass cls, std::optional<double> gbps, std::optional<double> latencyUs,
               bool implicit) {
    LinkFigures f = data_.classFigures[static_cast<size_t>(cls)];
    if (gbps) f.gbps = *gbps;
    if (latencyUs) f.latencyUs = *latencyUs;
    st_.links.push_back(GraphLink{a, b, cls, f, implicit});
  }

  // The NUMA nodes something with `numa` (an OS index, or -1) attaches to.
  std::vector<int> numaNodesFor(int h, int numa) const {
    std::vector<int> out;
    for (const NumaNode& n : data_.hosts[h].numaNodes)
      if (numa < 0 || n.osIndex == numa) out.push_back(nodeOf(h, Endpoint::Kind::Numa, n.osIndex, -1));
    return out;
  }

  void addHost(int h) {
    const Host& host = data_.hosts[h];
    std::vector<int> numa;
    for (const NumaNode& n : host.numaNodes)
      numa.push_back(addNode(h, 0, n.osIndex, -1, strprintf("h%d:numa%d", h, n.osIndex)));
    for (size_t i = 0; i < numa.size(); ++i)
      for (size_t j = i + 1; j < numa.size(); ++j) addLink(numa[i], numa[j], LinkClass::Smp, {}, {}, true);
    for (size_t g = 0; g < host.gpus.size(); ++g) {
      const int gi = static_cast<int>(g);
      std::vector<int> dies;
      for (int d = 0; d < host.gpus[g].dies; ++d)
        dies.push_back(addNode(h, 1, gi, d, strprintf("h%d:gpu%d.%d", h, gi, d)));
      for (size_t i = 0; i < dies.size(); ++i)
        for (size_t j = i + 1; j < dies.size(); ++j) addLink(dies[i], dies[j], LinkClass::DieToDie, {}, {}, true);
      for (int die : dies)
        for (int n : numaNodesFor(h, host.gpus[g].numa)) addLink(die, n, LinkClass::Pci, {}, {}, true);
    }
    for (size_t i = 0; i < host.nics.size(); ++i) {
      const int nic = addNode(h, 2, static_cast<int>(i), -1, strprintf("h%d:nic%zu", h, i));
      for (int n : numaNodesFor(h, host.nics[i].numa)) addLink(nic, n, LinkClass::Pci, {}, {}, true);
    }
  }

  std::vector<int> nodesOf(const Endpoint& e) const {
    if (e.kind != Endpoint::Kind::Gpu) return {nodeOf(e.host, e.kind, e.index, -1)};
    if (e.die >= 0) return {nodeOf(e.host, e.kind, e.index, e.die)};
    std::vector<int> out;
    for (int d = 0; d < data_.hosts[e.host].gpus[e.index].dies; ++d) out.push_back(nodeOf(e.host, e.kind, e.index, d));
    return out;
  }

  void addExplicit(const Link& l) {
    if (l.cls == LinkClass::Net) {
      if (l.a.kind == Endpoint::Kind::Nic) p2pNics_.insert({l.a.host, l.a.index});
      if (l.b.kind == Endpoint::Kind::Nic) p2pNics_.insert({l.b.host, l.b.index});
    }
    for (int a : nodesOf(l.a)) {
      for (int b : nodesOf(l.b)) {
        // A declared link between nodes that an implicit one already joins replaces it (two NUMA nodes of a host
        // joined slower than the class says): otherwise routes would still take whichever of the two is shorter.
        auto same = std::find_if(st_.links.begin(), st_.links.end(), [&](const GraphLink& g) {
          return g.implicit && ((g.nodeA == a && g.nodeB == b) || (g.nodeA == b && g.nodeB == a));
        });
        if (same != st_.links.end()) st_.links.erase(same);
        addLink(a, b, l.cls, l.gbps, l.latencyUs, false);
      }
    }
  }

  void connectToSwitch(int h) {
    const Host& host = data_.hosts[h];
    const LinkFigures net = data_.classFigures[static_cast<size_t>(LinkClass::Net)];
    if (switch_ < 0) switch_ = addNode(-1, 3, 0, -1, "switch");
    st_.switchNode = switch_;
    st_.railLinks.resize(data_.hosts.size());
    if (host.nics.empty()) {
      // One network link per host, from its first NUMA node (a synthetic shape that names no NIC still has one
      // host link): one per node would double a two-node host's network, and would join its nodes through the
      // switch, a path that wins over a declared slow link between them.
      const std::vector<int> nodes = numaNodesFor(h, -1);
      if (!nodes.empty()) {
        st_.railLinks[h].push_back(static_cast<LinkId>(st_.links.size()));
        addLink(nodes.front(), switch_, LinkClass::Net, {}, net.latencyUs / 2, true);
      }
      return;
    }
    for (size_t i = 0; i < host.nics.size(); ++i) {
      if (p2pNics_.count({h, static_cast<int>(i)})) continue;
      std::optional<double> gbps;
      if (host.nics[i].speedMbps) gbps = *host.nics[i].speedMbps / 8000.0;
      st_.railLinks[h].push_back(static_cast<LinkId>(st_.links.size()));
      addLink(nodeOf(h, Endpoint::Kind::Nic, static_cast<int>(i), -1), switch_, LinkClass::Net, gbps, net.latencyUs / 2,
              true);
    }
  }

  TopologyView::State& st_;
  const TopologyData& data_;
  std::map<std::tuple<int, int, int, int>, int> nodes_;
  std::set<std::pair<int, int>> p2pNics_;
  int switch_ = -1;
};

// Shortest-path tree from `source`: least summed latency, then widest bottleneck, then lowest node id.
std::vector<int> shortestPaths(const TopologyView::State& st, int source) {
  const size_t n = st.nodeNames.size();
  std::vector<std::vector<int>> adjacent(n);
  for (size_t i = 0; i < st.links.size(); ++i) {
    adjacent[st.links[i].nodeA].push_back(static_cast<int>(i));
    adjacent[st.links[i].nodeB].push_back(static_cast<int>(i));
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> latency(n, kInf), width(n, 0);
  std::vector<int> prev(n, -1);
  using Entry = std::tuple<double, double, int>;  // latency, -width, node
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  latency[source] = 0;
  width[source] = kInf;
  queue.emplace(0.0, -kInf, source);
  while (!queue.empty()) {
    auto [lat, negWidth, node] = queue.top();
    queue.pop();
    if (lat != latency[node] || -negWidth != width[node]) continue;
    for (int li : adjacent[node]) {
      const GraphLink& l = st.links[li];
      const int next = l.nodeA == node ? l.nodeB : l.nodeA;
      const double nl = lat + l.figures.latencyUs;
      const double nw = std::min(width[node], l.figures.gbps);
      if (nl < latency[next] || (nl == latency[next] && nw > width[next])) {
        latency[next] = nl;
        width[next] = nw;
        prev[next] = li;
        queue.emplace(nl, -nw, next);
      }
    }
  }
  prev[source] = -1;
  for (size_t i = 0; i < n; ++i)
    if (latency[i] == kInf) prev[i] = -2;  // unreachable
  return prev;
}

Status placeRanks(TopologyView::State& st, const GraphBuilder& graph) {
  const TopologyData& data = st.data;
  st.ranksOnHost.assign(data.hosts.size(), {});
  for (size_t r = 0; r < data.ranks.size(); ++r) {
    const RankPlace& p = data.ranks[r];
    if (p.host < 0 || p.host >= static_cast<int>(data.hosts.size()))
      return invalid(strprintf("rank %zu is placed on host %d, which does not exist", r, p.host));
    const Host& host = data.hosts[p.host];
    if (p.numa >= 0 && findNuma(host, p.numa) < 0)
      return invalid(
          strprintf("rank %zu is placed on NUMA node %d of host %d, which does not exist", r, p.numa, p.host));
    int node;
    if (p.gpu >= 0) {
      if (p.gpu >= static_cast<int>(host.gpus.size()))
        return invalid(
            strprintf("rank %zu is placed on GPU %d of host %d, which has %zu", r, p.gpu, p.host, host.gpus.size()));
      if (p.die < -1 || p.die >= host.gpus[p.gpu].dies)
        return invalid(strprintf("rank %zu is placed on die %d of a GPU with %d", r, p.die, host.gpus[p.gpu].dies));
      node = graph.nodeOf(p.host, Endpoint::Kind::Gpu, p.gpu, std::max(p.die, 0));
    } else {
      if (p.die >= 0) return invalid(strprintf("rank %zu names a die but no GPU", r));
      node = graph.nodeOf(p.host, Endpoint::Kind::Numa, p.numa >= 0 ? p.numa : host.numaNodes[0].osIndex, -1);
    }
    st.rankNode.push_back(node);
    st.localRank.push_back(static_cast<int>(st.ranksOnHost[p.host].size()));
    st.ranksOnHost[p.host].push_back(static_cast<int>(r));
  }
  st.sourceOfNode.assign(st.nodeNames.size(), -1);
  for (size_t r = 0; r < st.rankNode.size(); ++r) {
    const int node = st.rankNode[r];
    if (st.sourceOfNode[node] >= 0) continue;
    st.sourceOfNode[node] = static_cast<int>(st.prevLink.size());
    st.prevLink.push_back(shortestPaths(st, node));
    for (size_t other = 0; other < st.rankNode.size(); ++other)
      if (st.prevLink.back()[st.rankNode[other]] == -2)
        return invalid(strprintf("rank %zu (%s) cannot reach rank %zu (%s): add a link between them", r,
                                 st.nodeNames[node].c_str(), other, st.nodeNames[st.rankNode[other]].c_str()));
  }
  return {};
}

}  // namespace

Result<TopologyView> TopologyView::create(TopologyData data) {
  auto st = std::make_shared<State>();
  for (size_t h = 0; h < data.hosts.size(); ++h) CFX_TRY(checkHost(data.hosts[h], static_cast<int>(h)));
  CFX_TRY(checkFigures(data));
  st->data = std::move(data);
  GraphBuilder graph(*st);
  graph.build();
  CFX_TRY(placeRanks(*st, graph));
  return TopologyView(std::move(st));
}

std::vector<LinkId> TopologyView::pathBetween(int rankA, int rankB) const {
  assert(rankA >= 0 && rankA < nRanks() && rankB >= 0 && rankB < nRanks());
  const int from = state_->rankNode[rankA];
  const std::vector<int>& prev = state_->prevLink[state_->sourceOfNode[from]];
  std::vector<LinkId> path;
  for (int node = state_->rankNode[rankB]; node != from;) {
    const GraphLink& l = state_->links[prev[node]];
    path.push_back(prev[node]);
    node = l.nodeA == node ? l.nodeB : l.nodeA;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<TopologyView::Hop> TopologyView::routeBetween(int rankA, int rankB) const {
  std::vector<Hop> route;
  int node = state_->rankNode[rankA];
  for (LinkId id : pathBetween(rankA, rankB)) {
    const GraphLink& l = state_->links[id];
    route.push_back({id, l.nodeA == node});
    node = l.nodeA == node ? l.nodeB : l.nodeA;
  }
  return route;
}

std::vector<TopologyView::Hop> TopologyView::routeBetween(int rankA, int rankB, int rail) const {
  std::vector<Hop> route = routeBetween(rankA, rankB);
  const State& st = *state_;
  const std::vector<LinkId>& outOfA = st.railLinks[hostOf(rankA)];
  const std::vector<LinkId>& intoB = st.railLinks[hostOf(rankB)];
  if (outOfA.size() < 2 && intoB.size() < 2) return route;
  // Where the route crosses the switch: a link of A's host into it, then one of B's host out of it.
  const auto crossing = std::find_if(route.begin(), route.end(), [&](const Hop& hop) {
    return std::find(outOfA.begin(), outOfA.end(), hop.link) != outOfA.end();
  });
  if (crossing == route.end() || crossing + 1 == route.end() ||
      std::find(intoB.begin(), intoB.end(), (crossing + 1)->link) == intoB.end()) {
    return route;
  }
  const LinkId up = outOfA[static_cast<size_t>(rail) % outOfA.size()];
  const LinkId down = intoB[static_cast<size_t>(rail) % intoB.size()];
  const auto farEnd = [&](LinkId id) {  // the NIC (or NUMA node) end of a switch link
    const GraphLink& l = st.links[id];
    return l.nodeA == st.switchNode ? l.nodeB : l.nodeA;
  };
  // Walks rank r's shortest-path tree from `node` back to r's node: the links in the order node -> rank.
  const auto towardRank = [&](int rank, int node) {
    const int home = st.rankNode[rank];
    const std::vector<int>& prev = st.prevLink[st.sourceOfNode[home]];
    std::vector<LinkId> links;
    while (node != home) {
      const GraphLink& l = st.links[prev[node]];
      links.push_back(prev[node]);
      node = l.nodeA == node ? l.nodeB : l.nodeA;
    }
    return links;
  };
  std::vector<LinkId> path = towardRank(rankA, farEnd(up));
  std::reverse(path.begin(), path.end());
  path.push_back(up);
  path.push_back(down);
  for (LinkId id : towardRank(rankB, farEnd(down))) path.push_back(id);
  route.clear();
  int node = st.rankNode[rankA];
  for (LinkId id : path) {
    const GraphLink& l = st.links[id];
    route.push_back({id, l.nodeA == node});
    node = l.nodeA == node ? l.nodeB : l.nodeA;
  }
  return route;
}

PathFigures TopologyView::bottleneck(std::span<const LinkId> path) const {
  if (path.empty())
    return PathFigures{LinkClass::Self, figures(LinkClass::Self).gbps, figures(LinkClass::Self).latencyUs, 0};
  PathFigures out{LinkClass::Self, std::numeric_limits<double>::infinity(), 0, 0};
  for (LinkId id : path) {
    const GraphLink& l = state_->links[id];
    out.cls = std::max(out.cls, l.cls);
    out.gbps = std::min(out.gbps, l.figures.gbps);
    out.latencyUs += l.figures.latencyUs;
    ++out.hops;
  }
  return out;
}

PathFigures TopologyView::linkBetween(int rankA, int rankB) const {
  if (rankA == rankB) return bottleneck({});
  if (state_->rankNode[rankA] == state_->rankNode[rankB]) {
    const LinkFigures f = figures(LinkClass::Memory);
    return PathFigures{LinkClass::Memory, f.gbps, f.latencyUs, 0};
  }
  const std::vector<LinkId> path = pathBetween(rankA, rankB);
  return bottleneck(path);
}

Result<TopologyView> TopologyView::withRanks(std::vector<RankPlace> ranks) const {
  TopologyData data = state_->data;
  data.ranks = std::move(ranks);
  return create(std::move(data));
}

Result<TopologyView> TopologyView::calibrated(const Calibration& calibration) const {
  TopologyData data = state_->data;
  for (size_t c = 0; c < kNumLinkClasses; ++c) {
    if (!calibration.measured[c]) continue;
    data.classFigures[c] = *calibration.measured[c];
    data.measured[c] = true;
  }
  return create(std::move(data));
}

std::string TopologyView::summary() const {
  size_t numa = 0, cores = 0, nics = 0, gpus = 0, pci = 0;
  for (const Host& h : state_->data.hosts) {
    numa += h.numaNodes.size();
    cores += h.cores.size();
    nics += h.nics.size();
    gpus += h.gpus.size();
    pci += h.pci.size();
  }
  return strprintf("%d host%s, %zu NUMA node%s, %zu cores, %zu PCI devices, %zu NIC%s, %zu GPU%s, %d rank%s, %zu links",
                   nHosts(), nHosts() == 1 ? "" : "s", numa, numa == 1 ? "" : "s", cores, pci, nics,
                   nics == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s", nRanks(), nRanks() == 1 ? "" : "s",
                   state_->links.size());
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool parseCpuList(const std::string& text, std::vector<int>& out) {
  out.clear();
  size_t pos = 0;
  const auto number = [&](int& v) {
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) return false;
    long long acc = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      acc = acc * 10 + (text[pos++] - '0');
      if (acc > (1 << 24)) return false;
    }
    v = static_cast<int>(acc);
    return true;
  };
  while (pos < text.size()) {
    int lo, hi;
    if (!number(lo)) return false;
    hi = lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      if (!number(hi) || hi < lo) return false;
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    if (pos < text.size() && text[pos++] != ',') return false;
    if (pos == text.size() && text.back() == ',') return false;
  }
  return std::is_sorted(out.begin(), out.end()) && std::adjacent_find(out.begin(), out.end()) == out.end();
}

}  // namespace cfx::topo
