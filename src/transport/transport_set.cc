// SPDX-License-Identifier: Apache-2.0
// The transport set (transport layer): shared memory first, the selected network for the remaining pairs, then the
// ranks' agreement on slicing and direct transfers.
#include "transport/transport_set.h"

#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <mutex>

#include "common/log.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace cfx::transport {

// The network transport from NCCL_NET / ncclConfig_t.netName, else CFX_NET; tcp when neither is set.
Result<TransportSet::Net> TransportSet::chooseNet(const std::string& ncclNet, const std::string& cfxNet) {
  const bool fromNccl = !ncclNet.empty();
  const std::string& name = fromNccl ? ncclNet : cfxNet;
  const char* source = fromNccl ? "NCCL_NET (or ncclConfig_t.netName)" : "CFX_NET";
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "socket" || lower == "tcp") return Net::Tcp;
  if (lower == "ucx" || lower == "ib") {
    if (!ucx::UcxTransport::available()) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("%s=%s needs the UCX transport, but this library was built without UCX; "
                                     "rebuild with UCX's development package installed, or use Socket",
                                     source, name.c_str()));
    }
    // NCCL's IB plugin talks verbs directly; ours reaches verbs (and RoCE) through UCX.
    return Net::Ucx;
  }
  return Status::error(Errc::InvalidUsage, strprintf("%s=%s is not a network this library offers: use Socket (or "
                                                     "TCP), UCX, or IB (UCX over verbs)",
                                                     source, name.c_str()));
}

Status TransportSet::check(const TransportRequest& request) {
  return chooseNet(request.ncclNet, request.cfxNet).status();
}

const char* TransportSet::netName() const { return net_ == Net::Ucx ? "ucx" : "tcp"; }

double TransportSet::netRttSeconds() const { return tcp_ ? tcp_->pathRttSeconds() : 0; }

Result<std::unique_ptr<TransportSet>> TransportSet::connect(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                            int rank, const TransportRequest& request) {
  std::unique_ptr<TransportSet> set(new TransportSet(rank, static_cast<int>(peers.size())));
  CFX_TRY_ASSIGN(set->net_, chooseNet(request.ncclNet, request.cfxNet));
  set->endpoints_.resize(set->nRanks_);
  const auto shmOptions = shm::ShmOptions::fromParams();
  CFX_TRY_ASSIGN(set->shm_, shm::ShmTransport::create(bootstrap, peers, shmOptions, set->endpoints_));
  set->doorbell_ = &set->shm_->doorbell();
  size_t slice = set->shm_->geometry().slotBytes;  // shrunk when many ranks share a host
  int chunkSlices = 1;                             // see prims::Prims::ringChunkSlices()
  Status st = set->connectNet(bootstrap, peers, request, &slice, &chunkSlices);
  if (st.ok()) st = set->agreeSlicing(bootstrap, slice, chunkSlices);
  if (!st.ok()) {
    if (request.abortFlag != nullptr && request.abortFlag->load(std::memory_order_acquire)) set->abort();
    return st;
  }
  return set;
}

TransportSet::TransportSet(int rank, int nRanks) : rank_(rank), nRanks_(nRanks) {}

TransportSet::~TransportSet() {
  endpoints_ = Endpoints();
  tcp_.reset();
  ucx_.reset();
  shm_.reset();
}

bool TransportSet::sharesMemory(int a, int b) const { return shm_ && shm_->connects(a, b); }

void TransportSet::abort() {
  if (tcp_) tcp_->abort();
  if (ucx_) ucx_->abort();
}

// tcp and ucx exchange different records: agree on the choice first, so a mismatch is named, not garbled.
Status TransportSet::agreeNet(Bootstrap& bootstrap) {
  std::vector<uint32_t> nets(static_cast<size_t>(nRanks_), 0);
  nets[static_cast<size_t>(rank_)] = static_cast<uint32_t>(net_);
  CFX_TRY(bootstrap.allGather(nets.data(), sizeof(uint32_t)));
  for (int p = 0; p < nRanks_; ++p) {
    if (nets[static_cast<size_t>(p)] != static_cast<uint32_t>(net_)) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("rank %d selected the %s network transport but rank %d selected %s: set "
                                     "NCCL_NET/CFX_NET alike on every rank",
                                     p, nets[static_cast<size_t>(p)] == static_cast<uint32_t>(Net::Ucx) ? "ucx" : "tcp",
                                     rank_, netName()));
    }
  }
  return Status();
}

