// SPDX-License-Identifier: Apache-2.0
// The UCX transport's slot FIFOs and ends (transport layer). Nothing here calls UCX: the proxy does.
#include "transport/ucx/ucx_connection.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "transport/owner_drive.h"

namespace cfx::transport::ucx {

void SlotRing::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

SlotRing::SlotRing(const FifoGeometry& geometry)
    : slotBytes_(geometry.slotBytes), nSlots_(geometry.nSlots), stride_(kSlotRoom + geometry.slotBytes) {
  const size_t total = stride_ * static_cast<size_t>(nSlots_);
  // Page alignment: RDMA registration pins whole pages, and the kernel's copy routines (tcp, cma) like it.
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(p);
}

Result<std::shared_ptr<ProxyWaker>> ProxyWaker::create() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status::error(Errc::SystemError, strprintf("ucx: eventfd(): %s", std::strerror(errno)));
  return std::make_shared<ProxyWaker>(fd);
}

ProxyWaker::~ProxyWaker() { ::close(fd_); }

void ProxyWaker::wake() {
  // acq_rel pairs with drain()'s exchange: if ours is ordered before it, the proxy's acquire sees every store
  // this thread made before wake(); if after, we read false and write the eventfd, so the proxy wakes again.
  if (!pending_.exchange(true, std::memory_order_acq_rel)) {
    const uint64_t one = 1;
    // The only possible failure is a counter overflow after 2^64 wakes, which cannot happen.
    (void)!::write(fd_, &one, sizeof(one));
  }
}

void ProxyWaker::drain() {
  uint64_t count = 0;
  (void)!::read(fd_, &count, sizeof(count));
  // acq_rel: see wake().
  pending_.exchange(false, std::memory_order_acq_rel);
}

UcxLink::UcxLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
                 std::shared_ptr<ProxyWaker> waker, pid_t probePid)
    : peer_(peer),
      channel_(channel),
      description_(std::move(description)),
      send_(geometry),
      recv_(geometry),
      waker_(std::move(waker)),
      probePid_(probePid) {}

bool UcxLink::driveInline() {
  if (!gate_) return false;
  std::unique_lock<std::mutex> lock(gate_->mutex, std::try_to_lock);
  if (!lock.owns_lock() || !gate_->drive) return false;
  gate_->ticks.fetch_add(1, std::memory_order_relaxed);
  gate_->drive();
  return true;
}

void UcxLink::fail(Status error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;  // under mutex_: the first failure wins
  error_ = std::move(error);
  // Release pairs with failed()'s acquire load.
  failed_.store(true, std::memory_order_release);
}

Status UcxLink::status() const {
  if (!failed()) return Status();
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

Status UcxLink::check() {
  if (!failed() && probePid_ > 0 && ::kill(probePid_, 0) != 0 && errno == ESRCH) {
    fail(Status::error(Errc::RemoteError, strprintf("ucx: %s exited (its process is gone); check that process for "
                                                    "its own error",
                                                    description_.c_str())));
  }
  return status();
}

void* UcxSendEnd::tryAcquire() {
  SlotRing& ring = link_->sendRing();
  const auto nSlots = static_cast<uint64_t>(ring.nSlots());
  if (next_ - freedSeen_ >= nSlots) {
    // Acquire pairs with the proxy's release store of tail: UCX is done reading the slot's old frame.
    freedSeen_ = ring.tail.load(std::memory_order_acquire);
    if (next_ - freedSeen_ >= nSlots) {
      // Owner-driven progress (ucx_proxy.h): the completions that free a slot may wait for a round.
      if (++fullPolls_ % kInlinePollEvery != 0 || !link_->driveInline()) return nullptr;
      freedSeen_ = ring.tail.load(std::memory_order_acquire);
      if (next_ - freedSeen_ >= nSlots) return nullptr;
    }
  }
  return ring.payload(next_);
}

void UcxSendEnd::post(size_t bytes, uint64_t tag) {
  SlotRing& ring = link_->sendRing();
  assert(bytes <= ring.slotBytes() && "post() beyond slotBytes()");
  assert(next_ - freedSeen_ < static_cast<uint64_t>(ring.nSlots()) && "post() without a slot from tryAcquire()");
  ring.writeHeader(next_, bytes, tag);
  ++next_;
  // Release pairs with the proxy's acquire load of head: payload and header are visible before it sends.
  ring.head.store(next_, std::memory_order_release);
  // Owner-driven progress sends at once; without it (or with the proxy in a round) the proxy is woken.
  if (!link_->driveInline()) link_->wakeProxy();
}

const void* UcxRecvEnd::tryPeek(size_t* bytes, uint64_t* tag) {
  SlotRing& ring = link_->recvRing();
  if (next_ == publishedSeen_) {
    // Acquire pairs with the proxy's release store of head: the receive into the slot completed.
    publishedSeen_ = ring.head.load(std::memory_order_acquire);
    if (next_ == publishedSeen_) {
      // Inline progress (ucx_proxy.h; spacing: kInlinePollEvery): the message may be waiting for a proxy still
      // asleep.
      if (++emptyPeeks_ % kInlinePollEvery != 0) return nullptr;
      link_->driveInline();
      publishedSeen_ = ring.head.load(std::memory_order_acquire);
      if (next_ == publishedSeen_) return nullptr;
    }
  }
  *bytes = static_cast<size_t>(ring.headerBytes(next_));
  *tag = ring.headerTag(next_);
  return ring.payload(next_);
}

void UcxRecvEnd::release() {
  SlotRing& ring = link_->recvRing();
  assert(next_ < publishedSeen_ && "release() without a slot from tryPeek()");
  ++next_;
  // Release pairs with the proxy's acquire load of tail: we are done reading; it may post a receive there.
  ring.tail.store(next_, std::memory_order_release);
  if (!link_->driveInline()) link_->wakeProxy();
}

}  // namespace cfx::transport::ucx
