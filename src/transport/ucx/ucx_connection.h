// SPDX-License-Identifier: Apache-2.0
// One UCX connection to one peer on one channel (transport layer): the two in-memory slot FIFOs that the owning
// rank sees as a SendEnd and a RecvEnd. The proxy thread (ucx_proxy.cc) moves them with tagged messages.
//
//   owner thread (executor)                  proxy thread                           UCX
//   SendEnd::tryAcquire/post  -> send ring -> ucp_tag_send_nbx(slot s)       -> [frame header | payload] ->
//   RecvEnd::tryPeek/release  <- recv ring <- receive pre-posted into slot s  <- [frame header | payload] <-
//                                           -> credit message (slots released) ->
//
// A slot is stored as 64 bytes of room followed by its payload; the 16-byte frame header {bytes, tag} sits
// right before the payload, so one contiguous message carries both and a receive posted on the slot puts them
// where the owner reads them: the bytes land in the receiver's slot memory, with no copy by us.
//
// Each ring is single-producer/single-consumer: `head` counts slots published by the producer, `tail` slots
// given back by the consumer; both only grow. For the send ring the owner produces and the proxy consumes (a
// slot is given back once UCX completed its send); for the recv ring the proxy produces (once the receive into
// the slot completed) and the owner consumes. A sender keeps at most nSlots slots beyond what the receiver has
// released (its credits), so each send finds its receive already posted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/status.h"
#include "common/wire.h"
#include "transport/transport.h"

namespace cfx::transport::ucx {

// Room before each payload; the frame header takes its last 16 bytes. 64 keeps payloads cache-line aligned.
inline constexpr size_t kSlotRoom = 64;

// The frame header: {bytes, tag}, each a u64 in common/wire.h's byte order.
inline constexpr size_t kFrameHeaderBytes = 16;

class SlotRing {
 public:
  explicit SlotRing(const FifoGeometry& geometry);
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  size_t slotBytes() const { return slotBytes_; }
  int nSlots() const { return nSlots_; }
  uint8_t* payload(uint64_t index) { return data_.get() + (index % static_cast<uint64_t>(nSlots_)) * stride_ + kSlotRoom; }
  // The frame (header + payload) of slot `index`: what is sent, and where a receive is posted.
  uint8_t* frame(uint64_t index) { return payload(index) - kFrameHeaderBytes; }
  void writeHeader(uint64_t index, uint64_t bytes, uint64_t tag) {
    wire::putU64(frame(index), bytes);
    wire::putU64(frame(index) + 8, tag);
  }
  uint64_t headerBytes(uint64_t index) { return wire::getU64(frame(index)); }
  uint64_t headerTag(uint64_t index) { return wire::getU64(frame(index) + 8); }
  size_t maxFrameBytes() const { return kFrameHeaderBytes + slotBytes_; }

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
  size_t stride_;
  std::unique_ptr<uint8_t[], AlignedFree> data_;
};

// Wakes the proxy thread out of its wait through an eventfd. Only the first wake() after the proxy drained the
// eventfd costs a system call, so posting many slots in a row stays cheap.
class ProxyWaker {
 public:
  static Result<std::shared_ptr<ProxyWaker>> create();
  explicit ProxyWaker(int fd) : fd_(fd) {}
  ~ProxyWaker();
  ProxyWaker(const ProxyWaker&) = delete;
  ProxyWaker& operator=(const ProxyWaker&) = delete;
  // Any thread; never blocks.
  void wake();
  // Proxy thread, when the eventfd is readable: clears it. Everything published before the wake() that set it
  // is visible to the proxy after this returns.
  void drain();
  int fd() const { return fd_; }