// Peers without a shm end talk over the network transport. shm_->connects() gives the same answer on every rank, so
// the collective create() below is entered by all ranks or by none.
Status TransportSet::connectNet(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                const TransportRequest& request, size_t* slice, int* chunkSlices) {
  std::vector<bool> useNet(static_cast<size_t>(nRanks_), false);
  bool anyNetPair = false;
  for (int i = 0; i < nRanks_; ++i) {
    for (int j = 0; j < nRanks_; ++j) {
      if (i != j && !shm_->connects(i, j)) anyNetPair = true;
    }
  }
  for (int p = 0; p < nRanks_; ++p) {
    if (p != rank_ && !shm_->connects(rank_, p)) useNet[static_cast<size_t>(p)] = true;
  }
  if (!anyNetPair) return Status();
  CFX_TRY(agreeNet(bootstrap));
  if (net_ == Net::Ucx) {
    // ucx moves slots as tagged messages, received in place (RDMA where there is a device): nothing seals them.
    const WireProtection asked = request.protection;
    if (asked == WireProtection::Integrity || asked == WireProtection::Encryption) {
      return Status::error(Errc::InvalidUsage,
                           "CFX_WIRE_PROTECTION=integrity/encryption is not implemented for the ucx transport "
                           "(NCCL_NET/CFX_NET=ucx): use the tcp transport for protected frames, or set "
                           "CFX_WIRE_PROTECTION=off (ucx then authenticates each endpoint's hello only)");
    }
    static std::once_flag ucxOnce;
    if (asked == WireProtection::Auto) {
      std::call_once(ucxOnce, [] {
        CFX_WARN("ucx: data frames are not authenticated (only each endpoint's hello is); the tcp transport "
                 "protects them (docs/notes/security.md)");
      });
    }
    const auto ucxOptions = ucx::UcxOptions::fromParams();
    *slice = std::min(*slice, ucxOptions.geometry.slotBytes);
    CFX_TRY_ASSIGN(ucx_, ucx::UcxTransport::create(bootstrap, peers, useNet, *doorbell_, ucxOptions, endpoints_));
    return Status();
  }
  auto tcpOptions = tcp::TcpOptions::fromParams();
  tcpOptions.protection = request.protection;
  tcpOptions.bindAddress = bootstrap.localAddress();  // same interface as the bootstrap, any free port
  tcpOptions.railInterfaces.ifName = request.ifName;
  tcpOptions.railInterfaces.family = request.family;
  if (tcpOptions.bindAddress.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&tcpOptions.bindAddress)->sin6_port = 0;
  } else {
    reinterpret_cast<sockaddr_in*>(&tcpOptions.bindAddress)->sin_port = 0;
  }
  CFX_TRY_ASSIGN(tcp_, tcp::TcpTransport::create(bootstrap, peers, useNet, *doorbell_, tcpOptions, endpoints_));
  // On a long fat path the tcp slots grew (every rank alike) so that a slice covers the round trip a ring step
  // waits for; the shm slot bounds only a rank that has shm peers (agreeSlicing() still takes the min).
  bool shmPeer = false;
  for (int p = 0; p < nRanks_; ++p) shmPeer = shmPeer || (p != rank_ && shm_->connects(rank_, p));
  const size_t tcpSlot = tcp_->slotBytes();
  const bool grown = tcpSlot > tcpOptions.geometry.slotBytes && !shmPeer;
  *slice = grown ? tcpSlot : std::min(*slice, tcpSlot);
  // With one slice per ring chunk, a 2-rank all-reduce over 50 ms paid a round trip per two 8 MiB slices and
  // reached 0.66 of iperf3; several slices per chunk keep the path busy across loops.
  if (grown) *chunkSlices = std::max(1, tcpOptions.geometry.nSlots - 1);
  return Status();
}

// Every hop must slice a message identically: agree on the smallest slice any rank can carry, and on the fewest
// slices per ring chunk (1 wherever some rank has a shared-memory peer or ordinary slots). With them, the network
// rails the planner prices (the fewest any rank listens on), so every rank plans alike.
Status TransportSet::agreeSlicing(Bootstrap& bootstrap, size_t slice, int chunkSlices) {
  constexpr int kAgreed = 3;
  std::vector<uint64_t> slices(static_cast<size_t>(kAgreed * nRanks_), 0);
  slices[static_cast<size_t>(kAgreed * rank_)] = slice;
  slices[static_cast<size_t>(kAgreed * rank_ + 1)] = static_cast<uint64_t>(chunkSlices);
  slices[static_cast<size_t>(kAgreed * rank_ + 2)] = static_cast<uint64_t>(tcp_ ? tcp_->rails() : 1);
  CFX_TRY(bootstrap.allGather(slices.data(), kAgreed * sizeof(uint64_t)));
  sliceBytes_ = SIZE_MAX;
  uint64_t agreedChunk = UINT64_MAX;
  uint64_t agreedRails = UINT64_MAX;
  for (int p = 0; p < nRanks_; ++p) {
    sliceBytes_ = std::min<size_t>(sliceBytes_, slices[static_cast<size_t>(kAgreed * p)]);
    agreedChunk = std::min(agreedChunk, slices[static_cast<size_t>(kAgreed * p + 1)]);
    agreedRails = std::min(agreedRails, slices[static_cast<size_t>(kAgreed * p + 2)]);
  }
  ringChunkSlices_ = static_cast<int>(std::clamp<uint64_t>(agreedChunk, 1, 64));
  netRails_ = static_cast<int>(std::clamp<uint64_t>(agreedRails, 1, 64));
  // Direct messages go only where every pair supports them, from the agreed threshold on (the Direct algorithms
  // send whole blocks from strands of their own, prims.h); shm_->direct() is the same on every rank, so every rank
  // plans alike.
  bool allDirect = nRanks_ > 1;
  for (int i = 0; i < nRanks_ && allDirect; ++i) {
    for (int j = 0; j < nRanks_ && allDirect; ++j) allDirect = i == j || shm_->direct(i, j);
  }
  directMinBytes_ = allDirect ? shm_->directThreshold() : 0;
  directAnyBuffer_ = allDirect && shm_->directAnyBuffer();
  return Status();
}

}  // namespace cfx::transport
