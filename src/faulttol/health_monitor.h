// SPDX-License-Identifier: Apache-2.0
// HealthMonitor (faulttol layer): one rank's view of which peers of one communicator are alive, fed by heartbeats,
// by process-exit watches and by failures the data path reports, and shared with every survivor so that all of
// them name the same failed rank.
//
// Why a separate channel: the data path only sees the peers a rank is blocked on, and it cannot tell a peer that
// died from a peer that closed because *it* saw someone else die. So every rank runs a cfx-health thread on a
// small UDP socket bound to the bootstrap interface. Every datagram is authenticated with HMAC-SHA256 under the
// communicator's session secret (fresh per communicator: Bootstrap::secret()), bound to the communicator (commTag)
// and its receiver, length-checked and replay-checked (a per-sender counter that only grows). Datagrams, not
// connections: a stopped peer cannot fill a socket buffer and block us, and there is nothing to reconnect.
//
// Peer states (per peer rank, enforced by setState):
//   Alive     heartbeats are expected every period; the initial state.
//   Departed  the peer said it left (ncclCommDestroy/Abort). Its silence is no longer a failure; a transfer that
//             still needs it fails on the data path and is then reported as a failure (Departed -> Failed).
//   Failed    terminal. Entered by first-hand evidence (the process exited, the data connection was lost, or
//             `misses` heartbeat periods passed in silence) or by a notice from another survivor.
// Alive -> Departed, Alive -> Failed, Departed -> Failed; nothing leaves Failed.
//
// Propagation: a rank that learns of a new failure floods one Failure notice to every peer still believed alive
// before it does anything else (so before its own operation returns and it aborts and closes its connections);
// receivers deduplicate by failed rank and forward once. Each heartbeat carries how many failures the sender
// knows; a receiver that knows more resends its notices to that sender, which repairs a lost datagram within a
// period. Cost per rank: (nRanks-1) heartbeats of 48 B per period; one notice per failure per peer.
//
// Threading: every public method is thread-safe. The monitor thread blocks in poll() (socket, process-exit fds,
// wake-up eventfd) until the next heartbeat is due; it never spins.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto.h"
#include "common/doorbell.h"
#include "common/socket.h"
#include "common/status.h"

namespace cfx::ft {

// Why a rank is considered failed. Values are part of the public ABI (cfxFailureReason in conflux.h).
enum class FailureReason : int {
  Exited = 1,          // the process is gone (same host: its process-exit watch fired)
  ConnectionLost = 2,  // a data connection to it broke or was closed while a transfer needed it
  Hung = 3,            // no heartbeat for `misses` periods (stopped, frozen, or cut off by the network)
};
const char* reasonName(FailureReason reason);

// One failed rank, as every survivor learns it (the detector's view, forwarded verbatim).
struct Failure {
  int rank = -1;
  FailureReason reason = FailureReason::ConnectionLost;
  int detectedBy = -1;           // the rank that saw it first-hand
  int pid = 0;                   // the failed rank's process id on its host
  std::string host;              // the failed rank's host name
  std::string op;                // the detector's operation at the time, "" when it was idle
  uint64_t opSeq = 0;            // the detector's operation sequence number (opCount), 0 when idle
  std::string text;              // what the detector saw
  std::string describe() const;  // "rank 2 (host h, pid 123) exited: ...; detected by rank 3 during ..."
};

// A revoke as every rank learns it: who revoked, and why when it was not ncclCommRevoke.
struct RevokeNotice {
  int origin = -1;         // the rank that revoked
  Errc code = Errc::Ok;    // Ok: ncclCommRevoke; else the error that made origin revoke (a mismatched call)
  std::string reason;      // that error's text, clipped to a datagram's room
};

struct HealthOptions {
  std::chrono::milliseconds period{500};  // CFX_HEARTBEAT_MS; 0 turns heartbeats off (notices still flow)
  int misses = 6;                         // CFX_HEARTBEAT_MISSES: silent periods before a peer is Hung
  static HealthOptions fromParams();
  std::chrono::milliseconds hungAfter() const { return period * misses; }
};

// What the monitor needs to know about each peer, from the communicator's init exchange.
struct PeerIdentity {
  int pid = 0;
  std::string host;
  bool watchPid = false;       // the pid is meaningful here (same host and pid namespace, e.g. shm reached it)
  sockaddr_storage address{};  // its monitor's UDP address
};

class HealthMonitor {
 public:
  // Called once per new failure learned (first-hand or by notice), from whichever thread learned it.
  using FailureSink = std::function<void(const Failure&)>;
  // Called once, the first time a revoke notice arrives, with the notice (the monitor thread, or a pollNow caller).
  // Set before start().
  using RevokeSink = std::function<void(const RevokeNotice&)>;
  void setRevokeSink(RevokeSink sink);
  // Tells every peer that this communicator is revoked: by ncclCommRevoke (code Ok), or because this rank found an
  // error every rank must fail with (a mismatched call: InvalidUsage and its text). Each rank that hears it first
  // forwards it to all others, so one lost datagram does not leave a rank running. Bounded: datagrams only. Only
  // the first announcement or notice of a communicator counts; later ones are not sent.
  void announceRevoke(Errc code = Errc::Ok, const std::string& reason = {});

