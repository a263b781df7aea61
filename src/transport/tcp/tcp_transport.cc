// SPDX-License-Identifier: Apache-2.0
// The TCP data transport: knobs, setup (listen, exchange addresses, connect and authenticate) and teardown
// (transport layer).
#include "transport/tcp/tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>

#include "common/crypto.h"
#include "common/log.h"
#include "common/param.h"
#include "common/thread_affinity.h"
#include "transport/peer_info.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_connector.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_proxy.h"
#include "transport/tcp/tcp_socket.h"

namespace cfx::transport::tcp {

namespace {

constexpr int kMaxSockets = kMaxStreams;  // NCCL's cap on NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
constexpr int64_t kMaxSlotBytes = int64_t{1} << 30;

std::optional<std::string> validSlotBytes(const int64_t& v) {
  if (v < 64 || v > kMaxSlotBytes) return "out of range [64, " + param::toText(kMaxSlotBytes) + "]";
  if (v % 64 != 0) return "not a multiple of 64";
  return std::nullopt;
}

CFX_PARAM(int64_t, slotBytesParam, "CFX_TCP_SLOT_BYTES", 262144,
          "Bytes per slot of a TCP connection's FIFOs (a multiple of 64): the largest frame one post() sends. "
          "Bigger slots cut per-frame overhead on fast links; every rank must use the same value.",
          validSlotBytes);
CFX_PARAM(int, slotsParam, "CFX_TCP_SLOTS", 8,
          "Slots per direction of each TCP connection: how many frames may be in flight to a peer before the "
          "sender waits. Every rank must use the same value.",
          param::inRange(1, 1024));
CFX_PARAM(int, socketThreadsParam, "NCCL_SOCKET_NTHREADS", 0,
          "NCCL: helper threads per socket connection (0-16; 0 = automatic). The TCP transport stripes every link "
          "over NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD sockets (at most 64), served by NCCL_SOCKET_NTHREADS "
          "proxy threads per communicator (automatic: one). Setting either turns CFX_TCP_AUTOTUNE off.",
          param::inRange(0, 16));
CFX_PARAM(int, socksPerThreadParam, "NCCL_NSOCKS_PERTHREAD", 0,
          "NCCL: sockets per helper thread (0 = automatic); see NCCL_SOCKET_NTHREADS.", param::inRange(0, 16));
CFX_PARAM(int, nSocksParam, "CFX_TCP_NSOCKS", 0,
          "Sockets per TCP link (peer and channel), 1-64: each slot is striped over them. Overrides "
          "NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD and turns CFX_TCP_AUTOTUNE off. 0: not set.",
          param::inRange(0, kMaxSockets));
CFX_PARAM(bool, autotuneParam, "CFX_TCP_AUTOTUNE", true,
          "Pick the sockets per TCP link (up to 8) and their buffer sizes per peer from the round trip measured at "
          "connect time and the interface speed (bandwidth-delay product), logged at INFO/NET. Applies only when "
          "none of CFX_TCP_NSOCKS, NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD is set.");
CFX_PARAM(int64_t, autotuneMbitsParam, "CFX_TCP_AUTOTUNE_MBITS", 0,
          "Bandwidth in Mbit/s that CFX_TCP_AUTOTUNE plans each peer's streams for, when the path is slower than the "
          "local interface (a WAN behind a fast NIC); also the rate CFX_TCP_FIFO_MAX_BYTES sizes slots for. 0: the "
          "interface's speed, or 10 Gbit/s where it reports none (for slot sizing: at least 10 Gbit/s).",
          param::inRange<int64_t>(0, int64_t{10} * 1000 * 1000));
CFX_PARAM(int64_t, sockBufParam, "CFX_TCP_SOCKBUF_BYTES", int64_t{4} << 20,
          "SO_SNDBUF and SO_RCVBUF of TCP data sockets when autotuning does not pick them (CFX_TCP_AUTOTUNE=0, or a "
          "socket count set); a long fat pipe needs about bandwidth x round-trip time per link. 0 keeps Linux "
          "autotuning. A value above net.core.wmem_max / rmem_max is not applied (the kernel would cap it below what "
          "autotuning reaches); raise those sysctls to use it.",
          param::inRange<int64_t>(0, int64_t{1} << 30));
CFX_PARAM(int64_t, fifoMaxParam, "CFX_TCP_FIFO_MAX_BYTES", int64_t{64} << 20,
          "Long fat paths: when the slowest TCP path's bandwidth x round trip exceeds a FIFO (CFX_TCP_SLOTS x "
          "CFX_TCP_SLOT_BYTES), the slots, and with them the communicator's slice, double until one slot holds it, "
          "keeping each FIFO within this many bytes (reserved per direction, channel and peer; touched only as "
          "used). 0: slots keep CFX_TCP_SLOT_BYTES.",
          param::inRange<int64_t>(0, int64_t{16} << 30));
CFX_PARAM(bool, inlineParam, "CFX_TCP_INLINE", true,
          "Owner-driven I/O: a rank moves its TCP bytes from its own thread (sends as it posts, reads its sockets "
          "while it waits), and the proxy thread keeps off the sockets until the rank stops driving them (sleeps or "
          "returns with bytes queued). Saves the proxy hand-offs, a context switch each: 2-rank all-reduces across "
          "two network namespaces ran 1.2-1.9x faster at 16 KiB-64 MiB. Applies only where this host's ranks do not "
          "outnumber its CPUs (beyond that the spinning owners take the proxies' CPU time). 0: only the proxy thread "
          "touches the sockets.");
CFX_PARAM(std::string, congestionParam, "CFX_TCP_CONGESTION", "auto",
          "TCP congestion control of the data sockets. auto: cubic on links striped over several sockets (a slot "
          "waits for its slowest stripe, and a pacing controller such as BBR paces each socket by its own, often low, "
          "estimate), the system's default (net.ipv4.tcp_congestion_control) on one-socket links. system: never set. "
          "Any other name (cubic, bbr, reno, ...) is set on every data socket. Where the kernel refuses (not loaded, "
          "or not in net.ipv4.tcp_allowed_congestion_control for a process without CAP_NET_ADMIN) the sockets keep "
          "the default.");
CFX_PARAM(std::chrono::milliseconds, connectTimeoutParam, "CFX_TCP_CONNECT_TIMEOUT_MS",
          std::chrono::milliseconds(30000),
          "How long setting up the TCP data connections may take (connect retries and authentication) before it "
          "fails with a timeout that names the peers still missing.",
          param::atLeast(std::chrono::milliseconds(100)));
CFX_PARAM(std::chrono::milliseconds, lingerParam, "CFX_TCP_LINGER_MS", std::chrono::milliseconds(1000),
          "How long tearing down a communicator keeps flushing frames already posted to live TCP peers before it "
          "closes the sockets (not after an abort).",
          param::inRange(std::chrono::milliseconds(0), std::chrono::milliseconds(60000)));

CFX_PARAM(int, railsParam, "CFX_SOCKET_RAILS", 1,
          "Network rails: the most interfaces (those NCCL_SOCKET_IFNAME selects, in the system's order) a rank listens "
          "on, its own first (local rank l takes interface l % n), at most 4. A link to a rank on k interfaces whose "
          "host runs fewer than k ranks gets at least k sockets (CFX_TCP_AUTOTUNE), one per interface in turn; on "
          "hosts with as many ranks as interfaces each rank's links keep to its own. Either way hosts with several "
          "NICs on separate networks carry their traffic, and the hierarchical algorithms' cross-host rings, on every "
          "NIC at once. 1: every rank uses the bootstrap's interface.",
          param::inRange(1, 16));

// Where this rank listens: with rails, its local rank's interface first (every link's stream 0 comes there), then
// the host's other rails in turn, at most kMaxRailListeners; without, or with one interface, `fallback` alone.
std::vector<sockaddr_storage> railAddresses(const std::vector<PeerInfo>& peers, int rank, const TcpOptions& options,
                                            const sockaddr_storage& fallback) {
  if (options.rails <= 1) return {fallback};
  net::InterfaceQuery query = options.railInterfaces;
  query.maxCount = static_cast<size_t>(options.rails);
  const std::vector<net::Interface> found = net::selectInterfaces(net::listInterfaces(), query);
  if (found.size() <= 1) {
    CFX_INFO(log::Sys::Net,
             "tcp: rank %d: CFX_SOCKET_RAILS=%d but %zu interface(s) match NCCL_SOCKET_IFNAME=\"%s\"; one rail", rank,
             options.rails, found.size(), query.ifName.c_str());
    return {fallback};
  }
  const auto local = static_cast<size_t>(localIndexOf(peers, rank));
  std::vector<sockaddr_storage> out;
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(found.size(), kMaxRailListeners); ++i) {
    const net::Interface& rail = found[(local + i) % found.size()];
    out.push_back(rail.addr);
    names += strprintf("%s%s %s", i == 0 ? "" : ", ", rail.name.c_str(), net::addressToString(rail.addr).c_str());
  }
  CFX_INFO(log::Sys::Net, "tcp: rank %d (local rank %zu): rail %zu of %zu; listening on %s", rank, local,
           local % found.size(), found.size(), names.c_str());
  return out;
}

std::string describePeer(const PeerInfo& info, int rank, const std::string& address, int channel) {
  return strprintf("peer rank %d (%s pid %d, %s), channel %d", rank, info.hostName[0] != '\0' ? info.hostName : "?",
                   static_cast<int>(info.pid), address.c_str(), channel);
}

// An IPv6 link-local address names its link by an interface index, which is only meaningful on the host that
// published it. Peers on our link are reached through our own interface, so connect with our scope id.
void useOwnScope(const sockaddr_storage& local, std::vector<ListenRecord>& listeners) {
  if (local.ss_family != AF_INET6) return;
  const auto& mine = reinterpret_cast<const sockaddr_in6&>(local);
  if (!IN6_IS_ADDR_LINKLOCAL(&mine.sin6_addr)) return;
  const auto rescope = [&](sockaddr_storage& address) {
    if (address.ss_family != AF_INET6) return;
    auto& theirs = reinterpret_cast<sockaddr_in6&>(address);
    if (IN6_IS_ADDR_LINKLOCAL(&theirs.sin6_addr)) theirs.sin6_scope_id = mine.sin6_scope_id;
  };
  for (ListenRecord& record : listeners) {
    rescope(record.address);
    for (int k = 1; k < listenerCount(record); ++k) rescope(record.extra[k - 1]);
  }
}

Status validate(const Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, const std::vector<bool>& connect,
                const TcpOptions& options, const Endpoints& out) {
  if (options.nThreads < 1 || options.nThreads > 16) {
    return Status::error(
        Errc::InvalidArgument,
        strprintf("tcp: %d proxy threads requested; NCCL_SOCKET_NTHREADS allows 1-16", options.nThreads));
  }
  if (options.nSocks < 1 || options.nSocks > kMaxSockets || options.minStripeBytes < 4096 ||
      options.autotuneMaxSocks < 1 || options.autotuneMaxSocks > kMaxSockets) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("tcp: invalid striping: %d sockets per link (autotune up to %d; both 1-%d), stripes "
                                   "of at least %u B (need >= 4096)",
                                   options.nSocks, options.autotuneMaxSocks, kMaxSockets, options.minStripeBytes));
  }
  const FifoGeometry& g = options.geometry;
  if (g.nSlots < 1 || g.slotBytes < 64 || g.slotBytes % 64 != 0 || g.slotBytes > static_cast<size_t>(kMaxSlotBytes)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("tcp: invalid slot geometry %d x %zu B (need >= 1 slot of a multiple of 64 bytes, "
                                   "at most 1 GiB)",
                                   g.nSlots, g.slotBytes));
  }
  return link::checkEndsFree("tcp", bootstrap.rank(), bootstrap.nRanks(), peers.size(), connect, out);
}

