// SPDX-License-Identifier: Apache-2.0
// One UCX connection to one peer on one channel (transport layer): the two in-memory slot FIFOs that the owning
// rank sees as a SendEnd and a RecvEnd. The proxy thread (ucx_proxy.cc) moves them with tagged messages.
//
//   owner thread (executor)                  proxy thread                           UCX
//   SendEnd::tryAcquire/post  -> send ring -> ucp_tag_send_nbx(slot s)       -> [frame header | payload] ->
//   RecvEnd::tryPeek/release  <- recv ring <- receive pre-posted into slot s  <- [frame header | payload] <-
//                                           -> credit message (slots released) ->
//
// The rings, the ends and their owner-driven hooks are the proxied link's (transport/link/proxied_link.h). Each
// slot keeps 64 bytes of room before its payload; the 16-byte frame header {bytes, tag} sits right before the
// payload, so one contiguous message carries both and a receive posted on the slot puts them where they belong:
// the bytes land in the receiver's slot memory, with no copy by us. The proxy writes the header there from the
// slot's SlotHeader before it sends, and reads it into the SlotHeader before it publishes a received slot.
//
// A send slot is given back once UCX completed its send; a recv slot is published once the receive into it
// completed. A sender keeps at most nSlots slots beyond what the receiver has released (its credits), so each send
// finds its receive already posted.
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
#include "transport/link/proxied_link.h"
#include "transport/transport.h"

namespace cfx::transport::ucx {

// Room before each payload; the frame header takes its last 16 bytes. 64 keeps payloads cache-line aligned.
inline constexpr size_t kSlotRoom = 64;

// The frame header: {bytes, tag}, each a u64 in common/wire.h's byte order.
inline constexpr size_t kFrameHeaderBytes = 16;

using link::ProxyWaker;
using link::SlotHeader;
using link::SlotRing;

// The frame of slot `index` (header + payload): what is sent, and where a receive is posted.
inline uint8_t* frame(SlotRing& ring, uint64_t index) { return ring.slot(index) - kFrameHeaderBytes; }
inline size_t maxFrameBytes(const SlotRing& ring) { return kFrameHeaderBytes + ring.slotBytes(); }
// Proxy side: the slot's SlotHeader into its frame before the send, and back out of a received frame.
inline void encodeFrameHeader(SlotRing& ring, uint64_t index) {
  wire::putU64(frame(ring, index), ring.header(index).bytes);
  wire::putU64(frame(ring, index) + 8, ring.header(index).tag);
}
inline SlotHeader decodeFrameHeader(SlotRing& ring, uint64_t index) {
  return SlotHeader{wire::getU64(frame(ring, index)), wire::getU64(frame(ring, index) + 8)};
}

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

// The proxied link of one (peer, channel) connection. The proxy's own bookkeeping (which slots are in flight) lives
// in the proxy.
class UcxLink final : public link::ProxiedLink {
 public:
  // probePid: the peer's pid when it runs on this host (check() then notices its exit), else 0.
  UcxLink(int peer, int channel, std::string description, const FifoGeometry& geometry,
          std::shared_ptr<ProxyWaker> waker, pid_t probePid);

  // Set before the proxy starts; null leaves every step to the proxy thread.
  void setGate(std::shared_ptr<InlineGate> gate) { gate_ = std::move(gate); }
  // Owner thread: one round of the proxy's work here, unless someone is doing it or the proxy is not running
  // (false then: the caller wakes the proxy).
  bool driveInline();
  // The ends' hooks (proxied_link.h): a round of the proxy's work at every moment.
  bool driveFromOwner(link::OwnerMoment moment) override;

  // status(), after asking the kernel whether a same-host peer still exists: UCX's shared-memory transports
  // cannot report a dead peer themselves (see ucx_proxy.cc). A reused pid looks alive; the executor's timeout
  // still names the peer then. Owner thread; costs a system call.
  Status check() override;

 private:
  std::shared_ptr<InlineGate> gate_;
  const pid_t probePid_;
};

}  // namespace cfx::transport::ucx
