// SPDX-License-Identifier: Apache-2.0
// The UCX data transport: setup (worker, address exchange through the bootstrap, endpoints, hello) and
// teardown (transport layer).
#include "transport/ucx/ucx_transport.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/crypto.h"
#include "common/log.h"
#include "common/thread_affinity.h"
#include "common/wire.h"
#include "transport/peer_info.h"
#include "transport/ucx/ucx_hello.h"
#include "transport/ucx/ucx_proxy.h"

namespace cfx::transport::ucx {

namespace {

std::string describePeer(const PeerInfo& info, int rank) {
  return strprintf("peer rank %d (%s pid %d)", rank, info.hostName[0] != '\0' ? info.hostName : "?",
                   static_cast<int>(info.pid));
}

Status validate(const Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, const std::vector<bool>& connect,
                const UcxOptions& options, const Endpoints& out) {
  const int nRanks = bootstrap.nRanks();
  if (nRanks > kMaxRanks) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("ucx: %d ranks exceed the transport's limit of %d; use NCCL_NET=Socket", nRanks,
                                   kMaxRanks));
  }
  const FifoGeometry& g = options.geometry;
  if (g.nSlots < 1 || g.nSlots > kMaxSlots || g.slotBytes < 64 || g.slotBytes % 64 != 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("ucx: invalid slot geometry %d x %zu B (need 1..%d slots of a multiple of 64 "
                                   "bytes)",
                                   g.nSlots, g.slotBytes, kMaxSlots));
  }
  return link::checkEndsFree("ucx", bootstrap.rank(), nRanks, peers.size(), connect, out);
}

Result<uint32_t> tagKey(const Secret& secret) {
  CFX_TRY_ASSIGN(crypto::Digest d, crypto::hmacSha256(secret, {crypto::bytesOf("cfx-ucx-tag-key-v1")}));
  return wire::getU32(d.data()) & 0xFFFFFFu;
}

}  // namespace

bool UcxTransport::available() { return true; }

UcxTransport::UcxTransport(int rank, int nPeers, Doorbell& doorbell, std::chrono::milliseconds linger)
    : rank_(rank), nPeers_(nPeers), doorbell_(doorbell), linger_(linger) {}

