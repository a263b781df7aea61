// SPDX-License-Identifier: Apache-2.0
// The skeleton of a proxied link (transport layer), shared by tcp/ and ucx/: one connection to one peer on one
// channel as two in-memory slot FIFOs, which the owning rank sees as a SendEnd and a RecvEnd and a proxy thread of
// the transport moves to and from the wire.
//
//   owner thread (executor)                        proxy thread (tcp_proxy.cc, ucx_proxy.cc)
//   ProxiedSendEnd::tryAcquire/post  -> send ring -> the transport's sends
//   ProxiedRecvEnd::tryPeek/release  <- recv ring <- the transport's receives
//
// Each ring is single-producer/single-consumer: `head` counts slots published by the producer, `tail` slots given
// back by the consumer; both only grow. For the send ring the owner produces and the proxy consumes (a slot is
// given back once the transport is done with its bytes); for the recv ring the proxy produces (a slot is published
// once all of it arrived, and only after every earlier slot) and the owner consumes. A slot's size and tag travel
// beside it in a SlotHeader, which the producer writes before it publishes the slot.
//
// Owner-driven I/O: every slot that goes through a sleeping proxy costs cross-CPU wake-ups, each a context switch
// that a loaded 2-core machine pays in tens of microseconds. So at the moments named by OwnerMoment the ends ask
// the link to do the proxy's work on the owner's thread (ProxiedLink::driveFromOwner); how, and whether at all, is
// the transport's (tcp_connection.h, ucx_proxy.h). An end wakes the proxy where the owner did not do it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "transport/transport.h"

namespace cfx::transport::link {

// What a ring keeps next to each slot: its payload size and tag.
struct SlotHeader {
  uint64_t bytes = 0;
  uint64_t tag = 0;
};

// nSlots x slotBytes of payload plus one header per slot. See the file comment for head/tail.
class SlotRing {
 public:
  // `room`: bytes kept free before each payload, a multiple of 64 so that payloads stay cache-line aligned (ucx
  // puts its wire header there, so that header and payload go out and come in as one message).
  explicit SlotRing(const FifoGeometry& geometry, size_t room = 0);
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  size_t slotBytes() const { return slotBytes_; }
  int nSlots() const { return nSlots_; }
  // The payload of slot `index`; the `room` bytes before it are the slot's too.
  uint8_t* slot(uint64_t index) { return data_.get() + (index % static_cast<uint64_t>(nSlots_)) * stride_ + room_; }
  SlotHeader& header(uint64_t index) { return headers_[index % static_cast<uint64_t>(nSlots_)]; }

  // Written only by the producer (release), read by the consumer (acquire): see the users for the pairing.
  alignas(64) std::atomic<uint64_t> head{0};
  // Written only by the consumer (release), read by the producer (acquire).
  alignas(64) std::atomic<uint64_t> tail{0};

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  size_t slotBytes_;
  int nSlots_;
  size_t room_;
  size_t stride_;
  std::unique_ptr<uint8_t[], AlignedFree> data_;
  std::unique_ptr<SlotHeader[]> headers_;
};

// Wakes a proxy thread out of its wait (epoll) through an eventfd. Wakes are coalesced: only the first wake() after
// the proxy drained the eventfd costs a system call, so posting many slots in a row stays cheap.
class ProxyWaker {
 public:
  // `transport`: "tcp" or "ucx", for the error message.
  static Result<std::shared_ptr<ProxyWaker>> create(const char* transport);
  explicit ProxyWaker(net::UniqueFd fd) : fd_(std::move(fd)) {}
  // Any thread; never blocks.
  void wake();
  // Proxy thread, when epoll reports the eventfd: clears it. Everything published before the wake() that set it
  // is visible to the proxy after this returns.
  void drain();
  int fd() const { return fd_.get(); }
  // Owner activity: an owner driving its links ticks every proxy of the link; a proxy that sees the count move
  // keeps off the wire (tcp_proxy.h). Relaxed: a hint, which the proxy reads once per wake-up.
  void tick() { ticks_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }

 private:
  net::UniqueFd fd_;
  alignas(64) std::atomic<uint64_t> ticks_{0};
  // True from the first wake() until drain(): wake() writes the eventfd only on the false -> true edge.
  std::atomic<bool> pending_{false};
};

// Where an end offers the owner's thread to the link (ProxiedLink::driveFromOwner).
enum class OwnerMoment {
  SendFull,      // tryAcquire() found every slot in flight (every kInlinePollEvery-th time in a row)
  Posted,        // post() published a slot
  RecvEmpty,     // tryPeek() found nothing (every kInlinePollEvery-th time in a row)
  Released,      // release() gave a slot back to a recv ring that was not full
  ReleasedFull,  // release() gave a slot back to a full recv ring: the proxy may be waiting for just this slot
};

// What the ends and the proxy share about one (peer, channel) connection: the rings, its health and the wakers of
// the proxy threads that serve it. The transport derives its link from it and adds its own wire state.
class ProxiedLink {
 public:
  // `room`: SlotRing's, for both rings. `wakers`: those of every proxy thread that serves the link. `kind`: the
  // transport's name for logs ("tcp"), a string literal.
  ProxiedLink(int peer, int channel, std::string description, const FifoGeometry& geometry, size_t room,
              std::vector<std::shared_ptr<ProxyWaker>> wakers, const char* kind);
  virtual ~ProxiedLink() = default;
  ProxiedLink(const ProxiedLink&) = delete;
  ProxiedLink& operator=(const ProxiedLink&) = delete;

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  // "peer rank 3 (host-b pid 4242, 10.0.0.2:41234), channel 0": for error messages.
  const std::string& description() const { return description_; }
  const char* kind() const { return kind_; }
  SlotRing& sendRing() { return send_; }
  SlotRing& recvRing() { return recv_; }
  const SlotRing& sendRing() const { return send_; }
  const SlotRing& recvRing() const { return recv_; }
  void wakeProxy() {
    for (const auto& waker : wakers_) waker->wake();
  }
  // Owner thread, at each drive from the owner: tells the proxies the owner is driving (ProxyWaker::tick()).
  void tickProxies() {
    for (const auto& waker : wakers_) waker->tick();
  }