  // Binds the UDP socket on `bindAddress`'s IP (any port). SystemError when it cannot.
  static Result<std::unique_ptr<HealthMonitor>> open(int rank, int nRanks, const HealthOptions& options,
                                                     std::span<const uint8_t> secret, uint64_t commTag,
                                                     const sockaddr_storage& bindAddress);
  // Stops the thread after telling peers this rank leaves (stop()).
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // This rank's UDP address, to be exchanged with every peer before start().
  const sockaddr_storage& address() const { return address_; }
  // Starts the monitor thread. `doorbell` (may be null) is rung on every new failure so a sleeping executor
  // wakes; it must outlive the monitor. InvalidArgument for a malformed peer table; SystemError for a thread.
  Status start(std::vector<PeerIdentity> peers, Doorbell* doorbell, FailureSink sink);
  // Tells every live peer that this rank leaves, then stops the thread. Idempotent; bounded (no waits on peers).
  void stop();

  // Number of failed ranks known. Acquire: pairs with the release in record(), so a reader that sees n > 0
  // finds the records under the lock. Cheap enough for an executor's wait loop.
  int failedCount() const { return failedCount_.load(std::memory_order_acquire); }
  std::vector<Failure> failures() const;
  // "failed rank(s) 2, 5: <each failure's describe()>", the failures in the order learned; empty when none.
  std::string describeFailures() const;
  bool departed(int rank) const;

  // First-hand evidence from the data path: `rank` broke a transfer of `op`/`opSeq`. Records and floods it unless
  // some failure is already known. Returns true if this call recorded it.
  bool report(int rank, FailureReason reason, const std::string& text, const std::string& op, uint64_t opSeq);
  // Reads every notice already queued on the socket, on the calling thread (the monitor thread may be slow to
  // run). A peer that closes its connections because it saw another rank fail sent that notice first, so a
  // data-path error is checked against the queue before it is blamed on the closing peer.
  void pollNow();
  // pollNow(), then waits up to `grace` for any failure to become known. True if one is.
  bool awaitFailure(std::chrono::milliseconds grace);

 private:
  enum class PeerState : uint8_t { Alive, Departed, Failed };
  struct Peer {
    PeerIdentity id;
    PeerState state = PeerState::Alive;
    std::chrono::steady_clock::time_point lastHeard;
    uint64_t lastCounter = 0;  // highest authenticated counter seen from it
    net::UniqueFd pidFd;       // readable once the process exits; invalid when not watched
  };

  HealthMonitor(int rank, int nRanks, const HealthOptions& options, uint64_t commTag);
  void loop();
  void receiveAll();  // caller holds recvMutex_
  void handleDatagram(std::span<const uint8_t> bytes, const sockaddr_storage& from);
  void sendHeartbeats();
  void announceLeaving();
  void checkSilence();
  // Records `f` if its rank is not failed yet, floods it, wakes the executor and calls the sink.
  bool record(const Failure& f, bool firstHand);
  void setState(Peer& peer, PeerState next);
  void dropPidFd(Peer& peer);  // caller holds mu_ (or owns peers_ alone)
  void sendTo(int peer, uint16_t kind, std::span<const uint8_t> payload);
  void wake();

  const int rank_;
  const int nRanks_;
  const HealthOptions options_;
  const uint64_t commTag_;
  net::UniqueFd sock_;
  net::UniqueFd wakeFd_;
  // The loop's wait set: wakeFd_, sock_ and each watched peer's pidFd (tagged rank + 2). A closed pidFd leaves it on
  // its own, so a wake-up costs the same whatever the number of peers (poll() scanned every pidfd each time: with 64
  // ranks on a host, every heartbeat that arrived cost a scan of 63 descriptors).
  net::UniqueFd epollFd_;
  sockaddr_storage address_{};
  Doorbell* doorbell_ = nullptr;
  FailureSink sink_;
  RevokeSink revokeSink_;                 // guarded by mu_ until start(), read-only afterwards
  std::atomic<bool> revokeSeen_{false};   // this rank announced or heard a revoke: forward only once

  // Guards the states and records in peers_, and failures_. peers_ itself is sized once in start() and the
  // identities in it never change afterwards, so senders read addresses without it.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // notified when a failure is recorded
  std::vector<Peer> peers_;
  std::vector<Failure> failures_;  // in the order learned
  std::atomic<int> failedCount_{0};

  std::mutex sendMu_;     // keeps counters in send order, so a receiver's replay check never drops a fresh one
  uint64_t counter_ = 0;  // last counter this rank sent; guarded by sendMu_
  // The secret as HMAC keys made once in open() (the monitor keeps no other copy): every rank signs and checks a
  // datagram per peer and period.
  std::optional<crypto::HmacKey> sendKey_;  // guarded by sendMu_
  std::optional<crypto::HmacKey> recvKey_;  // guarded by recvMutex_
  std::mutex recvMutex_;  // one reader of the socket at a time (monitor thread or pollNow); guards badDatagrams_
  uint64_t badDatagrams_ = 0;
  std::atomic<bool> stopping_{false};  // relaxed: the eventfd write is what wakes the thread
  bool stopped_ = false;               // guarded by mu_
  std::thread thread_;
};

}  // namespace cfx::ft