Result<std::unique_ptr<UcxTransport>> UcxTransport::create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                           const std::vector<bool>& connect, Doorbell& localDoorbell,
                                                           const UcxOptions& options, Endpoints& out) {
  const int rank = bootstrap.rank();
  const int nRanks = bootstrap.nRanks();
  CFX_TRY(validate(bootstrap, peers, connect, options, out));
  int nPeers = 0;
  for (int p = 0; p < nRanks; ++p) nPeers += (p != rank && connect[static_cast<size_t>(p)]) ? 1 : 0;

  // A rank without UCX peers still takes part in both exchanges, with an empty address.
  UcxInstance instance;
  if (nPeers > 0) {
    CFX_TRY_ASSIGN(instance, UcxInstance::open(options.eagerSlots));
    if (instance.address.size() > kMaxAddressBytes) {
      return Status::error(Errc::SystemError, strprintf("ucx: this worker's address is %zu bytes, more than the %u "
                                                        "this transport exchanges; narrow UCX_TLS/UCX_NET_DEVICES",
                                                        instance.address.size(), kMaxAddressBytes));
    }
  }
  AddressRecord mine;
  mine.slotBytes = options.geometry.slotBytes;
  mine.nSlots = static_cast<uint32_t>(options.geometry.nSlots);
  mine.addressBytes = static_cast<uint32_t>(instance.address.size());
  std::vector<uint8_t> encoded(kAddressRecordBytes * static_cast<size_t>(nRanks));
  encodeRecord(mine, encoded.data() + kAddressRecordBytes * static_cast<size_t>(rank));
  CFX_TRY(bootstrap.allGather(encoded.data(), kAddressRecordBytes));
  std::vector<AddressRecord> records(static_cast<size_t>(nRanks));
  for (int p = 0; p < nRanks; ++p) {
    records[static_cast<size_t>(p)] = decodeRecord(encoded.data() + kAddressRecordBytes * static_cast<size_t>(p));
  }
  for (int p = 0; p < nRanks; ++p) {
    CFX_TRY(checkAddressBytes(records[static_cast<size_t>(p)], describePeer(peers[static_cast<size_t>(p)], p)));
  }
  size_t widest = 0;
  for (const AddressRecord& r : records) widest = std::max<size_t>(widest, r.addressBytes);
  std::vector<uint8_t> addresses(widest * static_cast<size_t>(nRanks));
  if (widest > 0) {
    std::memcpy(addresses.data() + widest * static_cast<size_t>(rank), instance.address.data(),
                instance.address.size());
    CFX_TRY(bootstrap.allGather(addresses.data(), widest));
  }

  UcxProxy::Setup setup;
  setup.rank = rank;
  CFX_TRY_ASSIGN(setup.key24, tagKey(bootstrap.secret()));
  setup.geometry = options.geometry;
  // Inline progress only where this host's ranks fit its CPUs (common/thread_affinity.h).
  setup.inlineProgress = options.inlineProgress && ranksFitCpus(ranksOnHostOf(peers, rank));
  setup.secret.assign(bootstrap.secret().begin(), bootstrap.secret().end());
  setup.peerAddresses.resize(static_cast<size_t>(nRanks));
  setup.peerDescriptions.resize(static_cast<size_t>(nRanks));
  setup.sameHost.assign(static_cast<size_t>(nRanks), 0);
  setup.probePids.assign(static_cast<size_t>(nRanks), 0);
  for (int p = 0; p < nRanks; ++p) {
    const AddressRecord& r = records[static_cast<size_t>(p)];
    const PeerInfo& peer = peers[static_cast<size_t>(p)];
    setup.peerDescriptions[static_cast<size_t>(p)] = describePeer(peer, p);
    setup.sameHost[static_cast<size_t>(p)] = peer.hostHash == peers[static_cast<size_t>(rank)].hostHash ? 1 : 0;
    if (pidVisible(peers[static_cast<size_t>(rank)], peer)) setup.probePids[static_cast<size_t>(p)] = peer.pid;
    if (p == rank || !connect[static_cast<size_t>(p)]) continue;
    CFX_TRY(checkPeerRecord(r, options.geometry, rank, p, setup.peerDescriptions[static_cast<size_t>(p)]));
    const uint8_t* a = addresses.data() + widest * static_cast<size_t>(p);
    setup.peerAddresses[static_cast<size_t>(p)].assign(a, a + r.addressBytes);
  }
  std::unique_ptr<UcxTransport> transport(new UcxTransport(rank, nPeers, localDoorbell, options.closeLinger));
  if (nPeers == 0) return transport;

  // Counted from here: ranks leave the allGather together (the bootstrap bounds that wait itself).
  setup.deadline = Deadline(options.connectTimeout);
  CFX_TRY_ASSIGN(transport->proxy_, UcxProxy::create(std::move(instance), setup, localDoorbell));
  CFX_TRY(transport->proxy_->start());

  out.resize(nRanks);
  for (int p = 0; p < nRanks; ++p) {
    for (int ch = 0; ch < kNumChannels; ++ch) {
      std::shared_ptr<UcxLink> link = transport->proxy_->link(p, ch);
      if (link == nullptr) continue;
      link::addEnds(link, out);
    }
  }
  CFX_INFO(log::Sys::Net,
           "ucx: rank %d connected to %d peers (worker address %zu B), slots %d x %zu B, inline progress %s", rank,
           nPeers, setup.peerAddresses.empty() ? size_t{0} : widest, options.geometry.nSlots,
           options.geometry.slotBytes,
           setup.inlineProgress ? "on"
                                : (options.inlineProgress ? "off (more ranks on this host than CPUs)" : "off (CFX_UCX_INLINE=0)"));
  return transport;
}

UcxTransport::~UcxTransport() {
  if (!proxy_) return;
  // Relaxed: see aborted_.
  proxy_->stop(aborted_.load(std::memory_order_relaxed) ? std::chrono::milliseconds(0) : linger_);
  for (const auto& link : proxy_->links()) link->failLocally(/*aborted=*/false);
  proxy_.reset();
  doorbell_.ring();
}

void UcxTransport::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  if (!proxy_) return;
  for (const auto& link : proxy_->links()) link->failLocally(/*aborted=*/true);
  doorbell_.ring();
}

}  // namespace cfx::transport::ucx
