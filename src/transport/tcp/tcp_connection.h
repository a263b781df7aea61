// SPDX-License-Identifier: Apache-2.0
// One TCP connection to one peer on one channel (transport layer): the two in-memory slot FIFOs that the
// owning rank sees as a SendEnd and a RecvEnd, and the socket state the proxy thread uses to move them.
//
//   owner thread (executor)                proxy thread (tcp_proxy.cc)               the wire
//   SendEnd::tryAcquire/post  -> send ring -> TcpStream::progressSend  -> frame {bytes, tag} + payload ->
//   RecvEnd::tryPeek/release  <- recv ring <- TcpStream::progressRecv  <- frame {bytes, tag} + payload <-
//
// Each ring is single-producer/single-consumer: `head` counts slots published by the producer, `tail` slots
// given back by the consumer; both only grow. For the send ring the owner produces and the proxy consumes (a
// slot is given back once every byte of its frame is in the kernel); for the recv ring the proxy produces (a
// slot is published once its whole frame has arrived) and the owner consumes.
//
// Striping (several sockets per connection) will give a TcpLink several TcpStreams; the rings and the ends do
// not change, only which stream carries which slot.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/socket.h"
#include "common/status.h"
#include "transport/transport.h"

namespace cfx::transport::tcp {

// The frame header on the wire: {bytes, tag}, each a little-endian u64. The rings keep headers in this form, so
// the proxy sends them straight from the ring.
struct WireHeader {
  uint64_t bytesLe = 0;
  uint64_t tagLe = 0;
  static WireHeader encode(uint64_t bytes, uint64_t tag);
  uint64_t bytes() const;
  uint64_t tag() const;
};
static_assert(sizeof(WireHeader) == 16, "the frame header is 16 bytes on the wire");

// nSlots x slotBytes of payload plus one header per slot. See the file comment for head/tail.
class SlotRing {
 public:
  explicit SlotRing(const FifoGeometry& geometry);
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  size_t slotBytes() const { return slotBytes_; }
  int nSlots() const { return nSlots_; }
  uint8_t* slot(uint64_t index) { return data_.get() + (index % static_cast<uint64_t>(nSlots_)) * slotBytes_; }
  WireHeader& header(uint64_t index) { return headers_[index % static_cast<uint64_t>(nSlots_)]; }

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
  std::unique_ptr<uint8_t[], AlignedFree> data_;
  std::unique_ptr<WireHeader[]> headers_;
};

// Wakes the proxy thread out of epoll_wait through an eventfd. Wakes are coalesced: only the first wake() after
// the proxy drained the eventfd costs a system call, so posting many slots in a row stays cheap.
class ProxyWaker {
 public:
  static Result<std::shared_ptr<ProxyWaker>> create();
  explicit ProxyWaker(net::UniqueFd fd) : fd_(std::move(fd)) {}
  // Any thread; never blocks.
  void wake();
  // Proxy thread, when epoll reports the eventfd: clears it. Everything published before the wake() that set
  // it is visible to the proxy after this returns.
  void drain();
  int fd() const { return fd_.get(); }

 private:
  net::UniqueFd fd_;
  // True from the first wake() until drain(): wake() writes the eventfd only on the false -> true edge.
  std::atomic<bool> pending_{false};
};

// What the ends and the proxy share about one (peer, channel) connection: the rings, and its health.
class TcpLink {
 public:
  TcpLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
          std::shared_ptr<ProxyWaker> waker);

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  // "peer rank 3 (host-b pid 4242, 10.0.0.2:41234), channel 0": for error messages.
  const std::string& description() const { return description_; }
  SlotRing& sendRing() { return send_; }
  SlotRing& recvRing() { return recv_; }
  void wakeProxy() { waker_->wake(); }

  // Records the first failure; later ones are ignored. Any thread.
  void fail(Status error);
  bool failed() const {
    // Acquire pairs with fail()'s release store: a reader that sees true also sees error_.
    return failed_.load(std::memory_order_acquire);
  }
  Status status() const;

 private:
  const int peer_;
  const int channel_;
  const std::string description_;
  SlotRing send_;
  SlotRing recv_;
  std::shared_ptr<ProxyWaker> waker_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;  // guards error_
  Status error_;
};

// The owner's view of the send direction. Keeps the link (and so the rings) alive even if the TcpTransport is
// destroyed first; check() then reports the connection as closed.
class TcpSendEnd final : public SendEnd {
 public:
  explicit TcpSendEnd(std::shared_ptr<TcpLink> link) : link_(std::move(link)) {}
  void* tryAcquire() override;
  void post(size_t bytes, uint64_t tag) override;
  size_t slotBytes() const override { return link_->sendRing().slotBytes(); }
  int nSlots() const override { return link_->sendRing().nSlots(); }
  Status check() override { return link_->status(); }
  const char* kind() const override { return "tcp"; }

 private:
  std::shared_ptr<TcpLink> link_;
  uint64_t next_ = 0;       // the slot tryAcquire() hands out; equals the ring's head
  uint64_t freedSeen_ = 0;  // the ring's tail as last loaded
};

class TcpRecvEnd final : public RecvEnd {
 public:
  explicit TcpRecvEnd(std::shared_ptr<TcpLink> link) : link_(std::move(link)) {}
  const void* tryPeek(size_t* bytes, uint64_t* tag) override;
  void release() override;
  Status check() override { return link_->status(); }
  const char* kind() const override { return "tcp"; }

 private:
  std::shared_ptr<TcpLink> link_;
  uint64_t next_ = 0;           // the slot tryPeek() returns; equals the ring's tail
  uint64_t publishedSeen_ = 0;  // the ring's head as last loaded
};

// One socket of a link, driven only by the proxy thread. Non-blocking and edge-triggered: canRead_/canWrite_
// remember readiness until a call returns EAGAIN.
class TcpStream {
 public:
  TcpStream(net::Socket socket, std::shared_ptr<TcpLink> link);
  int fd() const { return socket_.fd(); }
  TcpLink& link() { return *link_; }
  // Failed: the link carries the error. The proxy then removes the socket from epoll and closes it.
  bool dead() const { return dead_; }
  bool open() const { return socket_.valid(); }
  // Records what epoll reported for this socket.
  void onEvents(uint32_t events);
  // Moves as many frames as the socket and the rings allow, without blocking. True when it freed or published
  // a slot. On failure it marks the link failed and dead() becomes true.
  bool progress();
  // Posted slots not yet completely handed to the kernel (used to flush before closing).
  bool hasUnsentSlots() const;
  // Closes the socket after a failure, once the proxy has removed it from epoll.
  void close() { socket_.close(); }

 private:
  bool progressSend();
  bool progressRecv();
  // Marks the link failed with a RemoteError naming the peer, and stops using the socket.
  void fail(const std::string& what);

  net::Socket socket_;
  std::shared_ptr<TcpLink> link_;
  bool dead_ = false;
  bool canRead_ = true;
  bool canWrite_ = true;
  // Send side: the slot being written and how many bytes of its frame (header included) are out.
  uint64_t txSlot_ = 0;
  size_t txOffset_ = 0;
  // Receive side: the slot being filled, its header as it arrives, and how much payload has arrived.
  uint64_t rxSlot_ = 0;
  WireHeader rxHeader_;
  size_t rxHeaderGot_ = 0;
  size_t rxBytes_ = 0;
  size_t rxPayloadGot_ = 0;
};

}  // namespace cfx::transport::tcp
