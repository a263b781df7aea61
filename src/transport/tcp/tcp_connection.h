// SPDX-License-Identifier: Apache-2.0
// One TCP connection to one peer on one channel (transport layer): the two in-memory slot FIFOs that the
// owning rank sees as a SendEnd and a RecvEnd, and the socket state the proxy thread uses to move them.
//
//   owner thread (executor)                proxy thread (tcp_proxy.cc)                  the wire (nStreams sockets)
//   SendEnd::tryAcquire/post  -> send ring -> TcpStream::progressSend (per socket) -> stripe frames ->
//   RecvEnd::tryPeek/release  <- recv ring <- TcpStream::progressRecv (per socket) <- stripe frames <-
//
// The rings, the ends and their owner-driven hooks are the proxied link's (transport/link/proxied_link.h); a slot
// is given back to the owner once every stream has handed every byte of its stripe to the kernel, and published
// once all its stripes have arrived, and only after every earlier slot.
//
// Striping: a link has nStreams TcpStreams (sockets); tcp_stripe.h says how a slot is cut into stripes. Each
// stream sends and receives its stripes in slot order, independently of the others, so a slow socket holds back
// only the slots it carries a stripe of. The rings and the ends do not know how many sockets there are.
//
// Owner-driven I/O (CFX_TCP_INLINE, on where a host's ranks fit its CPUs): through the proxies every slot costs
// cross-CPU wake-ups (owner -> proxy eventfd, the peer proxy's epoll, peer proxy -> peer owner's doorbell), each
// a context switch that a loaded 2-core machine pays in tens of microseconds, where a library that sends and polls
// its sockets from the calling thread pays none. So the owner moves its links' bytes itself: post() sends at once,
// a full send ring or an empty recv ring makes it drive the link's sockets every few polls (sending what is
// queued, reading until one slot is published, whatever the stripe length). Each drive ticks the link's proxies;
// a proxy that sees the count move masks its sockets in epoll and stays asleep, and takes them back once the count
// stands still for a park interval (the owner sleeps on its doorbell or went back to the application with bytes
// still queued). Whoever holds a stream's mutex drives it; both only try-lock. With more ranks than CPUs the
// proxies do all of it, as spinning owners would take the CPU time the proxies need.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/socket.h"
#include "common/status.h"
#include "transport/link/proxied_link.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_socket.h"
#include "transport/tcp/tcp_stripe.h"
#include "transport/transport.h"

namespace cfx::transport::tcp {

class TcpStream;

using link::ProxyWaker;
using link::SlotHeader;
using link::SlotRing;

// The proxied link of one (peer, channel) connection, with the proxy's bookkeeping of which stripes have gone out
// and come in, and the streams the owner drives inline.
class TcpLink final : public link::ProxiedLink {
 public:
  // `wakers`: those of every proxy thread that serves one of the link's streams.
  TcpLink(int peer, int channel, std::string description, const FifoGeometry& geometry, int nStreams,
          uint32_t minStripeBytes, std::vector<std::shared_ptr<ProxyWaker>> wakers);

  // ---- owner-driven I/O (file comment) ----
  // Set before the proxies start, cleared before they are destroyed (the streams are theirs).
  void attachStream(TcpStream* stream);
  void detachStreams();
  // Owner thread: drives the link's streams from this thread where nobody else holds them: sends what is queued
  // and, unless sendOnly, reads (at most one slot published per stream). False when a stream was busy or detached
  // (the caller then relies on the proxy).
  bool driveInline(bool sendOnly);
  // driveInline for an end that needs the drive to have happened: true when it did and the link is healthy; a
  // failure it meets wakes the proxy, which closes what died.
  bool driveHealthy(bool sendOnly) {
    const bool drove = driveInline(sendOnly);
    if (!failed()) return drove;
    wakeProxy();
    return false;
  }
  // Owner thread, one-socket owner-driven links: publishes send slot s with `bytes` bytes at src and tag, handing
  // them to the socket from src when nothing is queued before it (what the socket does not take is copied into
  // the slot). False, with nothing done, when the stream is busy or not idle: the caller copies and posts.
  bool sendFrom(uint64_t s, const void* src, size_t bytes, uint64_t tag) override;
  void setInline(bool on) { inline_ = on; }
  bool inlineEnabled() const { return inline_; }
  // The ends' hooks (proxied_link.h): sends and reads from the owner's thread where inline I/O is on.
  bool driveFromOwner(link::OwnerMoment moment) override;
  bool sendsFromCaller() const override { return inline_ && nStreams_ == 1; }