// The smallest smoothed round trip the kernel measured on any socket to a peer (TCP_INFO: timed on the kernel's
// own ACKs, so a busy process does not inflate it), the largest over peers; 0 when none is known.
double slowestPathRtt(const std::vector<EstablishedSocket>& sockets, int nRanks) {
  std::vector<double> perPeer(static_cast<size_t>(nRanks), 0);
  for (const EstablishedSocket& s : sockets) {
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (::getsockopt(s.socket.fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || info.tcpi_rtt == 0) continue;
    double& rtt = perPeer[static_cast<size_t>(s.peer)];
    const double seconds = static_cast<double>(info.tcpi_rtt) * 1e-6;
    rtt = rtt == 0 ? seconds : std::min(rtt, seconds);
  }
  return *std::max_element(perPeer.begin(), perPeer.end());
}

// What the ranks agree on about their slowest path: the slot size of every link, and the longest round trip.
struct PathAgreement {
  size_t slotBytes = 0;
  double rttSeconds = 0;
};

// Every rank's view of its slowest path, allGathered so that all ranks size their slots alike (the largest BDP
// against the smallest cap) and know the same longest round trip. The rate is the interface's, or
// CFX_TCP_AUTOTUNE_MBITS, but at least 10 Gbit/s when not given: interface speeds lie (a TUN reports 10 Mbit/s),
// and over-estimating only reserves address space up to the cap, while under-estimating leaves a long pipe idle.
Result<PathAgreement> agreeOnPaths(Bootstrap& bootstrap, const std::vector<EstablishedSocket>& sockets,
                                   const TcpOptions& options, const sockaddr_storage& bound) {
  struct PathRecord {
    double bdpBytes;
    uint64_t fifoCapBytes;
    double rttSeconds;
  };
  // Part of the tcp setup's wire format (kWireVersion); the tests' raw peer sends as many bytes (RawPeer::agreeOnPaths).
  static_assert(sizeof(PathRecord) == 24);
  const double rtt = slowestPathRtt(sockets, bootstrap.nRanks());
  const double rate = options.autotuneBytesPerSecond > 0 ? options.autotuneBytesPerSecond
                                                         : std::max(interfaceBytesPerSecond(bound), 10e9 / 8);
  std::vector<PathRecord> records(static_cast<size_t>(bootstrap.nRanks()));
  records[static_cast<size_t>(bootstrap.rank())] =
      PathRecord{.bdpBytes = rate * rtt, .fifoCapBytes = options.pathFifoCapBytes, .rttSeconds = rtt};
  CFX_TRY(bootstrap.allGather(records.data(), sizeof(PathRecord)));
  double bdp = 0;
  uint64_t cap = options.pathFifoCapBytes;
  double longestRtt = 0;
  for (const PathRecord& r : records) {
    bdp = std::max(bdp, r.bdpBytes);
    cap = std::min(cap, r.fifoCapBytes);
    longestRtt = std::max(longestRtt, r.rttSeconds);
  }
  const size_t slot = pathSlotBytes(options.geometry.slotBytes, options.geometry.nSlots, bdp, cap);
  if (slot != options.geometry.slotBytes) {
    CFX_INFO(log::Sys::Net,
             "tcp: rank %d: slowest path's BDP %.0f B (this rank measured %.3f ms at %.2f Gbit/s) exceeds a FIFO of "
             "%d x %zu B; slots grow to %zu B (CFX_TCP_FIFO_MAX_BYTES %llu)",
             bootstrap.rank(), bdp, rtt * 1e3, rate * 8 / 1e9, options.geometry.nSlots, options.geometry.slotBytes,
             slot, static_cast<unsigned long long>(cap));
  }
  return PathAgreement{.slotBytes = slot, .rttSeconds = longestRtt};
}

}  // namespace

