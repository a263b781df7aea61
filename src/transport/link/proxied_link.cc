// SPDX-License-Identifier: Apache-2.0
// The proxied link's slot FIFOs, proxy waker, health and ends (transport layer). Nothing here touches the wire:
// the transport's link and proxy do.
#include "transport/link/proxied_link.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "transport/owner_drive.h"

namespace cfx::transport::link {

void SlotRing::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

SlotRing::SlotRing(const FifoGeometry& geometry, size_t room)
    : slotBytes_(geometry.slotBytes),
      nSlots_(geometry.nSlots),
      room_(room),
      stride_(room + geometry.slotBytes),
      headers_(new SlotHeader[geometry.nSlots]) {
  const size_t total = stride_ * static_cast<size_t>(nSlots_);
  // Page alignment: without room, slots start on page boundaries (slotBytes is a multiple of 64), which the
  // kernel's copy routines (tcp, cma) like; RDMA registration pins whole pages.
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(p);
}

Result<std::shared_ptr<ProxyWaker>> ProxyWaker::create(const char* transport) {
  net::UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) {
    return Status::error(Errc::SystemError, strprintf("%s: eventfd(): %s", transport, std::strerror(errno)));
  }
  return std::make_shared<ProxyWaker>(std::move(fd));
}

void ProxyWaker::wake() {
  // acq_rel pairs with drain()'s exchange: if ours is ordered before it, the proxy's acquire sees every store
  // this thread made before wake(); if after, we read false and write the eventfd, so the proxy wakes again.
  if (!pending_.exchange(true, std::memory_order_acq_rel)) {
    const uint64_t one = 1;
    // The only possible failure is a counter overflow after 2^64 wakes, which cannot happen.
    (void)!::write(fd_.get(), &one, sizeof(one));
  }
}

void ProxyWaker::drain() {
  uint64_t count = 0;
  (void)!::read(fd_.get(), &count, sizeof(count));
  // acq_rel: see wake().
  pending_.exchange(false, std::memory_order_acq_rel);
}

ProxiedLink::ProxiedLink(int peer, int channel, std::string description, const FifoGeometry& geometry, size_t room,
                         std::vector<std::shared_ptr<ProxyWaker>> wakers, const char* kind)
    : peer_(peer),
      channel_(channel),
      description_(std::move(description)),
      kind_(kind),
      send_(geometry, room),
      recv_(geometry, room),
      wakers_(std::move(wakers)) {}

void ProxiedLink::fail(Status error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;  // under mutex_: the first failure wins
  error_ = std::move(error);
  // Release pairs with failed()'s acquire load.
  failed_.store(true, std::memory_order_release);
}