  // Records the first failure; later ones are ignored. Any thread.
  void fail(Status error);
  bool failed() const {
    // Acquire pairs with fail()'s release store: a reader that sees true also sees error_.
    return failed_.load(std::memory_order_acquire);
  }
  Status status() const;
  // The transport's teardown: fails the link with InvalidUsage ("closed by this rank (transport destroyed)", or
  // "aborted by this rank"), which an owner still holding its ends then reads from check().
  void failLocally(bool aborted);
  // What the ends' check() reports: status(), unless the transport can learn more (ucx asks the kernel whether a
  // same-host peer still exists). Owner thread; may cost a system call.
  virtual Status check() { return status(); }

  // Owner thread: the proxy's work for `moment`, done here where the transport does that (file comment). True when
  // it was done, or is not needed, so that nobody need wake the proxy; false leaves it to the proxy.
  virtual bool driveFromOwner(OwnerMoment moment) = 0;
  // Sending from the caller's memory (SendEnd::sendsFromCaller()): whether sendFrom() may work now, and the send of
  // slot s with `bytes` bytes at src and `tag` itself. sendFrom() publishes the slot and returns true, or does
  // nothing and returns false (the end then copies into the slot and posts).
  virtual bool sendsFromCaller() const { return false; }
  virtual bool sendFrom(uint64_t, const void*, size_t, uint64_t) { return false; }

 private:
  const int peer_;
  const int channel_;
  const std::string description_;
  const char* const kind_;
  SlotRing send_;
  SlotRing recv_;
  std::vector<std::shared_ptr<ProxyWaker>> wakers_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;  // guards error_
  Status error_;
};

// The owner's view of the send direction. Keeps the link (and so the rings) alive even if the transport is
// destroyed first; check() then reports the connection as closed.
class ProxiedSendEnd final : public SendEnd {
 public:
  explicit ProxiedSendEnd(std::shared_ptr<ProxiedLink> link) : link_(std::move(link)) {}
  void* tryAcquire() override;
  void post(size_t bytes, uint64_t tag) override;
  bool sendsFromCaller() const override { return link_->sendsFromCaller(); }
  void postFrom(const void* src, size_t bytes, uint64_t tag) override;
  size_t slotBytes() const override { return link_->sendRing().slotBytes(); }
  int nSlots() const override { return link_->sendRing().nSlots(); }
  Status check() override { return link_->check(); }
  const char* kind() const override { return link_->kind(); }

 private:
  std::shared_ptr<ProxiedLink> link_;
  uint64_t next_ = 0;       // the slot tryAcquire() hands out; equals the ring's head
  uint64_t freedSeen_ = 0;  // the ring's tail as last loaded
  uint32_t fullPolls_ = 0;  // tryAcquire()s that found every slot in flight, to space out drives from the owner
};

class ProxiedRecvEnd final : public RecvEnd {
 public:
  explicit ProxiedRecvEnd(std::shared_ptr<ProxiedLink> link) : link_(std::move(link)) {}
  const void* tryPeek(size_t* bytes, uint64_t* tag) override;
  void release() override;
  Status check() override { return link_->check(); }
  const char* kind() const override { return link_->kind(); }

 private:
  std::shared_ptr<ProxiedLink> link_;
  uint64_t next_ = 0;           // the slot tryPeek() returns; equals the ring's tail
  uint64_t publishedSeen_ = 0;  // the ring's head as last loaded
  uint32_t emptyPeeks_ = 0;     // tryPeek()s that found nothing, to space out drives from the owner
};

// The transport's setup: InvalidArgument naming `kind` when `nPeerInfos` or `connect` does not hold one entry per
// rank, or a (channel, peer) that `connect` asks for already has an end of another transport in `out`.
Status checkEndsFree(const char* kind, int rank, int nRanks, size_t nPeerInfos, const std::vector<bool>& connect,
                     const Endpoints& out);
// Hands the link's two ends to `out` (already resized) at (link->channel(), link->peer()).
void addEnds(const std::shared_ptr<ProxiedLink>& link, Endpoints& out);

}  // namespace cfx::transport::link