TcpOptions TcpOptions::fromParams() {
  TcpOptions options;
  options.geometry.slotBytes = static_cast<size_t>(slotBytesParam.get());
  options.geometry.nSlots = slotsParam.get();
  options.connectTimeout = connectTimeoutParam.get();
  options.socketBufferBytes = sockBufParam.get();
  options.closeLinger = lingerParam.get();
  options.inlineIo = inlineParam.get();
  options.congestion = congestionParam.get();
  options.rails = railsParam.get();
  const int threads = socketThreadsParam.get();
  const int socksPerThread = socksPerThreadParam.get();
  const int nSocks = nSocksParam.get();
  if (threads > 0) options.nThreads = threads;
  if (nSocks > 0) {
    options.nSocks = nSocks;  // alone decides the socket count
  } else if (threads > 0 || socksPerThread > 0) {
    options.nSocks = std::max(1, threads) * std::max(1, socksPerThread);
    if (options.nSocks > kMaxSockets) {
      CFX_WARN("NCCL_SOCKET_NTHREADS (%d) x NCCL_NSOCKS_PERTHREAD (%d) exceeds %d; using %d", threads, socksPerThread,
               kMaxSockets, kMaxSockets);
      options.nSocks = kMaxSockets;
    }
  } else {
    options.autotune = autotuneParam.get();
  }
  options.autotuneBytesPerSecond = static_cast<double>(autotuneMbitsParam.get()) * 1e6 / 8;
  options.pathFifoCapBytes = static_cast<uint64_t>(fifoMaxParam.get());
  return options;
}