Status ProxiedLink::status() const {
  if (!failed()) return Status();
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void ProxiedLink::failLocally(bool aborted) {
  fail(Status::error(Errc::InvalidUsage,
                     strprintf("%s: connection to %s was %s", kind_, description_.c_str(),
                               aborted ? "aborted by this rank" : "closed by this rank (transport destroyed)")));
}

void* ProxiedSendEnd::tryAcquire() {
  SlotRing& ring = link_->sendRing();
  const auto nSlots = static_cast<uint64_t>(ring.nSlots());
  if (next_ - freedSeen_ >= nSlots) {
    // Acquire pairs with the proxy's release store of tail: the transport is done with the slot's old bytes.
    freedSeen_ = ring.tail.load(std::memory_order_acquire);
    if (next_ - freedSeen_ >= nSlots) {
      // Owner-driven I/O (file comment of proxied_link.h): what frees a slot may be the owner's own sending.
      if (++fullPolls_ % kInlinePollEvery != 0 || !link_->driveFromOwner(OwnerMoment::SendFull)) return nullptr;
      freedSeen_ = ring.tail.load(std::memory_order_acquire);
      if (next_ - freedSeen_ >= nSlots) return nullptr;
    }
  }
  return ring.slot(next_);
}

void ProxiedSendEnd::post(size_t bytes, uint64_t tag) {
  SlotRing& ring = link_->sendRing();
  assert(bytes <= ring.slotBytes() && "post() beyond slotBytes()");
  assert(next_ - freedSeen_ < static_cast<uint64_t>(ring.nSlots()) && "post() without a slot from tryAcquire()");
  ring.header(next_) = SlotHeader{bytes, tag};
  ++next_;
  // Release pairs with the proxy's acquire load of head: payload and header are visible before it sends.
  ring.head.store(next_, std::memory_order_release);
  // Owner-driven I/O sends at once; otherwise (or where the proxy holds the link, or it failed: the proxy closes
  // what died) the proxy is woken.
  if (!link_->driveFromOwner(OwnerMoment::Posted)) link_->wakeProxy();
}

void ProxiedSendEnd::postFrom(const void* src, size_t bytes, uint64_t tag) {
  SlotRing& ring = link_->sendRing();
  assert(bytes <= ring.slotBytes() && "postFrom() beyond slotBytes()");
  assert(next_ - freedSeen_ < static_cast<uint64_t>(ring.nSlots()) && "postFrom() without a slot from tryAcquire()");
  if (link_->sendsFromCaller() && link_->sendFrom(next_, src, bytes, tag)) {
    ++next_;                                  // published by sendFrom()
    if (link_->failed()) link_->wakeProxy();  // the proxy closes what died
    return;
  }
  std::memcpy(ring.slot(next_), src, bytes);
  post(bytes, tag);
}

const void* ProxiedRecvEnd::tryPeek(size_t* bytes, uint64_t* tag) {
  SlotRing& ring = link_->recvRing();
  if (next_ == publishedSeen_) {
    // Acquire pairs with the proxy's release store of head: the slot and its header are complete.
    publishedSeen_ = ring.head.load(std::memory_order_acquire);
    if (next_ == publishedSeen_) {
      // Owner-driven I/O: the message may be in the transport, with the proxy asleep. A failure the drive finds
      // is in the link for check().
      if (++emptyPeeks_ % kInlinePollEvery != 0 || !link_->driveFromOwner(OwnerMoment::RecvEmpty)) return nullptr;
      publishedSeen_ = ring.head.load(std::memory_order_acquire);
      if (next_ == publishedSeen_) return nullptr;
    }
  }
  const SlotHeader& h = ring.header(next_);
  *bytes = static_cast<size_t>(h.bytes);
  *tag = h.tag;
  return ring.slot(next_);
}

void ProxiedRecvEnd::release() {
  SlotRing& ring = link_->recvRing();
  assert(next_ < publishedSeen_ && "release() without a slot from tryPeek()");
  // A message can be waiting for a free slot only while the ring is full.
  const bool wasFull = ring.head.load(std::memory_order_acquire) - next_ >= static_cast<uint64_t>(ring.nSlots());
  ++next_;
  // Release pairs with the proxy's acquire load of tail: we are done reading the slot; it may be refilled.
  ring.tail.store(next_, std::memory_order_release);
  if (!link_->driveFromOwner(wasFull ? OwnerMoment::ReleasedFull : OwnerMoment::Released)) link_->wakeProxy();
}

Status checkEndsFree(const char* kind, int rank, int nRanks, size_t nPeerInfos, const std::vector<bool>& connect,
                     const Endpoints& out) {
  if (nPeerInfos != static_cast<size_t>(nRanks) || connect.size() != static_cast<size_t>(nRanks)) {
    return Status::error(Errc::InvalidArgument, strprintf("%s: %zu peer infos and a mask of %zu for %d ranks", kind,
                                                          nPeerInfos, connect.size(), nRanks));
  }
  for (int ch = 0; ch < kNumChannels; ++ch) {
    for (int p = 0; p < static_cast<int>(connect.size()); ++p) {
      if (p == rank || !connect[static_cast<size_t>(p)]) continue;
      if (out.has(ch, p)) {
        return Status::error(
            Errc::InvalidArgument,
            strprintf("%s: channel %d to rank %d already has an end of another transport", kind, ch, p));
      }
    }
  }
  return Status();
}

void addEnds(const std::shared_ptr<ProxiedLink>& link, Endpoints& out) {
  const auto ch = static_cast<size_t>(link->channel());
  const auto p = static_cast<size_t>(link->peer());
  out.send[ch][p] = std::make_unique<ProxiedSendEnd>(link);
  out.recv[ch][p] = std::make_unique<ProxiedRecvEnd>(link);
}

}  // namespace cfx::transport::link
