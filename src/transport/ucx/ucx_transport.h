// SPDX-License-Identifier: Apache-2.0
// The UCX data transport (transport layer): slot FIFOs to peers that shared memory does not connect, carried by
// UCX's UCP tag-matching API, so the same code runs over tcp, shm/cma here and over RDMA (rc, ud, dc verbs,
// RoCE) on a cluster. Which UCX transports carry the bytes is UCX's choice, steered by the user's UCX_TLS.
//
// Setup: one ucp_context and one ucp_worker per communicator; the workers' addresses are exchanged through the
// bootstrap's allGather, and every rank opens one ucp_ep to each connected peer (both channels share it).
//
// Authentication: UCX has no hook that lets a connection prove a secret before its messages are matched, and
// tag matching is per worker, not per endpoint, so no exchange over an endpoint can vouch for the bytes that
// later land in a receive. The transport is therefore bound to the authenticated bootstrap: a worker address is
// only ever learnt from a bootstrap frame that passed the session HMAC, endpoints are opened only to those
// addresses, and the worker (a fresh one per communicator) is advertised nowhere else. On top of that each
// endpoint's first message is a hello carrying HMAC(secret, both ranks, the receiver's worker address), checked
// before any data flows, so an endpoint that reached a process outside the session fails setup by name. Every
// tag also carries 24 bits derived from the secret, so a message from another job or an older communicator
// never matches a receive (a filter, not a MAC). What this does not stop is an attacker on the same fabric who
// learns a worker address by watching the network and injects messages: UCX neither encrypts nor authenticates
// its own wire, like NCCL's IB and UCX transports. Where the network is not trusted, keep the tcp transport
// (every socket authenticated) or isolate the fabric (RDMA partition keys, VLANs); docs/notes/ucx_transport.md
// says the same for users.
//
// Failure model: for a peer on another host an endpoint error (UCP_ERR_HANDLING_MODE_PEER: the peer closed,
// crashed or became unreachable) or a failed request fails every end of that peer: check() returns RemoteError
// naming the peer's rank, host and pid, and the owner's doorbell is rung. A same-host peer (NCCL_SHM_DISABLE=1)
// is watched through its pid instead, since UCX's shared-memory transports cannot report failures. Nothing
// retries or reconnects.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport::ucx {

class UcxProxy;

struct UcxOptions {
  FifoGeometry geometry{.slotBytes = 256 * 1024, .nSlots = 8};
  // Bounds the endpoint wireup after the address exchange (the bootstrap bounds the exchange itself).
  std::chrono::milliseconds connectTimeout{30000};
  // How long the destructor keeps flushing slots already posted to live peers.
  std::chrono::milliseconds closeLinger{1000};
  // Whether slots go eagerly (UCX's RNDV_THRESH raised to inf) rather than by rendezvous; see eagerSlotsFor().
  bool eagerSlots = false;
  // Owners waiting for a message run the proxy's progress themselves now and then (ucx_proxy.h).
  bool inlineProgress = true;

  // Every field from its knob. Read once per communicator.
  static UcxOptions fromParams();
  // CFX_UCX_EAGER's decision: "1" and "0" decide; "auto" is eager unless the user set UCX_RNDV_THRESH or the host
  // has an RDMA device (where rendezvous is UCX's zero-copy path).
  static bool eagerSlotsFor(const std::string& knob, bool userSetRndvThresh, bool hostHasRdma);
};

// Threading: create() and the destructor run on the thread that owns the communicator; each end is then driven
// by one thread at a time (transport.h), and the proxy thread ("cfx-ucx-proxy") makes the UCX calls, except for
// the owners' inline progress rounds, which it lets in between its own (ucx_proxy.h).
class UcxTransport {
 public:
  // True when this library was built with UCX (CMake CFX_WITH_UCX); create() fails otherwise.
  static bool available();

  // Connects this rank to every peer p with connect[p] (connect[rank] is ignored) and fills out.send[ch][p] and
  // out.recv[ch][p] for every channel; other entries are left alone (out is resized to nRanks if needed).
  //
  // Collective over all ranks of `bootstrap`: every rank calls it, even one with no UCX peer, because the worker
  // addresses travel in allGathers. `connect` must be symmetric across ranks and `peers` indexed by rank.
  //
  // Blocking: yes, bounded by the bootstrap's timeout and options.connectTimeout.
  // Errors: InvalidUsage when built without UCX or when ranks disagree on the slot geometry; InvalidArgument for
  //         a bad mask or geometry; SystemError when UCX cannot be initialised (its message is included);
  //         RemoteError / Timeout when a peer cannot be reached. On error `out` is untouched.
  // Lifetime: `localDoorbell` must outlive the transport. The ends may outlive it; their check() then reports
  //           the connection as closed.
  static Result<std::unique_ptr<UcxTransport>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                      const std::vector<bool>& connect, Doorbell& localDoorbell,
                                                      const UcxOptions& options, Endpoints& out);

  // Unless abort() was called, flushes slots already posted to live peers for at most options.closeLinger, then
  // stops the proxy, closes the endpoints and releases UCX. Never hangs, whatever the peers do.
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // Fails every end at once (check() returns InvalidUsage "aborted") and rings the doorbell; the destructor then
  // skips the flush and force-closes the endpoints. Any thread, not concurrently with the destructor; never
  // blocks; idempotent.
  void abort();

  int rank() const { return rank_; }
  int nPeers() const { return nPeers_; }

 private:
  UcxTransport(int rank, int nPeers, Doorbell& doorbell, std::chrono::milliseconds linger);

  const int rank_;
  const int nPeers_;
  Doorbell& doorbell_;
  const std::chrono::milliseconds linger_;
  std::unique_ptr<UcxProxy> proxy_;
  // Set by abort() (any thread), read by the destructor: relaxed is enough, the proxy is stopped after.
  std::atomic<bool> aborted_{false};
};

}  // namespace cfx::transport::ucx
