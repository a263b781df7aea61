// SPDX-License-Identifier: Apache-2.0
// The transport set (transport layer): the registry that connects one rank of a communicator to every peer, and
// owns what it connected with. core/ asks it for a set and names no concrete transport.
//
// The choice it makes, the same on every rank: shared memory wherever both ranks of a pair can map each other's
// segment, and for every other pair the network transport the user selected (tcp by default, ucx on request).
// Then the ranks agree on how every hop slices a message (the smallest slice any rank can carry, the fewest slices
// per ring chunk, the fewest network rails) and on direct (single-copy) transfers, so every rank plans alike.
//
// Threading: connect() and the destructor run on the thread that owns the communicator; abort() on any thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport {

namespace shm {
class ShmTransport;
}
namespace tcp {
class TcpTransport;
}
namespace ucx {
class UcxTransport;
}

// What the communicator's configuration says about its transports.
struct TransportRequest {
  std::string ncclNet;  // NCCL_NET or ncclConfig_t.netName; takes precedence over cfxNet
  std::string cfxNet;   // CFX_NET
  WireProtection protection = WireProtection::Auto;  // CFX_WIRE_PROTECTION
  std::string ifName;   // NCCL_SOCKET_IFNAME: the interfaces tcp's rails may use
  int family = AF_UNSPEC;  // NCCL_SOCKET_FAMILY
  // Set by an abort while connect() runs (a non-blocking init): a connect that then fails aborts the network
  // transport it made before closing it, so nothing waits to flush to peers that are going away.
  const std::atomic<bool>* abortFlag = nullptr;
};

class TransportSet {
 public:
  // Collective over every rank of `bootstrap`: connects rank to every peer (`peers` indexed by rank) and agrees on
  // the slicing. Errors: InvalidUsage naming the ranks when they selected different networks, for a network this
  // build lacks or for frame protection ucx cannot give; any error of the transports or the bootstrap.
  // Whether `request` names a network this build has: what connect() would refuse first, for a caller to learn
  // before it enters anything collective.
  static Status check(const TransportRequest& request);
  static Result<std::unique_ptr<TransportSet>> connect(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                       int rank, const TransportRequest& request);
  // Closes the ends first, then the network transport (which may still flush to live peers), then shared memory.
  ~TransportSet();
  TransportSet(const TransportSet&) = delete;
  TransportSet& operator=(const TransportSet&) = delete;

  Endpoints& endpoints() { return endpoints_; }
  // This rank's doorbell: every transport rings it; valid until this object is destroyed.
  Doorbell& doorbell() { return *doorbell_; }
  // Whether ranks a and b share memory (both directions): the same answer on every rank.
  bool sharesMemory(int a, int b) const;
  // The agreed slicing: slot bytes every hop cuts a message into, slices per ring chunk, network rails.
  size_t sliceBytes() const { return sliceBytes_; }
  int ringChunkSlices() const { return ringChunkSlices_; }
  int netRails() const { return netRails_; }
  // Direct transfers where every pair supports them: the smallest message sent so (0: none), and whether any buffer
  // goes (not only exported blocks). The same on every rank.
  size_t directMinBytes() const { return directMinBytes_; }
  bool directAnyBuffer() const { return directAnyBuffer_; }
  // "tcp" or "ucx": the network transport selected (whether or not a pair uses it).
  const char* netName() const;
  // The longest round trip between this communicator's hosts, as tcp measured it at connect
  // (TcpTransport::pathRttSeconds); the same on every rank. 0 where no pair uses tcp (one host, or ucx).
  double netRttSeconds() const;
  // Fails every network end now (their check() says "aborted") and skips the destructor's flush to dead peers.
  // Any thread, never blocks, idempotent.
  void abort();

 private:
  enum class Net : uint32_t { Tcp = 1, Ucx = 2 };
  TransportSet(int rank, int nRanks);
  static Result<Net> chooseNet(const std::string& ncclNet, const std::string& cfxNet);
  Status connectNet(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, const TransportRequest& request,
                    size_t* slice, int* chunkSlices);
  Status agreeNet(Bootstrap& bootstrap);
  Status agreeSlicing(Bootstrap& bootstrap, size_t slice, int chunkSlices);

  const int rank_;
  const int nRanks_;
  Net net_ = Net::Tcp;
  Endpoints endpoints_;
  std::unique_ptr<shm::ShmTransport> shm_;
  std::unique_ptr<tcp::TcpTransport> tcp_;
  std::unique_ptr<ucx::UcxTransport> ucx_;
  Doorbell* doorbell_ = nullptr;  // owned by shm_
  size_t sliceBytes_ = 0;
  int ringChunkSlices_ = 1;
  int netRails_ = 1;
  size_t directMinBytes_ = 0;
  bool directAnyBuffer_ = false;
};

}  // namespace cfx::transport