 private:
  int fd_;
  // True from the first wake() until drain(): wake() writes the eventfd only on the false -> true edge.
  std::atomic<bool> pending_{false};
};

// What the ends and the proxy share about one (peer, channel) connection: the rings and its health. The
// proxy's own bookkeeping (which slots are in flight) lives in the proxy.
// Lets an owner do one round of the proxy thread's work on its own thread while nobody else calls into the worker
// (ucx_proxy.h, "Inline progress"). `drive` is set while the proxy runs and called with `mutex` held; the proxy
// holds `mutex` for each of its own rounds.
struct InlineGate {
  std::mutex mutex;
  std::function<void()> drive;
  // Owner-driven progress (ucx_proxy.h): every owner round ticks it; the proxy stays off the worker while it moves.
  std::atomic<uint64_t> ticks{0};
  // Set, under `mutex`, by a proxy going to sleep on its armed worker: an owner round that moved anything must then
  // wake it, as the round may have consumed the events it sleeps for.
  std::atomic<bool> proxyAsleep{false};
};

class UcxLink {
 public:
  // probePid: the peer's pid when it runs on this host (check() then notices its exit), else 0.
  UcxLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
          std::shared_ptr<ProxyWaker> waker, pid_t probePid);

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  // "peer rank 3 (host-b pid 4242), channel 0": for error messages.
  const std::string& description() const { return description_; }
  SlotRing& sendRing() { return send_; }
  SlotRing& recvRing() { return recv_; }
  void wakeProxy() { waker_->wake(); }
  // Set before the proxy starts; null leaves every step to the proxy thread.
  void setGate(std::shared_ptr<InlineGate> gate) { gate_ = std::move(gate); }
  // Owner thread: one round of the proxy's work here, unless someone is doing it or the proxy is not running
  // (false then: the caller wakes the proxy).
  bool driveInline();

  // Records the first failure; later ones are ignored. Any thread.
  void fail(Status error);
  bool failed() const {
    // Acquire pairs with fail()'s release store: a reader that sees true also sees error_.
    return failed_.load(std::memory_order_acquire);
  }
  Status status() const;
  // status(), after asking the kernel whether a same-host peer still exists: UCX's shared-memory transports
  // cannot report a dead peer themselves (see ucx_proxy.cc). A reused pid looks alive; the executor's timeout
  // still names the peer then. Owner thread; costs a system call.
  Status check();

 private:
  const int peer_;
  const int channel_;
  const std::string description_;
  SlotRing send_;
  SlotRing recv_;
  std::shared_ptr<ProxyWaker> waker_;
  std::shared_ptr<InlineGate> gate_;
  const pid_t probePid_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;  // guards error_
  Status error_;
};

// The owner's view of the send direction. Keeps the link (and so the rings) alive even if the UcxTransport is
// destroyed first; check() then reports the connection as closed.
class UcxSendEnd final : public SendEnd {
 public:
  explicit UcxSendEnd(std::shared_ptr<UcxLink> link) : link_(std::move(link)) {}
  void* tryAcquire() override;
  void post(size_t bytes, uint64_t tag) override;
  size_t slotBytes() const override { return link_->sendRing().slotBytes(); }
  int nSlots() const override { return link_->sendRing().nSlots(); }
  Status check() override { return link_->check(); }
  const char* kind() const override { return "ucx"; }

 private:
  std::shared_ptr<UcxLink> link_;
  uint64_t next_ = 0;       // the slot tryAcquire() hands out; equals the ring's head
  uint64_t freedSeen_ = 0;  // the ring's tail as last loaded
  uint32_t fullPolls_ = 0;  // tryAcquire()s that found every slot in flight, to space out inline rounds
};

class UcxRecvEnd final : public RecvEnd {
 public:
  explicit UcxRecvEnd(std::shared_ptr<UcxLink> link) : link_(std::move(link)) {}
  const void* tryPeek(size_t* bytes, uint64_t* tag) override;
  void release() override;
  Status check() override { return link_->check(); }
  const char* kind() const override { return "ucx"; }

 private:
  std::shared_ptr<UcxLink> link_;
  uint64_t next_ = 0;           // the slot tryPeek() returns; equals the ring's tail
  uint64_t publishedSeen_ = 0;  // the ring's head as last loaded
  uint32_t emptyPeeks_ = 0;     // tryPeek()s that found nothing, to space out inline progress
};

}  // namespace cfx::transport::ucx