TcpTransport::TcpTransport(int rank, Doorbell& doorbell, std::chrono::milliseconds linger)
    : rank_(rank), doorbell_(doorbell), linger_(linger) {}

Result<std::unique_ptr<TcpTransport>> TcpTransport::create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                           const std::vector<bool>& connect, Doorbell& localDoorbell,
                                                           const TcpOptions& options, Endpoints& out) {
  const int rank = bootstrap.rank();
  const int nRanks = bootstrap.nRanks();
  CFX_TRY(validate(bootstrap, peers, connect, options, out));
  sockaddr_storage bindAddress = options.bindAddress;
  if (bindAddress.ss_family == AF_UNSPEC) {
    bindAddress = bootstrap.localAddress();
    net::setAddressPort(bindAddress, 0);
  }
  std::vector<net::Listener> ownListeners;
  std::vector<ListenRecord> listeners(static_cast<size_t>(nRanks));
  ListenRecord& mine = listeners[static_cast<size_t>(rank)];
  std::vector<sockaddr_storage> addresses = options.listenAddresses;
  if (addresses.empty()) addresses = railAddresses(peers, rank, options, bindAddress);
  if (addresses.size() > static_cast<size_t>(kMaxRailListeners)) addresses.resize(kMaxRailListeners);
  for (sockaddr_storage address : addresses) {
    net::setAddressPort(address, 0);
    if (isWildcard(address)) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("tcp: cannot advertise the wildcard address %s to peers; bind to the interface "
                                     "the bootstrap chose (NCCL_SOCKET_IFNAME)",
                                     net::addressToString(address).c_str()));
    }
    CFX_TRY_ASSIGN(net::Listener listener, net::Listener::listen(address));
    // Inherited by every accepted socket. Autotuned buffers are set per peer once the connecting side decided.
    if (!options.autotune) applyBufferSizes(listener.fd(), options.socketBufferBytes);
    if (ownListeners.empty()) {
      mine.address = listener.address();
    } else {
      mine.extra[mine.nExtra++] = listener.address();
    }
    ownListeners.push_back(std::move(listener));
  }
  const sockaddr_storage bound = mine.address;
  CFX_TRY(crypto::randomBytes(mine.session));
  CFX_TRY(bootstrap.allGather(listeners.data(), sizeof(ListenRecord)));

  // Counted from here: ranks leave the allGather together, however far apart they entered it (the bootstrap
  // bounds that wait itself).
  const Deadline deadline(options.connectTimeout);
  ConnectPlan plan;
  plan.rank = rank;
  plan.nRanks = nRanks;
  plan.secret = &bootstrap.secret();
  plan.geometry = options.geometry;
  plan.nStreams = options.nSocks;
  plan.minStripeBytes = options.minStripeBytes;
  if (options.autotune) {
    const KernelBufferLimits limits = readKernelBufferLimits();
    plan.autotune =
        AutotuneInputs{.rttSeconds = 0,
                       .linkBytesPerSecond = options.autotuneBytesPerSecond > 0 ? options.autotuneBytesPerSecond
                                                                                : interfaceBytesPerSecond(bound),
                       .autotuneCapBytes = limits.autotuneCap,
                       .fixedBufferCapBytes = limits.fixedBufferCap,
                       .maxStreams = options.autotuneMaxSocks};
  }
  plan.connect = connect;
  plan.listeners = listeners;
  plan.protection.resize(static_cast<size_t>(nRanks));
  for (int p = 0; p < nRanks; ++p) {
    const bool sameHost = peers[static_cast<size_t>(p)].hostHash == peers[static_cast<size_t>(rank)].hostHash;
    plan.protection[static_cast<size_t>(p)] = resolveProtection(options.protection, sameHost);
  }
  // A peer whose host runs at least as many ranks as it has rails has them covered by its ranks' own rails (each
  // listens first on its local index's NIC): one stream per link keeps the hierarchical rings, one per local
  // index, each on a NIC of its own, and striping would only add a wait for the slower stripe (10 % on the rails
  // bed). A host with fewer ranks than rails fills them only if each link stripes over all of them.
  plan.stripeRails.assign(static_cast<size_t>(nRanks), 1);
  for (int p = 0; p < nRanks; ++p) {
    const int rails = listenerCount(listeners[static_cast<size_t>(p)]);
    if (ranksOnHostOf(peers, p) < rails) plan.stripeRails[static_cast<size_t>(p)] = rails;
  }
  useOwnScope(bound, plan.listeners);
  plan.socketBufferBytes = options.autotune ? 0 : options.socketBufferBytes;
  plan.deadline = deadline;
  if (options.congestion == "auto") {
    plan.stripedCongestion = kStripedCongestion;
  } else if (options.congestion != "system" && !options.congestion.empty()) {
    plan.congestion = plan.stripedCongestion = options.congestion;
    plan.congestionExplicit = true;
  }
  CFX_TRY_ASSIGN(std::vector<EstablishedSocket> sockets, establishConnections(plan, ownListeners));
  ownListeners.clear();  // every expected peer is connected; later strangers get a refusal from the kernel
  // Collective like the listener allGather above: every rank gets here, with or without TCP peers.
  FifoGeometry geometry = options.geometry;
  CFX_TRY_ASSIGN(const PathAgreement paths, agreeOnPaths(bootstrap, sockets, options, bound));
  geometry.slotBytes = paths.slotBytes;

  // Stream s of every link goes to proxy thread s % nThreads; threads that would serve no stream are not started.
  int maxStreams = 1;
  for (const EstablishedSocket& s : sockets) maxStreams = std::max(maxStreams, s.nStreams);
  const int nThreads = std::min(options.nThreads, maxStreams);
  // Inline reads only where this host's ranks fit its CPUs (common/thread_affinity.h).
  const bool inlineIo = options.inlineIo && ranksFitCpus(ranksOnHostOf(peers, rank));
  std::vector<std::shared_ptr<ProxyWaker>> wakers;
  for (int t = 0; t < nThreads; ++t) {
    CFX_TRY_ASSIGN(std::shared_ptr<ProxyWaker> waker, ProxyWaker::create("tcp"));
    wakers.push_back(std::move(waker));
  }
  std::unique_ptr<TcpTransport> transport(new TcpTransport(rank, localDoorbell, options.closeLinger));
  transport->slotBytes_ = geometry.slotBytes;
  transport->pathRttSeconds_ = paths.rttSeconds;
  // Autotuned links stripe over every rail; a fixed socket count over as many rails as it has sockets.
  transport->rails_ = options.autotune ? listenerCount(mine) : std::min(listenerCount(mine), options.nSocks);
  std::vector<std::vector<std::unique_ptr<TcpStream>>> streams(static_cast<size_t>(nThreads));
  std::vector<std::shared_ptr<TcpLink>> byKey(static_cast<size_t>(nRanks * kNumChannels));
  const size_t nSockets = sockets.size();
  int protectedLinks = 0;
  for (EstablishedSocket& s : sockets) {
    std::shared_ptr<TcpLink>& link = byKey[static_cast<size_t>(s.peer * kNumChannels + s.channel)];
    if (link == nullptr) {
      std::vector<std::shared_ptr<ProxyWaker>> linkWakers(wakers.begin(),
                                                          wakers.begin() + std::min(nThreads, s.nStreams));
      link = std::make_shared<TcpLink>(
          s.peer, s.channel, describePeer(peers[static_cast<size_t>(s.peer)], s.peer, s.socket.peerName(), s.channel),
          geometry, s.nStreams, options.minStripeBytes, std::move(linkWakers));
      link->setInline(inlineIo);
      transport->links_.push_back(link);
      if (s.keys.send.protection() != crypto::Protection::Off) ++protectedLinks;
    }
    auto stream = std::make_unique<TcpStream>(std::move(s.socket), link, s.stream, std::move(s.keys));
    link->attachStream(stream.get());
    streams[static_cast<size_t>(s.stream % nThreads)].push_back(std::move(stream));
  }
  for (int t = 0; t < nThreads; ++t) {
    CFX_TRY_ASSIGN(std::unique_ptr<TcpProxy> proxy,
                   TcpProxy::start(rank, t, localDoorbell, wakers[static_cast<size_t>(t)],
                                   std::move(streams[static_cast<size_t>(t)])));
    transport->proxies_.push_back(std::move(proxy));
  }

  out.resize(nRanks);
  for (int p = 0; p < nRanks; ++p) {
    for (int ch = 0; ch < kNumChannels; ++ch) {
      const std::shared_ptr<TcpLink>& link = byKey[static_cast<size_t>(p * kNumChannels + ch)];
      if (link == nullptr) continue;
      link::addEnds(link, out);
    }
  }
  CFX_INFO(log::Sys::Net,
           "tcp: rank %d listening on %s, connected to %d peers (%zu sockets, %d proxy thread%s), slots %d x %zu B, "
           "owner-driven I/O %s, %d of %zu links with protected frames",
           rank, net::addressToString(bound).c_str(), transport->nPeers(), nSockets, nThreads, nThreads == 1 ? "" : "s",
           geometry.nSlots, geometry.slotBytes,
           inlineIo ? "on" : (options.inlineIo ? "off (more ranks on this host than CPUs)" : "off (CFX_TCP_INLINE=0)"),
           protectedLinks, transport->links_.size());
  return transport;
}

TcpTransport::~TcpTransport() {
  // The proxies own the streams and destroy them below; owners still holding ends fall back to the proxies'
  // (soon failed) rings.
  for (auto& link : links_) link->detachStreams();
  // Relaxed: see aborted_.
  const auto linger = aborted_.load(std::memory_order_relaxed) ? std::chrono::milliseconds(0) : linger_;
  for (auto& proxy : proxies_) proxy->requestStop(linger);
  for (auto& proxy : proxies_) proxy->join();
  proxies_.clear();  // closes every socket
  for (auto& link : links_) link->failLocally(/*aborted=*/false);
  if (!links_.empty()) doorbell_.ring();
}

void TcpTransport::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  for (auto& link : links_) link->failLocally(/*aborted=*/true);
  doorbell_.ring();
}

int TcpTransport::nPeers() const { return static_cast<int>(links_.size()) / kNumChannels; }

}  // namespace cfx::transport::tcp