  int nStreams() const { return nStreams_; }
  StripeLayout layout(size_t bytes) const { return stripeLayout(bytes, nStreams_, minStripeBytes_); }
  StripeLimits stripeLimits(int stream) const {
    return StripeLimits{.stream = stream,
                        .nStreams = nStreams_,
                        .slotBytes = recvRing().slotBytes(),
                        .minStripeBytes = minStripeBytes_};
  }

  // ---- proxy threads only ----
  // With NCCL_SOCKET_NTHREADS > 1 a link's streams are spread over several proxy threads; these three serialise
  // on stripeMutex_ (once per stripe of at least 32 KiB, so the lock is cheap next to the I/O).
  //
  // Stream `stream` has handed to the kernel its stripes of every slot before `next`. Gives slots back to the
  // owner once every stream has passed them. True when that freed a slot.
  bool streamSent(int stream, uint64_t next);
  // One past the last slot a stream may start sending: a few slots beyond the oldest slot not yet out on every
  // stream. Without it, stream 0 would send its stripes of all posted slots before stream 1 sent any, and the
  // receiver could publish (and its owner reduce) nothing until the whole batch was in; with it the slots
  // complete in order, one after another, as with a single socket.
  uint64_t sendWindowEnd();

  enum class Admit { Accept, Wait, Reject };
  // Stream `stream` read the header of its next stripe, which decodeStripeHeader(stripeLimits(stream)) accepted.
  // Accept: the stripe comes in order and its slot is free to be written; Wait: the slot is still held by the
  // owner (read the payload later); Reject: *why says what is wrong (the link must then fail).
  Admit admitStripe(int stream, const StripeHeader& header, std::string* why);
  // The payload of an admitted stripe has fully arrived. Publishes every slot now complete, in order; true when
  // it published one.
  bool stripeArrived(uint64_t seq);
  // Stream `stream` read an orderly end of stream between two stripes. True once every stream of the link has:
  // nothing more can arrive, and the link is closed. Until then the other streams may still carry stripes the
  // peer sent before it closed (a peer that posts its last message and tears down closes its idle streams
  // first), so one stream's end is no failure.
  bool streamEnded(int stream);

 private:
  // Per slot of the recv ring being filled: what its first stripe announced, and how many stripes are in.
  struct RxSlot {
    bool known = false;
    uint64_t bytes = 0;
    uint64_t tag = 0;
    int stripes = 0;
    int arrived = 0;
  };

  const int nStreams_;
  const uint32_t minStripeBytes_;
  std::mutex stripeMutex_;        // guards the proxy-side state below
  std::vector<uint64_t> txNext_;  // by stream: first slot not yet fully sent by it
  uint64_t txFreed_ = 0;          // the send ring's tail as last stored
  std::vector<uint64_t> rxNext_;  // by stream: one past the slot of the last stripe header it admitted
  std::vector<RxSlot> rxSlots_;   // by slot index modulo nSlots, for slots [recv head, recv tail + nSlots)
  uint64_t rxPublished_ = 0;      // the recv ring's head as last stored
  int rxEnded_ = 0;               // streams that read an orderly end of stream
  bool inline_ = false;
  std::mutex streamsMutex_;               // guards streams_ against detachStreams(); the owner only try-locks it
  std::vector<TcpStream*> streams_;       // for inline I/O; owned by the proxies
};

// One socket of a link (stream `index` of link().nStreams()), driven by its proxy thread and, inline, by the
// owner (file comment); io_ says who. Non-blocking and edge-triggered: canRead_/canWrite_ remember readiness
// until a call returns EAGAIN; epoll's reports wait in pendingEvents_ until the next holder of io_ takes them.
class TcpStream {
 public:
  // `keys`: the socket's frame ciphers from its handshake; with protection each stripe carries a tag
  // (tcp_stripe.h).
  TcpStream(net::Socket socket, std::shared_ptr<TcpLink> link, int index, SocketKeys keys);
  int fd() const { return fd_; }
  TcpLink& link() { return *link_; }
  // Failed: the link carries the error. The proxy then removes the socket from epoll and closes it.
  bool dead() const { return dead_.load(std::memory_order_acquire); }
  // Proxy thread only.
  bool open() const { return open_; }
  // Proxy thread: records what epoll reported for this socket.
  void onEvents(uint32_t events) { pendingEvents_.fetch_or(events, std::memory_order_relaxed); }
  // Proxy thread: moves as many frames as the socket and the rings allow, without blocking. True when it freed
  // or published a slot. On failure it marks the link failed and dead() becomes true. *busy is set when the
  // owner was driving the stream (the proxy must look again soon: it may have taken the owner's wake-up).
  bool progress(bool* busy);
  // Owner thread (TcpLink::driveInline): sends what is posted and, unless sendOnly, receives until one slot is
  // published or the socket is empty. False when the stream was busy.
  bool tryDriveInline(bool sendOnly);
  // Owner thread (TcpLink::sendFrom): the stream's part of it. False when busy or not idle.
  bool trySendFrom(uint64_t s, const void* src, size_t bytes, uint64_t tag);
  // Posted slots not yet completely handed to the kernel (used to flush before closing).
  bool hasUnsentSlots();
  // Proxy thread, before it sleeps: the kernel's send queue (tcp_socket.h, SendQueue) where a send armed the watch,
  // pushing a stalled one; Empty disarms it. A send arms it: the owner's where the kernel kept bytes unsent (waking
  // the proxy, which may be asleep), the proxy's own always.
  SendQueue watchSendQueue();
  // Proxy thread: closes the socket after a failure, once it has removed it from epoll.
  void close();

