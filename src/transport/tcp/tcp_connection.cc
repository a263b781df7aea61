// SPDX-License-Identifier: Apache-2.0
// The TCP transport's slot FIFOs, its ends, and the proxy-side frame I/O of one socket (transport layer).
#include "transport/tcp/tcp_connection.h"

#include <endian.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace cfx::transport::tcp {

namespace {
// Frames gathered into one sendmsg(): header and payload each take one iovec.
constexpr int kMaxIovecs = 32;
}  // namespace

WireHeader WireHeader::encode(uint64_t bytes, uint64_t tag) { return WireHeader{htole64(bytes), htole64(tag)}; }
uint64_t WireHeader::bytes() const { return le64toh(bytesLe); }
uint64_t WireHeader::tag() const { return le64toh(tagLe); }

void SlotRing::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

SlotRing::SlotRing(const FifoGeometry& geometry)
    : slotBytes_(geometry.slotBytes), nSlots_(geometry.nSlots), headers_(new WireHeader[geometry.nSlots]) {
  const size_t total = slotBytes_ * static_cast<size_t>(nSlots_);
  // 4 KiB alignment: slots start on page boundaries (slotBytes is a multiple of 64), which the kernel's copy
  // routines like, and which a later zero-copy path needs.
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(p);
}

Result<std::shared_ptr<ProxyWaker>> ProxyWaker::create() {
  net::UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) return Status::error(Errc::SystemError, strprintf("tcp: eventfd(): %s", std::strerror(errno)));
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

TcpLink::TcpLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
                 std::shared_ptr<ProxyWaker> waker)
    : peer_(peer),
      channel_(channel),
      description_(std::move(description)),
      send_(geometry),
      recv_(geometry),
      waker_(std::move(waker)) {}

void TcpLink::fail(Status error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;  // under mutex_: the first failure wins
  error_ = std::move(error);
  // Release pairs with failed()'s acquire load.
  failed_.store(true, std::memory_order_release);
}

Status TcpLink::status() const {
  if (!failed()) return Status();
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void* TcpSendEnd::tryAcquire() {
  SlotRing& ring = link_->sendRing();
  const auto nSlots = static_cast<uint64_t>(ring.nSlots());
  if (next_ - freedSeen_ >= nSlots) {
    // Acquire pairs with the proxy's release store of tail in progressSend(): the slot's old frame is out.
    freedSeen_ = ring.tail.load(std::memory_order_acquire);
    if (next_ - freedSeen_ >= nSlots) return nullptr;
  }
  return ring.slot(next_);
}

void TcpSendEnd::post(size_t bytes, uint64_t tag) {
  SlotRing& ring = link_->sendRing();
  assert(bytes <= ring.slotBytes() && "post() beyond slotBytes()");
  assert(next_ - freedSeen_ < static_cast<uint64_t>(ring.nSlots()) && "post() without a slot from tryAcquire()");
  ring.header(next_) = WireHeader::encode(bytes, tag);
  ++next_;
  // Release pairs with the proxy's acquire load of head in progressSend(): payload and header are visible.
  ring.head.store(next_, std::memory_order_release);
  link_->wakeProxy();
}

const void* TcpRecvEnd::tryPeek(size_t* bytes, uint64_t* tag) {
  SlotRing& ring = link_->recvRing();
  if (next_ == publishedSeen_) {
    // Acquire pairs with the proxy's release store of head in progressRecv(): the frame is complete.
    publishedSeen_ = ring.head.load(std::memory_order_acquire);
    if (next_ == publishedSeen_) return nullptr;
  }
  const WireHeader& h = ring.header(next_);
  *bytes = static_cast<size_t>(h.bytes());
  *tag = h.tag();
  return ring.slot(next_);
}

void TcpRecvEnd::release() {
  SlotRing& ring = link_->recvRing();
  assert(next_ < publishedSeen_ && "release() without a slot from tryPeek()");
  ++next_;
  // Release pairs with the proxy's acquire load of tail in progressRecv(): we are done reading the slot.
  ring.tail.store(next_, std::memory_order_release);
  link_->wakeProxy();
}

TcpStream::TcpStream(net::Socket socket, std::shared_ptr<TcpLink> link)
    : socket_(std::move(socket)), link_(std::move(link)) {}

void TcpStream::onEvents(uint32_t events) {
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) canRead_ = true;
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) canWrite_ = true;
  if ((events & EPOLLERR) != 0 && !dead_) {
    // Surface a reset at once, even when neither direction has anything to move right now.
    int soError = 0;
    socklen_t len = sizeof(soError);
    if (::getsockopt(socket_.fd(), SOL_SOCKET, SO_ERROR, &soError, &len) == 0 && soError != 0) {
      fail(strprintf("failed: %s", std::strerror(soError)));
    }
  }
}

bool TcpStream::progress() {
  bool progressed = progressSend();
  progressed |= progressRecv();
  return progressed;
}

