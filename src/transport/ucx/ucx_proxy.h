// SPDX-License-Identifier: Apache-2.0
// The UCX transport's worker and proxy thread (transport layer): owns the ucp_context, the ucp_worker and one
// ucp_ep per peer, and moves slots between the rings (ucx_connection.h) and UCX.
//
// Tags: every message carries a 64-bit UCX tag
//   bits 63..40  session key (24 bits of HMAC(secret, label)): messages of another job never match
//   bits 39..38  kind: data, credit or hello
//   bits 37..36  channel
//   bits 35..16  sender's rank
//   bits 15..0   slot sequence number (data), modulo 2^16; at most nSlots <= 1024 are ever outstanding
// Receives use the exact tag, so a data message can only land in the slot that was posted for it.
//
// Flow control: the receiver posts a receive for each free slot (nSlots ahead of what its owner released) and
// tells the sender how many slots its owner released in total with a credit message (one outstanding per link,
// always the newest count). The sender issues slot s only when s < released + nSlots, so every data message
// finds its receive posted and lands in place; UCX never buffers it as unexpected.
//
// Waiting: the thread calls ucp_worker_progress while that makes progress, polls a few more rounds, then arms
// the worker (ucp_worker_arm) and sleeps in epoll on the worker's event fd and the owners' wake eventfd: for at
// most 1 ms while sends are in flight or traffic moved in the last 50 ms (UCX does not signal every step it
// can take, see ucx_proxy.cc), else for at most 100 ms. After a round that freed or published a slot, or failed a
// link, it rings the owning rank's doorbell once.
//
// Inline progress (owner-driven, like tcp's, tcp_connection.h): each message otherwise waits for this thread to
// wake (a cross-CPU hand-off each way). So an owner runs one round of this thread's work itself (step,
// ucp_worker_progress, step) under the InlineGate mutex, which this thread holds for each of its own rounds (the
// worker stays UCS_THREAD_MODE_SERIALIZED): at once in post() and release(), and on every few polls of an empty
// recv ring or a full send ring. Each owner round ticks the gate; while the count moves this thread stays off the
// worker, looking again every 200 us, and works as before once it stands still (the owner sleeps or left with
// slots in flight). An owner round that moved anything while this thread sleeps on its armed worker wakes it, as
// the round may have consumed the events it sleeps for; with the proxy away from the worker, rounds wake nobody.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_connection.h"

namespace cfx::transport::ucx {

// The tag layout above.
enum class TagKind : uint64_t { Data = 0, Credit = 1, Hello = 2 };
uint64_t makeTag(uint32_t key24, TagKind kind, int channel, int rank, uint64_t seq);
inline constexpr int kMaxRanks = 1 << 20;
inline constexpr int kMaxSlots = 1024;
static_assert(kNumChannels <= 4, "the tag has two bits for the channel");

struct UcxContextDeleter {
  void operator()(ucp_context_h c) const { ucp_cleanup(c); }
};
struct UcxWorkerDeleter {
  void operator()(ucp_worker_h w) const { ucp_worker_destroy(w); }
};
using UcxContext = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, UcxContextDeleter>;
using UcxWorker = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, UcxWorkerDeleter>;

// A ucp context and worker with tag matching and wakeup (event fd) support.
struct UcxInstance {
  UcxContext context;
  UcxWorker worker;
  std::vector<uint8_t> address;  // this worker's address, as peers need it
  int eventFd = -1;              // owned by the worker
  // eagerSlots: UcxOptions::eagerSlots.
  static Result<UcxInstance> open(bool eagerSlots);
};

class UcxProxy {
 public:
  // Takes over the instance, opens an endpoint to every peer in `peerAddresses` (empty = not connected) with
  // peer-failure handling, creates a link per (peer, channel) and proves the session secret on every endpoint
  // (hello: an HMAC over both ranks and the receiver's worker address), bounded by `deadline`. Does not start
  // the thread yet; start() does.
  struct Setup {
    int rank = -1;
    uint32_t key24 = 0;
    FifoGeometry geometry;
    std::vector<std::vector<uint8_t>> peerAddresses;  // by rank
    std::vector<std::string> peerDescriptions;        // by rank: "peer rank 3 (host-b pid 4242)"
    std::vector<uint8_t> sameHost;                    // by rank: 1 when the peer is on this host
    std::vector<pid_t> probePids;                     // by rank: the peer's pid when it names it here, else 0
    std::vector<uint8_t> secret;
    Deadline deadline;
    bool inlineProgress = true;  // UcxOptions::inlineProgress
  };
  static Result<std::unique_ptr<UcxProxy>> create(UcxInstance instance, const Setup& setup, Doorbell& doorbell);
  ~UcxProxy();
  UcxProxy(const UcxProxy&) = delete;
  UcxProxy& operator=(const UcxProxy&) = delete;

  // The link of (peer, channel), or null when that peer is not connected.
  std::shared_ptr<UcxLink> link(int peer, int channel) const;
  const std::vector<std::shared_ptr<UcxLink>>& links() const { return links_; }

  Status start();
  // Stops the thread. With linger > 0 it first keeps sending slots already posted to live peers and flushes the
  // worker, for at most `linger` in all. Then closes the endpoints (forcibly: a dead peer must not hold us).
  // Owner thread; call at most once (the destructor calls stop(0) otherwise).
  void stop(std::chrono::milliseconds linger);

  struct LinkState;
  struct PeerState;
  struct RequestContext;

 private:
  UcxProxy(UcxInstance instance, int rank, uint32_t key24, Doorbell& doorbell);
  Status openEndpoints(const Setup& setup);
  Status hello(const Setup& setup);
  void run();
  bool step();
  bool stepSend(LinkState& s);
  bool stepRecv(LinkState& s);
  bool anyUnsent() const;
  bool anyInFlight() const;
  void waitIdle(int timeoutMs);
  // Sleeps in epoll until the worker or an owner has something, or timeoutMs passed (after ucp_worker_arm).
  void sleepArmed(int timeoutMs);
  // Owner thread, gate_->mutex held: one round of run()'s work.
  void driveInline();
  void closeAll(std::chrono::milliseconds flushFor);

  UcxInstance ucx_;
  const int rank_;
  const uint32_t key24_;
  Doorbell& doorbell_;
  std::shared_ptr<ProxyWaker> waker_;
  std::shared_ptr<InlineGate> gate_ = std::make_shared<InlineGate>();
  bool inlineProgress_ = true;
  int epoll_ = -1;
  std::vector<std::unique_ptr<PeerState>> peers_;   // by rank; null when not connected
  std::vector<std::shared_ptr<UcxLink>> links_;
  std::vector<std::unique_ptr<LinkState>> states_;  // parallel to links_
  std::thread thread_;
  bool closed_ = false;
  // Set by stop(): release pairs with the proxy's acquire load, which then also sees lingerUntil_.
  std::atomic<bool> stopping_{false};
  Deadline::Clock::time_point lingerUntil_{};
};

}  // namespace cfx::transport::ucx
