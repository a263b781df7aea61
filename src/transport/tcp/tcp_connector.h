// SPDX-License-Identifier: Apache-2.0
// Sets up the TCP transport's data sockets (transport layer): every outgoing and incoming handshake of a rank
// runs concurrently over non-blocking sockets, so a silent stranger on the data port, or a slow peer, delays
// nobody else. The handshake itself is described in tcp_handshake.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_socket.h"
#include "transport/tcp/tcp_stripe.h"
#include "transport/transport.h"

namespace cfx::transport::tcp {

struct ConnectPlan {
  int rank = 0;
  int nRanks = 0;
  const Secret* secret = nullptr;
  FifoGeometry geometry;
  uint32_t minStripeBytes = kDefaultMinStripeBytes;  // must agree across ranks (checked in the handshake)
  // Sockets per (peer, channel) when autotune is unset. With autotune, the lower rank of each pair times the
  // connect() of its first socket to the peer and picks the stream count and buffers with autotune() from that
  // round trip and these inputs (rttSeconds is filled in per peer). The higher rank follows the Hello.
  int nStreams = 1;
  std::optional<AutotuneInputs> autotune;
  std::vector<bool> connect;            // symmetric across ranks; connect[rank] is ignored
  std::vector<ListenRecord> listeners;  // every rank's data listener, from the bootstrap allGather
  // Per peer: the rails an autotuned link to it stripes over (AutotuneInputs::rails); 1, or empty, for none.
  std::vector<int> stripeRails;
  int64_t socketBufferBytes = 0;        // without autotune: applied before connect(); 0 keeps kernel autotuning
  Deadline deadline;                    // for the whole setup, retries included
  // TCP congestion control set on each data socket once it is authenticated: `congestion` on links of one stream,
  // `stripedCongestion` on links of several; "" keeps the system's default (see TcpOptions::congestion).
  std::string congestion;
  std::string stripedCongestion;
  bool congestionExplicit = false;  // the user named it: a refusal is a WARN, not an INFO
  // Per peer: this rank's frame protection for its links to that peer (the stricter of both ends' applies);
  // empty means off everywhere.
  std::vector<crypto::Protection> protection;
};

// One authenticated socket, ready for the proxy. The socket is non-blocking and tuned with tuneDataSocket().
struct EstablishedSocket {
  net::Socket socket;  // socket.peerName() is the peer's address
  int peer = -1;
  int channel = 0;
  int stream = 0;
  int nStreams = 1;  // of this socket's link
  SocketKeys keys;   // its frame ciphers (tcp_handshake.h), protection off where neither end asked for one
};

// For every peer p with plan.connect[p]: connects kNumChannels x nStreams sockets to p's listeners when
// rank < p (nStreams fixed, or chosen per peer by autotuning and logged at INFO; stream s to streamAddress(s), so
// the streams take p's rails in turn), and accepts as many from p on `listeners` (non-blocking; this rank's own
// rail first) when p < rank, as p's Hellos say. Returns when all are authenticated.
//
// A connection on the data port that fails any check (garbage, wrong secret, wrong addressee, silence while
// others are waiting) is logged at WARN with its address and closed; setup carries on.
// Errors: Timeout naming the peers still missing when plan.deadline passes; RemoteError when a peer we connect
// to fails the handshake or refuses us; InvalidUsage when a legitimate peer has an incompatible slot geometry or
// stripe size, or announces different stream counts for one link.
// Blocking: yes, bounded by plan.deadline.
Result<std::vector<EstablishedSocket>> establishConnections(const ConnectPlan& plan,
                                                            std::vector<net::Listener>& listeners);

}  // namespace cfx::transport::tcp
