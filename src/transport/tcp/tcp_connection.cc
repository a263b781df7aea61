// SPDX-License-Identifier: Apache-2.0
// The TCP transport's link (its stripe bookkeeping and owner-driven hooks) and the proxy-side stripe I/O of one
// socket (transport layer).
#include "transport/tcp/tcp_connection.h"

#include <endian.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.h"

namespace cfx::transport::tcp {

namespace {
// Frames gathered into one sendmsg(): header and payload each take one iovec.
constexpr int kMaxIovecs = 32;
// MSG_EOR marks the last segment of each sendmsg() as the end of a record, which exempts it from the kernel's
// autocorking (net.ipv4.tcp_autocorking, on by default and not covered by TCP_NODELAY). A frame of a 64 KiB stripe
// leaves the stack as a 65160-byte segment and a small tail; autocorking holds that tail until the segment before
// it is freed, and where that wait goes through a shaped or loaded path (the namespace bed's tbf on 2 cores) it
// stalled a whole all-to-all for 20-180 ms, a few times in a hundred (docs/notes/tcp_transport.md).
constexpr int kSendFlags = MSG_NOSIGNAL | MSG_DONTWAIT | MSG_EOR;
}  // namespace

TcpLink::TcpLink(int peer, int channel, std::string description, const FifoGeometry& geometry, int nStreams,
                 uint32_t minStripeBytes, std::vector<std::shared_ptr<ProxyWaker>> wakers)
    : ProxiedLink(peer, channel, std::move(description), geometry, /*room=*/0, std::move(wakers), "tcp"),
      nStreams_(nStreams),
      minStripeBytes_(minStripeBytes),
      txNext_(static_cast<size_t>(nStreams), 0),
      rxNext_(static_cast<size_t>(nStreams), 0),
      rxSlots_(static_cast<size_t>(geometry.nSlots)) {}

bool TcpLink::streamSent(int stream, uint64_t next) {
  std::lock_guard<std::mutex> lock(stripeMutex_);
  txNext_[static_cast<size_t>(stream)] = next;
  const uint64_t freed = *std::min_element(txNext_.begin(), txNext_.end());
  if (freed == txFreed_) return false;
  txFreed_ = freed;
  // Release pairs with ProxiedSendEnd::tryAcquire()'s acquire load: the owner may now overwrite these slots.
  sendRing().tail.store(freed, std::memory_order_release);
  return true;
}

uint64_t TcpLink::sendWindowEnd() {
  // Two slots: while one is being finished on a slow socket, the next keeps the others busy.
  constexpr uint64_t kLeadSlots = 2;
  if (nStreams_ == 1) return UINT64_MAX;
  std::lock_guard<std::mutex> lock(stripeMutex_);
  return txFreed_ + kLeadSlots;
}

TcpLink::Admit TcpLink::admitStripe(int stream, const StripeHeader& h, std::string* why) {
  std::lock_guard<std::mutex> lock(stripeMutex_);
  const auto nSlots = static_cast<uint64_t>(recvRing().nSlots());
  const StripeLayout layout = this->layout(h.bytes);
  uint64_t& next = rxNext_[static_cast<size_t>(stream)];
  if (h.seq < next || (stream == 0 && h.seq != next)) {
    *why =
        strprintf("sent slot %llu out of order on stream %d (expected %s%llu)", static_cast<unsigned long long>(h.seq),
                  stream, stream == 0 ? "" : "at least ", static_cast<unsigned long long>(next));
    return Admit::Reject;
  }
  // Acquire pairs with ProxiedRecvEnd::release()'s release store: the owner is done with slots before tail.
  if (h.seq - recvRing().tail.load(std::memory_order_acquire) >= nSlots) return Admit::Wait;
  // A stream never skips a slot that has a stripe on it: check the slots it jumps over that are already known.
  for (uint64_t s = std::max(next, rxPublished_); s < h.seq; ++s) {
    const RxSlot& skipped = rxSlots_[s % nSlots];
    if (skipped.known && stream < skipped.stripes) {
      *why = strprintf("skipped its stripe of slot %llu on stream %d", static_cast<unsigned long long>(s), stream);
      return Admit::Reject;
    }
  }
  RxSlot& slot = rxSlots_[h.seq % nSlots];
  if (!slot.known) {
    // The first stripe of this slot: no other stream of it may already have moved past it.
    for (int other = 0; other < layout.nStripes; ++other) {
      if (other != stream && rxNext_[static_cast<size_t>(other)] > h.seq) {
        *why = strprintf("skipped its stripe of slot %llu on stream %d", static_cast<unsigned long long>(h.seq), other);
        return Admit::Reject;
      }
    }
    slot = RxSlot{.known = true, .bytes = h.bytes, .tag = h.tag, .stripes = layout.nStripes, .arrived = 0};
  } else if (slot.bytes != h.bytes || slot.tag != h.tag) {
    *why = strprintf(
        "announced slot %llu as %u bytes with tag %llx on stream %d, but as %llu bytes with tag %llx "
        "before",
        static_cast<unsigned long long>(h.seq), h.bytes, static_cast<unsigned long long>(h.tag), stream,
        static_cast<unsigned long long>(slot.bytes), static_cast<unsigned long long>(slot.tag));
    return Admit::Reject;
  }
  next = h.seq + 1;
  return Admit::Accept;
}

bool TcpLink::streamEnded(int) {
  std::lock_guard<std::mutex> lock(stripeMutex_);
  return ++rxEnded_ >= nStreams_;
}

bool TcpLink::stripeArrived(uint64_t seq) {
  std::lock_guard<std::mutex> lock(stripeMutex_);
  const auto nSlots = static_cast<uint64_t>(recvRing().nSlots());
  ++rxSlots_[seq % nSlots].arrived;
  const uint64_t before = rxPublished_;
  for (;;) {
    RxSlot& slot = rxSlots_[rxPublished_ % nSlots];
    if (!slot.known || slot.arrived < slot.stripes) break;
    recvRing().header(rxPublished_) = SlotHeader{slot.bytes, slot.tag};
    slot = RxSlot{};
    ++rxPublished_;
  }
  if (rxPublished_ == before) return false;
  // Release pairs with ProxiedRecvEnd::tryPeek()'s acquire load: every stripe and the header are visible.
  recvRing().head.store(rxPublished_, std::memory_order_release);
  return true;
}

void TcpLink::attachStream(TcpStream* stream) {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  streams_.push_back(stream);
}

void TcpLink::detachStreams() {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  streams_.clear();
}

bool TcpLink::driveInline(bool sendOnly) {
  std::unique_lock<std::mutex> lock(streamsMutex_, std::try_to_lock);
  if (!lock.owns_lock() || streams_.empty()) return false;
  tickProxies();
  bool all = true;
  for (TcpStream* stream : streams_) all &= stream->tryDriveInline(sendOnly);
  return all;
}

bool TcpLink::sendFrom(uint64_t s, const void* src, size_t bytes, uint64_t tag) {
  std::unique_lock<std::mutex> lock(streamsMutex_, std::try_to_lock);
  if (!lock.owns_lock() || streams_.size() != 1) return false;
  tickProxies();
  return streams_[0]->trySendFrom(s, src, bytes, tag);
}

bool TcpLink::driveFromOwner(link::OwnerMoment moment) {
  if (!inline_) return false;
  switch (moment) {
    case link::OwnerMoment::SendFull:
    case link::OwnerMoment::Posted:
      // What frees a slot is our own sending; a post goes out at once. The proxy is woken where it holds a stream
      // or the link failed (it closes what died), and otherwise takes over what stays queued once this owner stops
      // driving (tcp_proxy.h).
      return driveHealthy(/*sendOnly=*/true);
    case link::OwnerMoment::RecvEmpty:
      // The message may be in the socket, with the proxy asleep.
      return driveHealthy(/*sendOnly=*/false);
    case link::OwnerMoment::Released:
      return true;
    case link::OwnerMoment::ReleasedFull:
      // Read the stripe that waited for this slot (TcpLink::admitStripe) here, unless the proxy holds the stream.
      return driveInline(/*sendOnly=*/false);
  }
  return false;
}

TcpStream::TcpStream(net::Socket socket, std::shared_ptr<TcpLink> link, int index, SocketKeys keys)
    : socket_(std::move(socket)),
      fd_(socket_.fd()),
      link_(std::move(link)),
      index_(index),
      txHeaders_(new uint8_t[static_cast<size_t>(link_->sendRing().nSlots())][kMaxStripeFrameHeaderBytes]),
      txKey_(std::move(keys.send)),
      rxKey_(std::move(keys.recv)),
      frameHeaderBytes_(kStripeHeaderBytes + txKey_.tagBytes()) {}

void TcpStream::takeEvents() {
  const uint32_t events = pendingEvents_.exchange(0, std::memory_order_relaxed);
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) canRead_ = true;
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) canWrite_ = true;
  if ((events & EPOLLERR) != 0 && !dead()) {
    // Surface a reset at once, even when neither direction has anything to move right now.
    int soError = 0;
    socklen_t len = sizeof(soError);
    if (::getsockopt(socket_.fd(), SOL_SOCKET, SO_ERROR, &soError, &len) == 0 && soError != 0) {
      fail(strprintf("failed: %s", std::strerror(soError)));
    }
  }
}

