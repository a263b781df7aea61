// SPDX-License-Identifier: Apache-2.0
// Dynamic membership, the member's side (core layer): cfxMemberJoin, cfxMemberUpdate, cfxMemberLeave. The master's
// side, and what decides an epoch, is faulttol/member_master.h.
//
// A member holds one connection to the master and, once admitted, the communicator of its current epoch. At an
// epoch boundary (update) it says Ready and waits for the master's decision. When the members are the same, the
// communicator stays and nothing is rebuilt. When they changed, the member aborts the old communicator (which
// never hangs, even with dead peers), and the new epoch's rank 0 creates a unique id that the master relays to
// the others, from which all form the new communicator. If the connection to the master breaks (a restarted
// master), update reconnects once, saying which epoch and rank it holds, and the new master continues the epoch.
//
// All-or-nothing collectives (CFX_MEMBER_ALL_OR_NOTHING, on by default): after each launch that holds a collective
// on the epoch's communicator, the member tells the master how it ended here (Outcome) and returns what the master
// decides for every member (Verdict): success only if every member of the epoch succeeded, failure as soon as one
// failed or vanished without saying. A member that succeeded but is told the op failed returns ncclRemoteError
// naming the member that failed, with in-place inputs restored (core/group.cc), so every survivor retries the same
// step from the same bytes. The cost is one round trip to the master per collective.
//
// Threading: one thread at a time per Member.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "core/communicator.h"
#include "faulttol/member_wire.h"

namespace cfx::ft {
class MembershipMaster;
}

namespace cfx::core {

// The membership master (faulttol/member_master.h) as the api layer starts it (cfxMasterStart): with the options of
// its knobs. Stopping it is destroying it.
class Master {
 public:
  // Listens on `address` (port 0: any free port) and starts serving. `secret` authenticates members.
  static Result<std::unique_ptr<Master>> start(const sockaddr_storage& address, std::vector<uint8_t> secret);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;
  const sockaddr_storage& address() const;
  // The current epoch and its members.
  struct Snapshot {
    uint64_t epoch = 0;
    int members = 0;
  };
  Snapshot snapshot() const;

 private:
  explicit Master(std::unique_ptr<ft::MembershipMaster> master);
  std::unique_ptr<ft::MembershipMaster> master_;
};

struct EpochInfo {
  uint64_t epoch = 0;
  int rank = -1;
  int nRanks = 0;
  bool changed = false;  // a new communicator was formed
  int joined = 0;
  int left = 0;
};

class Member {
 public:
  // Connects to the master and says Hello; the member is admitted at its first update().
  static Result<std::unique_ptr<Member>> join(const sockaddr_storage& master, std::vector<uint8_t> secret,
                                              const CommConfig& config, const CommOptions& options);
  ~Member();  // tells the master it leaves (best effort) and aborts its communicator
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  // The epoch boundary: blocks until the master decides it (every member of the epoch is Ready, gone, or past
  // the master's round timeout), then forms the new communicator if the members changed. A failure leaves the
  // member without a communicator; it may call update() again.
  Result<EpochInfo> update();
  Communicator* comm() const { return comm_; }

 private:
  Member(const sockaddr_storage& master, std::vector<uint8_t> secret, const CommConfig& config,
         const CommOptions& options);
  Status connect(const Deadline& deadline);
  Status send(const ft::member::Message& m, const Deadline& deadline);
  // The next frame, keyed with `key` (the secret for the master's Challenge, then the session key) and numbered.
  Result<ft::member::Message> receive(const Deadline& deadline, std::span<const uint8_t> key);
  // Sends `request` and returns the first frame `isAnswer` accepts. A lost connection (a restarted master) is
  // reconnected once and the request repeated; Kicked, a timeout or a second loss is an error. `waitingFor` ends
  // the messages ("at an epoch boundary").
  Result<ft::member::Message> ask(const ft::member::Message& request,
                                  const std::function<bool(const ft::member::Message&)>& isAnswer,
                                  const char* waitingFor, const Deadline& deadline);
  Result<ft::member::EpochNote> awaitBoundary(const Deadline& deadline);
  // The communicator's OutcomeAgreement: `local` is how the launch ended here; returns how it ends everywhere.
  Status agree(const Status& local);
  Status formComm(const ft::member::EpochNote& note, const Deadline& deadline);
  void dropComm();

  sockaddr_storage master_{};
  std::vector<uint8_t> secret_;
  CommConfig config_;
  CommOptions options_;
  net::Socket sock_;
  ft::member::FrameReader reader_;
  crypto::Digest key_{};
  uint64_t sendCounter_ = 0;
  uint64_t recvCounter_ = 0;
  ft::member::Nonce uuid_{};
  uint64_t epoch_ = 0;  // 0 until admitted
  int rank_ = -1;
  int nRanks_ = 0;
  Communicator* comm_ = nullptr;  // registered; owned
  uint64_t voteSeq_ = 0;          // collectives voted on with comm_ (the master numbers them the same way)
  uint64_t verdictSeq_ = 0;       // the last verdict received for comm_, told to a restarted master
  bool verdictOk_ = false;
};

}  // namespace cfx::core