 private:
  // Callers hold io_.
  void takeEvents();
  bool progressSend();
  bool progressRecv(bool inlineRead);
  // After a send that moved bytes (txMoved_), from the owner's thread or the proxy's (watchSendQueue).
  void armSendQueueWatch(bool ownerThread);
  // Marks the link failed with a RemoteError naming the peer, and stops using the socket.
  void fail(const std::string& what);
  // This stream's stripe of slot s: its length (0 when the slot has no stripe here) and offset.
  size_t stripeOf(uint64_t s, size_t* offset);
  // Skips posted slots that have no stripe on this stream, even while the socket is not writable. True when
  // that freed a slot of the ring.
  bool skipForeignSlots(uint64_t posted);

  net::Socket socket_;
  const int fd_;
  bool open_ = true;  // proxy thread's view; socket_ itself is closed under io_
  std::shared_ptr<TcpLink> link_;
  const int index_;
  std::mutex io_;  // held by whoever drives the socket; guards everything below but the atomics
  std::atomic<uint32_t> pendingEvents_{0};
  std::atomic<bool> dead_{false};
  bool rxEnded_ = false;  // the peer closed this socket between two stripes (see TcpLink::streamEnded)
  bool canRead_ = true;
  bool canWrite_ = true;
  bool txMoved_ = false;                         // progressSend() handed bytes to the kernel since the last look
  std::atomic<bool> sendQueueWatched_{false};    // watchSendQueue() has a queue to look at
  uint32_t stalledPushes_ = 0;                   // proxy thread: pushes of a stalled queue, for the first INFO line
  // Send side: the slot whose stripe is being written and how many bytes of its frame (header included) are
  // out; txHeaders_ holds the encoded stripe headers of the slots in flight, by slot index modulo nSlots.
  uint64_t txSlot_ = 0;
  size_t txOffset_ = 0;
  std::unique_ptr<uint8_t[][kMaxStripeFrameHeaderBytes]> txHeaders_;
  // Frame protection (tcp_stripe.h): this socket's ciphers, the length of its frame headers (stripe header and
  // tag), and the first slot whose stripe here is not sealed yet (a slot's stripe is sealed exactly once, when
  // its header is first encoded: sealing advances the frame number, and encryption works in place).
  crypto::FrameCipher txKey_;
  crypto::FrameCipher rxKey_;
  const size_t frameHeaderBytes_;
  uint64_t txSealed_ = 0;
  // Encodes and seals slot s's stripe header (this stream's part, `length` bytes at `payload`, of a slot of `bytes`
  // bytes with `tag`) into txHeaders_; a slot sealed before keeps its header. With encryption the ciphertext goes
  // to `encryptTo`, or over `payload` where that is null. Null after a failure (the link then carries it).
  uint8_t* encodeTxHeader(uint64_t s, uint64_t tag, uint64_t bytes, size_t offset, size_t length,
                          const uint8_t* payload, uint8_t* encryptTo = nullptr);
  uint8_t* txHeader(uint64_t s) { return txHeaders_[s % static_cast<uint64_t>(link_->sendRing().nSlots())]; }
  // Receive side: the header of the stripe arriving (and its tag), how much of it is in, whether it was admitted,
  // and how much of its payload is in.
  uint8_t rxHeaderBytes_[kMaxStripeFrameHeaderBytes] = {};
  size_t rxHeaderGot_ = 0;
  bool rxAdmitted_ = false;
  StripeHeader rxHeader_;
  size_t rxPayloadGot_ = 0;
};

}  // namespace cfx::transport::tcp