bool TcpStream::progress(bool* busy) {
  std::unique_lock<std::mutex> lock(io_, std::try_to_lock);
  if (!lock.owns_lock()) {
    *busy = true;
    return false;
  }
  if (!socket_.valid()) return false;
  takeEvents();
  bool progressed = progressSend();
  if (std::exchange(txMoved_, false)) armSendQueueWatch(/*ownerThread=*/false);
  progressed |= progressRecv(/*inlineRead=*/false);
  return progressed;
}

bool TcpStream::tryDriveInline(bool sendOnly) {
  std::unique_lock<std::mutex> lock(io_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (!socket_.valid() || dead()) return true;  // nothing to drive; the link says why
  takeEvents();
  // The proxy may be parked with the socket masked (tcp_proxy.h): ask the socket rather than wait for a report.
  canWrite_ = true;
  progressSend();
  if (std::exchange(txMoved_, false)) armSendQueueWatch(/*ownerThread=*/true);
  if (sendOnly) return true;
  // Edge-triggered readiness only reaches the proxy; the owner asks the socket itself, at the price of one recv()
  // that may find nothing.
  canRead_ = true;
  progressRecv(/*inlineRead=*/true);
  return true;
}

uint8_t* TcpStream::encodeTxHeader(uint64_t s, uint64_t tag, uint64_t bytes, size_t offset, size_t length,
                                   const uint8_t* payload, uint8_t* encryptTo) {
  uint8_t* header = txHeader(s);
  if (s < txSealed_) return header;
  encodeStripeHeader(StripeHeader{.seq = s,
                                  .tag = tag,
                                  .bytes = static_cast<uint32_t>(bytes),
                                  .offset = static_cast<uint32_t>(offset),
                                  .length = static_cast<uint32_t>(length),
                                  .stream = static_cast<uint16_t>(index_)},
                     header);
  // With encryption and no `encryptTo`, `payload` is the send ring's slot, which nobody else touches until every
  // stream has sent it: encrypted in place.
  uint8_t* dst = encryptTo != nullptr ? encryptTo : const_cast<uint8_t*>(payload);
  const Status sealed = txKey_.seal({header, kStripeHeaderBytes}, payload, dst, length, header + kStripeHeaderBytes);
  if (!sealed.ok()) {
    fail("cannot seal a stripe: " + sealed.message());
    return nullptr;
  }
  txSealed_ = s + 1;
  return header;
}

bool TcpStream::trySendFrom(uint64_t s, const void* src, size_t bytes, uint64_t tag) {
  std::unique_lock<std::mutex> lock(io_, std::try_to_lock);
  if (!lock.owns_lock() || !socket_.valid() || dead() || txSlot_ != s || txOffset_ != 0) return false;
  SlotRing& ring = link_->sendRing();
  ring.header(s) = SlotHeader{bytes, tag};
  size_t offset = 0;
  const size_t length = stripeOf(s, &offset);  // one socket: the whole slot
  // Encryption writes the ciphertext into the slot on its way (one pass over the bytes), and the slot goes out.
  const bool encrypted = txKey_.protection() == crypto::Protection::Encryption;
  uint8_t* slot = ring.slot(s) + offset;
  uint8_t* header =
      encodeTxHeader(s, tag, bytes, offset, length, static_cast<const uint8_t*>(src), encrypted ? slot : nullptr);
  if (header == nullptr) return false;  // the link failed; the caller's post() reports it
  const size_t headerBytes = frameHeaderBytes_;
  iovec iov[2] = {{header, headerBytes}, {encrypted ? slot : const_cast<void*>(src), length}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = length > 0 ? 2 : 1;
  ssize_t sent = -1;
  do {
    sent = ::sendmsg(socket_.fd(), &msg, kSendFlags);
  } while (sent < 0 && errno == EINTR);
  const int err = errno;
  const size_t done = sent > 0 ? static_cast<size_t>(sent) : 0;
  if (done < headerBytes + length) {
    // What the socket did not take goes into the slot, where progressSend() continues from txOffset_.
    const size_t payloadDone = done > headerBytes ? done - headerBytes : 0;
    if (!encrypted) {
      std::memcpy(slot + payloadDone, static_cast<const uint8_t*>(src) + payloadDone, length - payloadDone);
    }
    txOffset_ = done;
    if (sent < 0 && err != EAGAIN && err != EWOULDBLOCK)
      fail(strprintf("failed while sending: %s", std::strerror(err)));
    canWrite_ = false;
  } else {
    txSlot_ = s + 1;
  }
  // Release pairs with the acquire loads of head in progressSend() and hasUnsentSlots().
  ring.head.store(s + 1, std::memory_order_release);
  if (txSlot_ != s) link_->streamSent(index_, txSlot_);
  if (done > 0) armSendQueueWatch(/*ownerThread=*/true);
  return true;
}

void TcpStream::armSendQueueWatch(bool ownerThread) {
  if (sendQueueWatched_.load(std::memory_order_relaxed)) return;
  if (!ownerThread) {
    sendQueueWatched_.store(true, std::memory_order_relaxed);  // the proxy looks before it sleeps
    return;
  }
  // One ioctl per drive that sent: most sends leave nothing unsent, and those wake nobody.
  if (sendQueueState(fd_) == SendQueue::Empty) return;
  if (!sendQueueWatched_.exchange(true, std::memory_order_relaxed)) link_->wakeProxy();
}

SendQueue TcpStream::watchSendQueue() {
  // Looked at before it is written: the proxy passes here at every idle turn, for every stream, and most are unarmed.
  // Disarmed first, so that an owner arming it meanwhile either finds it armed again below or wakes the proxy.
  if (!sendQueueWatched_.load(std::memory_order_relaxed) || !sendQueueWatched_.exchange(false, std::memory_order_relaxed))
    return SendQueue::Empty;
  const SendQueue state = sendQueueState(fd_);
  if (state == SendQueue::Empty) return state;
  sendQueueWatched_.store(true, std::memory_order_relaxed);
  if (state == SendQueue::Stalled) {
    pushSendQueue(fd_);
    if (stalledPushes_++ == 0) {
      CFX_INFO(log::Sys::Net,
               "tcp: connection to %s: the kernel held bytes unsent with none in flight (a drop by this host's own "
               "queueing discipline, or a peer that stopped reading); pushed them rather than wait for TCP's "
               "probe timer (logged once per socket)",
               link_->description().c_str());
    }
  }
  return state;
}

void TcpStream::close() {
  std::lock_guard<std::mutex> lock(io_);
  socket_.close();
  open_ = false;
}

bool TcpStream::hasUnsentSlots() {
  std::lock_guard<std::mutex> lock(io_);
  // Acquire pairs with post()'s release store.
  return !dead() && txSlot_ != link_->sendRing().head.load(std::memory_order_acquire);
}

void TcpStream::fail(const std::string& what) {
  link_->fail(Status::error(Errc::RemoteError, strprintf("tcp: connection to %s %s; check that process for its own "
                                                         "error",
                                                         link_->description().c_str(), what.c_str())));
  // Release pairs with dead()'s acquire load.
  dead_.store(true, std::memory_order_release);
}

size_t TcpStream::stripeOf(uint64_t s, size_t* offset) {
  const auto bytes = static_cast<size_t>(link_->sendRing().header(s).bytes);
  const StripeLayout layout = link_->layout(bytes);
  *offset = layout.offset(index_);
  return index_ < layout.nStripes ? layout.length(index_, bytes) : 0;
}

bool TcpStream::skipForeignSlots(uint64_t posted) {
  const uint64_t before = txSlot_;
  // Stream 0 carries every slot; another stream only the slots long enough to have a stripe for it.
  while (index_ != 0 && txOffset_ == 0 && txSlot_ != posted &&
         link_->layout(static_cast<size_t>(link_->sendRing().header(txSlot_).bytes)).nStripes <= index_) {
    ++txSlot_;
  }
  return txSlot_ != before && link_->streamSent(index_, txSlot_);
}

bool TcpStream::progressSend() {
  SlotRing& ring = link_->sendRing();
  bool freed = false;
  while (!dead()) {
    // Acquire pairs with ProxiedSendEnd::post()'s release store: posted payloads and headers are visible.
    const uint64_t posted = std::min(ring.head.load(std::memory_order_acquire), link_->sendWindowEnd());
    freed |= skipForeignSlots(posted);
    if (txSlot_ == posted || !canWrite_) break;
    iovec iov[kMaxIovecs];
    int nIov = 0;
    size_t skip = txOffset_;  // bytes of the first frame already sent
    for (uint64_t s = txSlot_; s != posted && nIov + 2 <= kMaxIovecs; ++s) {
      size_t offset = 0;
      const size_t length = stripeOf(s, &offset);
      if (length == 0 && index_ != 0) continue;  // no stripe here; skipped by the accounting below
      uint8_t* header = skip == 0 ? encodeTxHeader(s, ring.header(s).tag, ring.header(s).bytes, offset, length,
                                                   ring.slot(s) + offset)
                                  : txHeader(s);
      if (header == nullptr) return freed;  // failed; the link carries why
      if (skip < frameHeaderBytes_) {
        iov[nIov++] = {header + skip, frameHeaderBytes_ - skip};
        skip = 0;
      } else {
        skip -= frameHeaderBytes_;
      }
      if (length > skip) iov[nIov++] = {ring.slot(s) + offset + skip, length - skip};
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(nIov);
    const ssize_t sent = ::sendmsg(socket_.fd(), &msg, kSendFlags);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        canWrite_ = false;
        break;
      }
      fail(strprintf("failed while sending: %s", std::strerror(errno)));
      break;
    }
    txMoved_ = true;
    auto left = static_cast<size_t>(sent);
    const uint64_t before = txSlot_;
    while (txSlot_ != posted) {
      size_t offset = 0;
      const size_t length = stripeOf(txSlot_, &offset);
      if (length == 0 && index_ != 0) {
        ++txSlot_;  // a slot without a stripe here, between two with one
        continue;
      }
      const size_t rest = frameHeaderBytes_ + length - txOffset_;
      if (left < rest) {
        txOffset_ += left;
        break;
      }
      left -= rest;
      txOffset_ = 0;
      ++txSlot_;
    }
    if (txSlot_ != before) freed |= link_->streamSent(index_, txSlot_);
  }
  return freed;
}

bool TcpStream::progressRecv(bool inlineRead) {
  SlotRing& ring = link_->recvRing();
  bool published = false;
  while (canRead_ && !dead() && !rxEnded_ && !(inlineRead && published)) {
    uint8_t* dst = nullptr;
    size_t want = 0;
    if (rxHeaderGot_ < frameHeaderBytes_) {
      dst = rxHeaderBytes_ + rxHeaderGot_;
      want = frameHeaderBytes_ - rxHeaderGot_;
    } else {
      if (!rxAdmitted_) {
        std::string why;
        const TcpLink::Admit admit = link_->admitStripe(index_, rxHeader_, &why);
        if (admit == TcpLink::Admit::Reject) {
          fail("sent a malformed stripe: " + why);
          break;
        }
        if (admit == TcpLink::Admit::Wait) break;  // the owner still holds the slot; release() wakes us
        rxAdmitted_ = true;
        rxPayloadGot_ = 0;
      }
      dst = ring.slot(rxHeader_.seq) + rxHeader_.offset + rxPayloadGot_;
      want = rxHeader_.length - rxPayloadGot_;
    }
    if (want > 0) {
      const ssize_t n = ::recv(socket_.fd(), dst, want, MSG_DONTWAIT);
      if (n == 0) {
        if (rxHeaderGot_ != 0) {
          fail("was closed by the peer in the middle of a frame");
          break;
        }
        rxEnded_ = true;
        canRead_ = false;
        if (link_->streamEnded(index_)) fail("was closed by the peer");
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
      if (rxHeaderGot_ < frameHeaderBytes_) {
        rxHeaderGot_ += static_cast<size_t>(n);
        if (rxHeaderGot_ < frameHeaderBytes_) continue;
        Result<StripeHeader> header =
            decodeStripeHeader({rxHeaderBytes_, kStripeHeaderBytes}, link_->stripeLimits(index_));
        if (!header.ok()) {
          fail(header.status().message());
          break;
        }
        rxHeader_ = *header;
        rxAdmitted_ = false;
        continue;  // admit before reading the payload
      }
      rxPayloadGot_ += static_cast<size_t>(n);
    }
    if (rxAdmitted_ && rxPayloadGot_ == rxHeader_.length) {
      // Nothing of the stripe is used before its tag checks out: the slot is published only below.
      Result<bool> authentic = rxKey_.open({rxHeaderBytes_, kStripeHeaderBytes},
                                           ring.slot(rxHeader_.seq) + rxHeader_.offset, rxHeader_.length,
                                           rxHeaderBytes_ + kStripeHeaderBytes);
      if (!authentic.ok() || !*authentic) {
        fail(authentic.ok() ? strprintf("sent stripe #%llu that fails authentication: it was changed, replayed or "
                                        "reordered on the way, or does not come from that rank",
                                        static_cast<unsigned long long>(rxKey_.frames() - 1))
                            : "cannot open a stripe: " + authentic.status().message());
        break;
      }
      published |= link_->stripeArrived(rxHeader_.seq);
      rxHeaderGot_ = 0;
      rxAdmitted_ = false;
    }
  }
  return published;
}

}  // namespace cfx::transport::tcp