bool TcpStream::hasUnsentSlots() const {
  // Acquire pairs with post()'s release store; the proxy thread is the only caller.
  return !dead_ && txSlot_ != link_->sendRing().head.load(std::memory_order_acquire);
}

void TcpStream::fail(const std::string& what) {
  link_->fail(Status::error(Errc::RemoteError, strprintf("tcp: connection to %s %s; check that process for its own "
                                                         "error",
                                                         link_->description().c_str(), what.c_str())));
  dead_ = true;
}

bool TcpStream::progressSend() {
  SlotRing& ring = link_->sendRing();
  bool freed = false;
  while (canWrite_ && !dead_) {
    // Acquire pairs with TcpSendEnd::post()'s release store: posted payloads and headers are visible.
    const uint64_t posted = ring.head.load(std::memory_order_acquire);
    if (txSlot_ == posted) break;
    iovec iov[kMaxIovecs];
    int nIov = 0;
    size_t skip = txOffset_;  // bytes of the first frame already sent
    for (uint64_t s = txSlot_; s != posted && nIov + 2 <= kMaxIovecs; ++s) {
      WireHeader& header = ring.header(s);
      const size_t payload = static_cast<size_t>(header.bytes());
      if (skip < sizeof(header)) {
        iov[nIov++] = {reinterpret_cast<uint8_t*>(&header) + skip, sizeof(header) - skip};
        skip = 0;
      } else {
        skip -= sizeof(header);
      }
      if (payload > skip) iov[nIov++] = {ring.slot(s) + skip, payload - skip};
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(nIov);
    const ssize_t sent = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        canWrite_ = false;
        break;
      }
      fail(strprintf("failed while sending: %s", std::strerror(errno)));
      break;
    }
    auto left = static_cast<size_t>(sent);
    const uint64_t before = txSlot_;
    while (left > 0) {
      const size_t frame = sizeof(WireHeader) + static_cast<size_t>(ring.header(txSlot_).bytes());
      const size_t rest = frame - txOffset_;
      if (left < rest) {
        txOffset_ += left;
        break;
      }
      left -= rest;
      txOffset_ = 0;
      ++txSlot_;
    }
    if (txSlot_ != before) {
      // Release pairs with TcpSendEnd::tryAcquire()'s acquire load: the owner may now overwrite these slots.
      ring.tail.store(txSlot_, std::memory_order_release);
      freed = true;
    }
  }
  return freed;
}

bool TcpStream::progressRecv() {
  SlotRing& ring = link_->recvRing();
  bool published = false;
  while (canRead_ && !dead_) {
    if (rxHeaderGot_ == 0) {
      // Start a frame only into a free slot. Acquire pairs with TcpRecvEnd::release()'s release store: the
      // owner has finished reading the slot we are about to overwrite.
      if (rxSlot_ - ring.tail.load(std::memory_order_acquire) >= static_cast<uint64_t>(ring.nSlots())) break;
    }
    uint8_t* dst = nullptr;
    size_t want = 0;
    if (rxHeaderGot_ < sizeof(WireHeader)) {
      dst = reinterpret_cast<uint8_t*>(&rxHeader_) + rxHeaderGot_;
      want = sizeof(WireHeader) - rxHeaderGot_;
    } else {
      dst = ring.slot(rxSlot_) + rxPayloadGot_;
      want = rxBytes_ - rxPayloadGot_;
    }
    if (want > 0) {
      const ssize_t n = ::recv(socket_.fd(), dst, want, MSG_DONTWAIT);
      if (n == 0) {
        fail(rxHeaderGot_ == 0 ? "was closed by the peer" : "was closed by the peer in the middle of a frame");
        break;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          canRead_ = false;
          break;
        }
        fail(strprintf("failed while receiving: %s", std::strerror(errno)));
        break;
      }
      if (rxHeaderGot_ < sizeof(WireHeader)) {
        rxHeaderGot_ += static_cast<size_t>(n);
        if (rxHeaderGot_ < sizeof(WireHeader)) continue;
        const uint64_t bytes = rxHeader_.bytes();
        if (bytes > ring.slotBytes()) {
          fail(
              strprintf("sent a frame of %llu bytes, larger than the %zu-byte slot: the byte stream is corrupt or "
                        "the peer runs an incompatible version",
                        static_cast<unsigned long long>(bytes), ring.slotBytes()));
          break;
        }
        rxBytes_ = static_cast<size_t>(bytes);
        rxPayloadGot_ = 0;
      } else {
        rxPayloadGot_ += static_cast<size_t>(n);
      }
    }
    if (rxHeaderGot_ == sizeof(WireHeader) && rxPayloadGot_ == rxBytes_) {
      ring.header(rxSlot_) = rxHeader_;
      ++rxSlot_;
      // Release pairs with TcpRecvEnd::tryPeek()'s acquire load: the whole frame and its header are visible.
      ring.head.store(rxSlot_, std::memory_order_release);
      rxHeaderGot_ = 0;
      published = true;
    }
  }
  return published;
}

}  // namespace cfx::transport::tcp
