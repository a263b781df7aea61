// SPDX-License-Identifier: Apache-2.0
// The TCP data transport (transport layer): slot FIFOs to peers on other hosts (or wherever shared memory is
// off), carried over authenticated TCP sockets by one proxy thread per communicator.
//
// Connections: one link per (peer, channel), so the collective and p2p channels never queue behind each other
// in one socket buffer, and no frame needs a channel field. A link is nStreams full-duplex sockets; each slot
// is cut into stripes spread over them (tcp_stripe.h), so one operation can use several TCP streams, which a
// long fat pipe needs to fill its bandwidth-delay product. The lower rank connects and decides nStreams: fixed
// by TcpOptions::nSocks, or autotuned per peer from the round trip of its first connect().
//
// Failure model: a peer that closes, resets or sends garbage fails that connection: both of its ends' check()
// return RemoteError naming the peer's rank, host, pid and address, and the owner's doorbell is rung. Frames that
// had fully arrived before the failure can still be peeked. Nothing here retries or reconnects.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/tcp/tcp_stripe.h"
#include "transport/transport.h"

namespace cfx::transport::tcp {

class TcpLink;
class TcpProxy;

// What "auto" congestion control puts on striped links. A slot is published only once every stripe is in, so the
// link runs at the pace of its slowest stream; a pacing controller (BBR, the default on some distributions) paces
// each stream by its own bandwidth estimate, which in bursty ring traffic is often a fraction of its share: two
// streams on one 1 Gbit/s link made a 64 MiB all-reduce 1.4-2x slower under BBR, and no slower under cubic
// (docs/notes/tcp_transport.md).
inline constexpr const char* kStripedCongestion = "cubic";

struct TcpOptions {
  FifoGeometry geometry{.slotBytes = 256 * 1024, .nSlots = 8};
  // Bounds the whole setup in create(): connect retries, handshakes, waiting for lower ranks to connect.
  std::chrono::milliseconds connectTimeout{30000};
  // Sockets per (peer, channel) when autotune is off: CFX_TCP_NSOCKS, or NCCL_SOCKET_NTHREADS x
  // NCCL_NSOCKS_PERTHREAD (at most 64).
  int nSocks = 1;
  // Proxy threads (NCCL_SOCKET_NTHREADS when set): stream s of every link is served by thread s % nThreads.
  int nThreads = 1;
  // Pick nSocks and the socket buffers per peer from the measured round trip (tcp_stripe.h: autotune()).
  bool autotune = false;
  // The most streams autotuning gives one link.
  int autotuneMaxSocks = 8;
  // The path bandwidth autotuning plans for; 0 reads the interface's speed.
  double autotuneBytesPerSecond = 0;
  // Stripes are at least this long (>= 4096; see tcp_stripe.h). Tests lower it to stripe small slots.
  uint32_t minStripeBytes = kDefaultMinStripeBytes;
  // SO_SNDBUF/SO_RCVBUF of data sockets when autotune is off; 0 keeps kernel autotuning. Above
  // net.core.{w,r}mem_max it is not applied (the kernel would cap it below what autotuning reaches).
  int64_t socketBufferBytes = 4 << 20;
  // Long fat paths: the most bytes one FIFO (nSlots x slot) may grow to when the measured round trip calls for
  // bigger slots (tcp_stripe.h: pathSlotBytes()); 0 keeps geometry.slotBytes (what tests constructing options
  // directly get). CFX_TCP_FIFO_MAX_BYTES.
  uint64_t pathFifoCapBytes = 0;
  // Owner-driven I/O (tcp_connection.h): owners move their links' bytes themselves. Off: only the proxies do.
  bool inlineIo = true;
  // How long the destructor keeps flushing frames already posted to live peers.
  std::chrono::milliseconds closeLinger{1000};
  // The interface to listen on: the bootstrap's localAddress() with port 0. AF_UNSPEC means exactly that.
  sockaddr_storage bindAddress{};
  // Several NICs per host (CFX_SOCKET_RAILS > 1): of the interfaces `railInterfaces` selects (NCCL_SOCKET_IFNAME
  // and NCCL_SOCKET_FAMILY; at most `rails` of them), a rank listens on up to kMaxRailListeners, its own rail first
  // (local rank l on interface l % n) and then the others in turn, instead of on bindAddress. Stream s of a link
  // connects to the peer's address s % k (tcp_handshake.h: streamAddress()), so flows between ranks of equal local
  // index start on one rail. Where the peer's host runs fewer ranks than it has rails, autotuning gives the link at
  // least k streams, so it stripes over all of them; elsewhere the host's ranks cover its rails themselves. One
  // interface found: bindAddress.
  int rails = 1;
  cfx::net::InterfaceQuery railInterfaces;
  // Where set, the addresses this rank listens on (its own rail first, at most kMaxRailListeners), in place of
  // bindAddress and the rails: for tests, which have one interface but many loopback addresses.
  std::vector<sockaddr_storage> listenAddresses;
  // TCP congestion control of the data sockets (CFX_TCP_CONGESTION): "auto" sets kStripedCongestion on links of
  // several streams and leaves one-stream links to the system's default; "system" never sets it; any other value
  // is set on every data socket. Where the kernel refuses, sockets keep the default (logged once).
  std::string congestion = "auto";
  // Frame protection of the data sockets (CFX_WIRE_PROTECTION, owned by the bootstrap's knobs): resolved per peer
  // by resolveProtection() from whether it shares this rank's host; a socket carries the stricter of its ends'.
  WireProtection protection = WireProtection::Auto;

