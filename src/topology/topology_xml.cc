// SPDX-License-Identifier: Apache-2.0
// TopologyData <-> XML (topology layer); the format is described in topology_xml.h.
#include "topology/topology_xml.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "topology/xml.h"

namespace cfx::topo {

namespace {

std::string fmtDouble(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string fmtHex(uint32_t v) { return strprintf("0x%04x", v); }

std::string fmtEndpoint(const Endpoint& e) {
  switch (e.kind) {
    case Endpoint::Kind::Numa:
      return strprintf("h%d:numa%d", e.host, e.index);
    case Endpoint::Kind::Nic:
      return strprintf("h%d:nic%d", e.host, e.index);
    case Endpoint::Kind::Gpu:
      return e.die >= 0 ? strprintf("h%d:gpu%d.%d", e.host, e.index, e.die) : strprintf("h%d:gpu%d", e.host, e.index);
  }
  return "";
}

std::string joinComma(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// ---- writing ----

xml::Element pciElement(const Host& host, size_t& i) {
  const PciDevice& d = host.pci[i];
  xml::Element el{"pci", {}, {}, 0};
  el.set("busid", d.busId);
  if (d.bridge) el.set("bridge", "1");
  el.set("class", fmtHex(d.classId)).set("vendor", fmtHex(d.vendor)).set("device", fmtHex(d.device));
  if (d.linkGBps != 0) el.set("link", fmtDouble(d.linkGBps));
  if (d.numa >= 0) el.set("numa", std::to_string(d.numa));
  // Pre-order: the children of device i follow it directly.
  while (i + 1 < host.pci.size() && host.pci[i + 1].parentBusId == d.busId) {
    ++i;
    el.children.push_back(pciElement(host, i));
  }
  return el;
}

xml::Element hostElement(const Host& host, size_t h) {
  xml::Element el{"host", {}, {}, 0};
  el.set("id", std::to_string(h));
  if (!host.name.empty()) el.set("name", host.name);
  for (const Package& p : host.packages) {
    auto& c = el.children.emplace_back(xml::Element{"package", {}, {}, 0});
    c.set("id", std::to_string(p.osIndex));
    if (!p.model.empty()) c.set("model", p.model);
  }
  for (const NumaNode& n : host.numaNodes) {
    auto& c = el.children.emplace_back(xml::Element{"numa", {}, {}, 0});
    c.set("id", std::to_string(n.osIndex));
    if (n.package >= 0) c.set("package", std::to_string(n.package));
    if (n.memoryBytes) c.set("memory", std::to_string(n.memoryBytes));
    if (!n.cpus.empty()) c.set("cpus", formatCpuList(n.cpus));
  }
  for (const Core& k : host.cores) {
    auto& c = el.children.emplace_back(xml::Element{"core", {}, {}, 0});
    c.set("id", std::to_string(k.osIndex));
    if (k.numa >= 0) c.set("numa", std::to_string(k.numa));
    if (k.package >= 0) c.set("package", std::to_string(k.package));
    if (!k.pus.empty()) c.set("pus", formatCpuList(k.pus));
  }
  for (size_t i = 0; i < host.pci.size(); ++i) el.children.push_back(pciElement(host, i));
  for (const Nic& n : host.nics) {
    auto& c = el.children.emplace_back(xml::Element{"nic", {}, {}, 0});
    c.set("name", n.name);
    if (n.speedMbps) c.set("speed", std::to_string(*n.speedMbps));
    if (!n.pciBusId.empty()) c.set("busid", n.pciBusId);
    if (n.numa >= 0) c.set("numa", std::to_string(n.numa));
    if (!n.addresses.empty()) c.set("addr", joinComma(n.addresses));
  }
  for (size_t g = 0; g < host.gpus.size(); ++g) {
    const Gpu& gpu = host.gpus[g];
    auto& c = el.children.emplace_back(xml::Element{"gpu", {}, {}, 0});
    c.set("id", std::to_string(g));
    if (!gpu.name.empty()) c.set("name", gpu.name);
    if (!gpu.uuid.empty()) c.set("uuid", gpu.uuid);
    if (!gpu.pciBusId.empty()) c.set("busid", gpu.pciBusId);
    if (gpu.numa >= 0) c.set("numa", std::to_string(gpu.numa));
    if (gpu.dies != 1) c.set("dies", std::to_string(gpu.dies));
    if (gpu.memoryBytes) c.set("memory", std::to_string(gpu.memoryBytes));
  }
  return el;
}

// ---- reading ----

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Status fail(const xml::Element& el, const std::string& what) const {
    return Status::error(Errc::InvalidArgument,
                         strprintf("%s:%d: <%s> %s", source_.c_str(), el.line, el.name.c_str(), what.c_str()));
  }

  Status allowOnly(const xml::Element& el, std::initializer_list<const char*> names) const {
    for (const auto& [k, v] : el.attributes) {
      bool known = false;
      for (const char* n : names) known = known || k == n;
      if (!known) return fail(el, "has the unknown attribute '" + k + "'");
    }
    return {};
  }

  template <typename T>
  Status integer(const xml::Element& el, const char* key, T& out, bool required = false) const {
    const std::string* v = el.attribute(key);
    if (!v) return required ? fail(el, strprintf("needs the attribute '%s'", key)) : Status{};
    const bool hex = v->size() > 2 && (*v)[0] == '0' && ((*v)[1] == 'x' || (*v)[1] == 'X');
    const char* begin = v->data() + (hex ? 2 : 0);
    const char* end = v->data() + v->size();
    auto res = std::from_chars(begin, end, out, hex ? 16 : 10);
    if (res.ec != std::errc() || res.ptr != end || begin == end)
      return fail(el, strprintf("attribute '%s': expected an integer, got '%s'", key, v->c_str()));
    return {};
  }

  Status number(const xml::Element& el, const char* key, std::optional<double>& out) const {
    const std::string* v = el.attribute(key);
    if (!v) return {};
    double d = 0;
    auto res = std::from_chars(v->data(), v->data() + v->size(), d);
    if (res.ec != std::errc() || res.ptr != v->data() + v->size() || v->empty() || !(d >= 0))
      return fail(el, strprintf("attribute '%s': expected a non-negative number, got '%s'", key, v->c_str()));
    out = d;
    return {};
  }

  Status text(const xml::Element& el, const char* key, std::string& out, bool required = false) const {
    const std::string* v = el.attribute(key);
    if (!v) return required ? fail(el, strprintf("needs the attribute '%s'", key)) : Status{};
    out = *v;
    return {};
  }

  Status cpuList(const xml::Element& el, const char* key, std::vector<int>& out) const {
    const std::string* v = el.attribute(key);
    if (!v) return {};
    if (!parseCpuList(*v, out))
      return fail(el,
                  strprintf("attribute '%s': expected an ascending cpu list such as 0-3,8, got '%s'", key, v->c_str()));
    return {};
  }

  // The id of a listed element must be its position, so references by position cannot be misread.
  Status position(const xml::Element& el, size_t expected) const {
    int id = static_cast<int>(expected);
    CFX_TRY(integer(el, "id", id));
    if (id != static_cast<int>(expected))
      return fail(el, strprintf("has id %d but is number %zu of its kind; list them in order from 0", id, expected));
    return {};
  }

  Status pci(const xml::Element& el, const std::string& parent, Host& host) const {
    CFX_TRY(allowOnly(el, {"busid", "bridge", "class", "vendor", "device", "link", "numa"}));
    PciDevice d;
    d.parentBusId = parent;
    CFX_TRY(text(el, "busid", d.busId, true));
    int bridge = 0;
    CFX_TRY(integer(el, "bridge", bridge));
    d.bridge = bridge != 0;
    CFX_TRY(integer(el, "class", d.classId));
    CFX_TRY(integer(el, "vendor", d.vendor));
    CFX_TRY(integer(el, "device", d.device));
    std::optional<double> link;
    CFX_TRY(number(el, "link", link));
    d.linkGBps = link.value_or(0);
    CFX_TRY(integer(el, "numa", d.numa));
    if (!parent.empty() && d.numa >= 0) return fail(el, "names a NUMA node, but only PCI roots may");
    host.pci.push_back(d);
    for (const xml::Element& c : el.children) {
      if (c.name != "pci") return fail(c, "is not allowed inside <pci>");
      CFX_TRY(pci(c, d.busId, host));
    }
    return {};
  }

  Status nic(const xml::Element& el, Host& host) const {
    CFX_TRY(allowOnly(el, {"name", "speed", "busid", "numa", "addr"}));
    Nic n;
    CFX_TRY(text(el, "name", n.name, true));
    if (el.attribute("speed")) {
      int speed = 0;
      CFX_TRY(integer(el, "speed", speed));
      n.speedMbps = speed;
    }
    CFX_TRY(text(el, "busid", n.pciBusId));
    CFX_TRY(integer(el, "numa", n.numa));
    std::string addrs;
    CFX_TRY(text(el, "addr", addrs));
    std::stringstream ss(addrs);
    for (std::string a; std::getline(ss, a, ',');)
      if (!a.empty()) n.addresses.push_back(a);
    host.nics.push_back(std::move(n));
    return {};
  }

  Status gpu(const xml::Element& el, Host& host) const {
    CFX_TRY(allowOnly(el, {"id", "name", "uuid", "busid", "numa", "dies", "memory"}));
    CFX_TRY(position(el, host.gpus.size()));
    Gpu g;
    CFX_TRY(text(el, "name", g.name));
    CFX_TRY(text(el, "uuid", g.uuid));
    CFX_TRY(text(el, "busid", g.pciBusId));
    CFX_TRY(integer(el, "numa", g.numa));
    CFX_TRY(integer(el, "dies", g.dies));
    CFX_TRY(integer(el, "memory", g.memoryBytes));
    host.gpus.push_back(std::move(g));
    return {};
  }

  Status hostChild(const xml::Element& c, Host& host) const {
    if (c.name == "package") {
      CFX_TRY(allowOnly(c, {"id", "model"}));
      Package p;
      CFX_TRY(integer(c, "id", p.osIndex, true));
      CFX_TRY(text(c, "model", p.model));
      host.packages.push_back(std::move(p));
    } else if (c.name == "numa") {
      CFX_TRY(allowOnly(c, {"id", "package", "memory", "cpus"}));
      NumaNode n;
      CFX_TRY(integer(c, "id", n.osIndex, true));
      CFX_TRY(integer(c, "package", n.package));
      CFX_TRY(integer(c, "memory", n.memoryBytes));
      CFX_TRY(cpuList(c, "cpus", n.cpus));
      host.numaNodes.push_back(std::move(n));
    } else if (c.name == "core") {
      CFX_TRY(allowOnly(c, {"id", "numa", "package", "pus"}));
      Core k;
      CFX_TRY(integer(c, "id", k.osIndex, true));
      CFX_TRY(integer(c, "numa", k.numa));
      CFX_TRY(integer(c, "package", k.package));
      CFX_TRY(cpuList(c, "pus", k.pus));
      host.cores.push_back(std::move(k));
    } else if (c.name == "pci") {
      CFX_TRY(pci(c, "", host));
    } else if (c.name == "nic") {
      CFX_TRY(nic(c, host));
    } else if (c.name == "gpu") {
      CFX_TRY(gpu(c, host));
    } else {
      return fail(c, "is not allowed inside <host>; expected package, numa, core, pci, nic or gpu");
    }
    if (c.name != "pci" && !c.children.empty()) return fail(c.children[0], "is not allowed inside <" + c.name + ">");
    return {};
  }

  Status endpoint(const xml::Element& el, const char* key, Endpoint& out) const {
    std::string v;
    CFX_TRY(text(el, key, v, true));
    const auto bad = [&] {
      return fail(
          el, strprintf("attribute '%s': expected hN:numaK, hN:gpuK, hN:gpuK.D or hN:nicK, got '%s'", key, v.c_str()));
    };
    int host = 0, index = 0, die = -1, used = 0;
    char kind[8] = {};
    if (std::sscanf(v.c_str(), "h%d:%7[a-z]%d%n", &host, kind, &index, &used) != 3) return bad();
    if (v[used] == '.') {
      int more = 0;
      if (std::sscanf(v.c_str() + used, ".%d%n", &die, &more) != 1 || die < 0) return bad();
      used += more;
    }
    if (static_cast<size_t>(used) != v.size() || host < 0 || index < 0) return bad();
    const std::string k = kind;
    if (k == "numa")
      out.kind = Endpoint::Kind::Numa;
    else if (k == "gpu")
      out.kind = Endpoint::Kind::Gpu;
    else if (k == "nic")
      out.kind = Endpoint::Kind::Nic;
    else
      return bad();
    if (die >= 0 && out.kind != Endpoint::Kind::Gpu) return bad();
    out.host = host;
    out.index = index;
    out.die = die;
    return {};
  }

  Status systemChild(const xml::Element& c, TopologyData& data) const {
    if (c.name == "host") {
      CFX_TRY(allowOnly(c, {"id", "name"}));
      CFX_TRY(position(c, data.hosts.size()));
      Host& host = data.hosts.emplace_back();
      CFX_TRY(text(c, "name", host.name));
      for (const xml::Element& g : c.children) CFX_TRY(hostChild(g, host));
      return {};
    }
    if (!c.children.empty()) return fail(c.children[0], "is not allowed inside <" + c.name + ">");
    if (c.name == "linkclass") {
      CFX_TRY(allowOnly(c, {"name", "bw", "lat", "measured"}));
      std::string name;
      CFX_TRY(text(c, "name", name, true));
      const std::optional<LinkClass> cls = parseLinkClass(name);
      if (!cls) return fail(c, "names the unknown link class '" + name + "'");
      LinkFigures& f = data.classFigures[static_cast<size_t>(*cls)];
      std::optional<double> bw, lat;
      CFX_TRY(number(c, "bw", bw));
      CFX_TRY(number(c, "lat", lat));
      f.gbps = bw.value_or(f.gbps);
      f.latencyUs = lat.value_or(f.latencyUs);
      int measured = 0;
      CFX_TRY(integer(c, "measured", measured));
      data.measured[static_cast<size_t>(*cls)] = measured != 0;
    } else if (c.name == "link") {
      CFX_TRY(allowOnly(c, {"a", "b", "class", "bw", "lat"}));
      Link l;
      CFX_TRY(endpoint(c, "a", l.a));
      CFX_TRY(endpoint(c, "b", l.b));
      std::string cls;
      CFX_TRY(text(c, "class", cls, true));
      if (!parseLinkClass(cls)) return fail(c, "names the unknown link class '" + cls + "'");
      l.cls = *parseLinkClass(cls);
      CFX_TRY(number(c, "bw", l.gbps));
      CFX_TRY(number(c, "lat", l.latencyUs));
      data.links.push_back(l);
    } else if (c.name == "rank") {
      CFX_TRY(allowOnly(c, {"id", "host", "numa", "gpu", "die"}));
      CFX_TRY(position(c, data.ranks.size()));
      RankPlace r;
      CFX_TRY(integer(c, "host", r.host, true));
      CFX_TRY(integer(c, "numa", r.numa));
      CFX_TRY(integer(c, "gpu", r.gpu));
      CFX_TRY(integer(c, "die", r.die));
      data.ranks.push_back(r);
    } else {
      return fail(c, "is not allowed inside <system>; expected linkclass, host, link or rank");
    }
    return {};
  }

  Result<TopologyData> system(const xml::Element& root) const {
    if (root.name != "system") return fail(root, "is not a topology: the root element must be <system>");
    CFX_TRY(allowOnly(root, {"version"}));
    TopologyData data;
    CFX_TRY(integer(root, "version", data.version, true));
    if (data.version != 1) return fail(root, strprintf("has version %d; this library reads version 1", data.version));
    for (const xml::Element& c : root.children) CFX_TRY(systemChild(c, data));
    return data;
  }

 private:
  const std::string& source_;
};

}  // namespace

std::string topologyToXml(const TopologyView& view) {
  const TopologyData& data = view.data();
  xml::Element root{"system", {}, {}, 0};
  root.set("version", std::to_string(data.version));
  for (size_t c = 0; c < kNumLinkClasses; ++c) {
    auto& el = root.children.emplace_back(xml::Element{"linkclass", {}, {}, 0});
    el.set("name", linkClassName(static_cast<LinkClass>(c)));
    el.set("bw", fmtDouble(data.classFigures[c].gbps)).set("lat", fmtDouble(data.classFigures[c].latencyUs));
    el.set("measured", data.measured[c] ? "1" : "0");
  }
  for (size_t h = 0; h < data.hosts.size(); ++h) root.children.push_back(hostElement(data.hosts[h], h));
  for (const Link& l : data.links) {
    auto& el = root.children.emplace_back(xml::Element{"link", {}, {}, 0});
    el.set("a", fmtEndpoint(l.a)).set("b", fmtEndpoint(l.b)).set("class", linkClassName(l.cls));
    if (l.gbps) el.set("bw", fmtDouble(*l.gbps));
    if (l.latencyUs) el.set("lat", fmtDouble(*l.latencyUs));
  }
  for (size_t r = 0; r < data.ranks.size(); ++r) {
    const RankPlace& p = data.ranks[r];
    auto& el = root.children.emplace_back(xml::Element{"rank", {}, {}, 0});
    el.set("id", std::to_string(r)).set("host", std::to_string(p.host));
    if (p.numa >= 0) el.set("numa", std::to_string(p.numa));
    if (p.gpu >= 0) el.set("gpu", std::to_string(p.gpu));
    if (p.die >= 0) el.set("die", std::to_string(p.die));
  }
  return xml::write(root);
}

Result<TopologyView> parseTopologyXml(std::string_view text, const std::string& source) {
  CFX_TRY_ASSIGN(xml::Element root, xml::parse(text, source));
  CFX_TRY_ASSIGN(TopologyData data, Reader(source).system(root));
  Result<TopologyView> view = TopologyView::create(std::move(data));
  if (!view.ok()) return Status::error(Errc::InvalidArgument, source + ": " + view.status().message());
  return view;
}

Result<TopologyView> loadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(Errc::SystemError, strprintf("cannot open the topology file %s (NCCL_TOPO_FILE): %s",
                                                      path.c_str(), std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::error(Errc::SystemError, "cannot read the topology file " + path);
  return parseTopologyXml(buf.str(), path);
}

Status dumpTopologyFile(const TopologyView& view, const std::string& path) {
  const std::string text = topologyToXml(view);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::error(Errc::SystemError, strprintf("cannot create %s for NCCL_TOPO_DUMP_FILE: %s", tmp.c_str(),
                                                        std::strerror(errno)));
    out << text;
    out.flush();
    if (!out) return Status::error(Errc::SystemError, "cannot write the topology dump " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::error(Errc::SystemError,
                         strprintf("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno)));
  return {};
}

}  // namespace cfx::topo
