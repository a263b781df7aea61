// SPDX-License-Identifier: Apache-2.0
// The membership master (faulttol layer): the one process that decides who is in each epoch of a dynamic group
// (cfxMasterStart; members are core/membership.h). PCCL's master, with its failure model made explicit.
//
// Members connect over TCP (member_wire.h: authenticated, numbered frames) and say Ready at every epoch boundary.
// A boundary is decided when every member of the current epoch is Ready, or has gone (its connection closed), or
// - for a member that is connected but silent, e.g. stopped - when `roundTimeout` has passed since the first
// Ready of the round (it is then kicked). Joiners that are waiting at that moment are admitted, after the
// surviving members and in the order they came. If the members are the same the epoch stays and nothing is
// rebuilt; otherwise the epoch number grows, every member learns its new rank, and the new rank 0 hands the
// master a fresh unique id to relay, from which the members form the epoch's communicator.
//
// All-or-nothing collectives: after each collective on the epoch's communicator every member reports how it ended
// (Outcome #seq). The master decides failure as soon as one member failed, or vanished without reporting, or stayed
// silent for `roundTimeout` after the first report; success once every member reported success (a member that
// reported success and then died still counts: its part was done). It sends the Verdict to everyone who reported,
// and to later reporters of that seq.
//
// The master holds no state a restart could lose for good: a restarted master (same address and secret) learns
// the epoch, the size, each member's rank and the last verdict from the members as they reconnect, and continues
// that epoch (members waiting for a verdict report again); it waits up to `restartGrace` for the missing ones
// before a boundary or a verdict may exclude them.
//
// Threading: one thread serves every connection with poll(); the public calls are thread-safe.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"

namespace cfx::ft {

struct MasterOptions {
  std::chrono::milliseconds roundTimeout{10000};      // CFX_MEMBER_ROUND_TIMEOUT_MS
  std::chrono::milliseconds handshakeTimeout{5000};   // a connection that has not said Hello by then is dropped
  std::chrono::milliseconds restartGrace{5000};       // CFX_MEMBER_RESTART_GRACE_MS
  static MasterOptions fromParams();
};

class MembershipMaster {
 public:
  // Listens on `address` (port 0: any free port) and starts serving. `secret` authenticates members.
  static Result<std::unique_ptr<MembershipMaster>> start(const sockaddr_storage& address, std::vector<uint8_t> secret,
                                                         const MasterOptions& options);
  ~MembershipMaster();  // closes every connection; members see the master gone and may reconnect to a new one
  MembershipMaster(const MembershipMaster&) = delete;
  MembershipMaster& operator=(const MembershipMaster&) = delete;

  const sockaddr_storage& address() const { return address_; }

  struct Snapshot {
    uint64_t epoch = 0;
    int members = 0;
    int waitingJoiners = 0;
    uint64_t boundaries = 0;  // decided so far
    int handshakes = 0;       // connections that have not said an authentic Hello yet (at most 64 are kept)
  };
  Snapshot snapshot() const;

 private:
  struct Impl;
  explicit MembershipMaster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  sockaddr_storage address_{};
  std::thread thread_;
};

}  // namespace cfx::ft