  // Every field from its knob, except bindAddress, which the caller fills in. Read once per communicator.
  static TcpOptions fromParams();
};

// Threading: create() and the destructor run on the thread that owns the communicator; each end is then driven
// by one thread at a time (transport.h). The owners do the socket I/O while they drive their links, the proxy threads
// the rest (tcp_connection.h).
class TcpTransport {
 public:
  // Connects this rank to every peer p with connect[p] (connect[rank] is ignored) and fills out.send[ch][p] and
  // out.recv[ch][p] for every channel; other entries are left alone (out is resized to nRanks if needed).
  //
  // Collective over all ranks of `bootstrap`: every rank calls it, even one with no TCP peer, because the
  // listen addresses travel in one allGather. `connect` must be symmetric across ranks and `peers` indexed by
  // rank. Every socket is authenticated with bootstrap.secret() (see tcp_handshake.h) before it is used.
  //
  // Blocking: yes, bounded by options.connectTimeout (after the allGather, which the bootstrap bounds).
  // Errors: Timeout naming the peers still missing; RemoteError when a peer fails the handshake or closes;
  //         InvalidUsage when ranks disagree on the slot geometry; InvalidArgument for a bad mask, geometry or
  //         bind address; SystemError for socket/epoll failures. On error `out` is untouched.
  // Lifetime: `localDoorbell` must outlive the transport. The ends may outlive it; their check() then reports
  //           the connection as closed.
  static Result<std::unique_ptr<TcpTransport>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                      const std::vector<bool>& connect, Doorbell& localDoorbell,
                                                      const TcpOptions& options, Endpoints& out);

  // Stops the proxy threads and closes every socket. Unless abort() was called, it first flushes frames already
  // posted to live peers for at most options.closeLinger. Never hangs, whatever the peers do.
  ~TcpTransport();
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Fails every connection at once (check() returns InvalidUsage "aborted") and rings the doorbell, so a
  // waiting owner wakes; the destructor then skips the flush. Any thread, but not concurrently with the
  // destructor; never blocks; idempotent. The proxy keeps servicing sockets until the destructor runs.
  void abort();

  int rank() const { return rank_; }
  // The slot size every link of this transport got: options.geometry.slotBytes, or larger on a long fat path.
  // The same on every rank of the communicator.
  size_t slotBytes() const { return slotBytes_; }
  // The longest round trip on the communicator's paths: each rank's slowest peer (the kernel's smoothed RTT of the
  // link's best socket, right after connect), the largest over ranks. The same on every rank; 0 when no rank has
  // a TCP peer.
  double pathRttSeconds() const { return pathRttSeconds_; }
  // Connected peers (each has kNumChannels connections).
  int nPeers() const;
  // How many rails (CFX_SOCKET_RAILS) this rank's links use: the interfaces it listens on, or fewer where a fixed
  // socket count has fewer sockets. 1 without rails. Whether a link stripes over them or keeps to its listener's
  // rail depends on how many ranks the listener's host runs (create()).
  int rails() const { return rails_; }

 private:
  TcpTransport(int rank, Doorbell& doorbell, std::chrono::milliseconds linger);

  const int rank_;
  Doorbell& doorbell_;
  const std::chrono::milliseconds linger_;
  size_t slotBytes_ = 0;
  double pathRttSeconds_ = 0;
  int rails_ = 1;
  std::vector<std::shared_ptr<TcpLink>> links_;
  std::vector<std::unique_ptr<TcpProxy>> proxies_;
  // Set by abort() (any thread), read by the destructor: relaxed is enough, the proxy is stopped after.
  std::atomic<bool> aborted_{false};
};

}  // namespace cfx::transport::tcp
