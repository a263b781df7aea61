// SPDX-License-Identifier: Apache-2.0
// Dynamic membership, the member's side (core layer): see membership.h.
#include "core/membership.h"

#include <algorithm>
#include <functional>

#include "common/crypto.h"
#include "common/log.h"
#include "common/param.h"
#include "faulttol/member_master.h"
#include "transport/bootstrap/bootstrap.h"

namespace cfx::core {

namespace {
using ft::member::Kind;
using ft::member::Message;

std::string kickText(uint32_t reason) {
  return reason == static_cast<uint32_t>(ft::member::KickReason::NotReady)
             ? "it was not ready within the master's round timeout"
             : reason == static_cast<uint32_t>(ft::member::KickReason::Replaced) ? "another connection took its identity"
                                                                                   : "a protocol error";
}

}  // namespace

Master::Master(std::unique_ptr<ft::MembershipMaster> master) : master_(std::move(master)) {}

Master::~Master() = default;

Result<std::unique_ptr<Master>> Master::start(const sockaddr_storage& address, std::vector<uint8_t> secret) {
  CFX_TRY_ASSIGN(auto m, ft::MembershipMaster::start(address, std::move(secret), ft::MasterOptions::fromParams()));
  return std::unique_ptr<Master>(new Master(std::move(m)));
}

const sockaddr_storage& Master::address() const { return master_->address(); }

Master::Snapshot Master::snapshot() const {
  const ft::MembershipMaster::Snapshot snap = master_->snapshot();
  return Snapshot{snap.epoch, snap.members};
}

CFX_PARAM(bool, allOrNothingParam, "CFX_MEMBER_ALL_OR_NOTHING", true,
          "Membership communicators (cfxMemberUpdate): every collective either succeeds on every member of the epoch "
          "or fails on all of them (in-place inputs restored), at the cost of one round trip to the membership master "
          "per collective. 0: each member's own outcome stands, as with any NCCL communicator.");

Member::Member(const sockaddr_storage& master, std::vector<uint8_t> secret, const CommConfig& config,
               const CommOptions& options)
    : master_(master), secret_(std::move(secret)), config_(config), options_(options) {}

Result<std::unique_ptr<Member>> Member::join(const sockaddr_storage& master, std::vector<uint8_t> secret,
                                             const CommConfig& config, const CommOptions& options) {
  std::unique_ptr<Member> m(new Member(master, std::move(secret), config, options));
  CFX_TRY(crypto::randomBytes(m->uuid_));
  CFX_TRY(m->connect(Deadline(options.bootstrap.options.timeout)));
  return m;
}

Member::~Member() {
  if (sock_.valid()) {
    Message leave;
    leave.kind = Kind::Leave;
    (void)send(leave, Deadline(std::chrono::milliseconds(500)));
  }
  dropComm();
}

Status Member::connect(const Deadline& deadline) {
  sock_.close();
  reader_ = ft::member::FrameReader();
  net::ConnectOptions co;
  co.retries = options_.bootstrap.options.connectRetries;
  co.retrySleep = options_.bootstrap.options.retrySleep;
  CFX_TRY_ASSIGN(sock_, net::Socket::connect(master_, co, deadline, nullptr));
  // The master speaks first: a Challenge keyed with the job's secret proves it is the real master.
  recvCounter_ = 0;
  sendCounter_ = 0;
  key_ = crypto::Digest{};
  Result<Message> challenge = receive(deadline, secret_);
  if (!challenge.ok() || challenge->kind != Kind::Challenge) {
    sock_.close();
    return Status::error(Errc::RemoteError,
                         strprintf("membership master %s did not answer as a master with this job's secret%s%s",
                                   net::addressToString(master_).c_str(), challenge.ok() ? "" : ": ",
                                   challenge.ok() ? "" : challenge.status().message().c_str()));
  }
  Message hello;
  hello.kind = Kind::Hello;
  CFX_TRY(crypto::randomBytes(hello.hello.nonce));
  hello.hello.uuid = uuid_;
  hello.hello.epoch = epoch_;
  hello.hello.rank = epoch_ == 0 ? -1 : rank_;
  hello.hello.nRanks = epoch_ == 0 ? 0 : nRanks_;
  hello.hello.verdictSeq = epoch_ == 0 ? 0 : verdictSeq_;
  hello.hello.verdictOk = epoch_ != 0 && verdictOk_;
  key_ = ft::member::sessionKey(secret_, challenge->challenge, hello.hello.nonce);
  return send(hello, deadline);
}

Status Member::send(const Message& m, const Deadline& deadline) {
  CFX_TRY_ASSIGN(std::vector<uint8_t> frame, ft::member::seal(m, sendCounter_, key_));
  ++sendCounter_;
  return sock_.sendAll(frame.data(), frame.size(), deadline, nullptr);
}

Result<Message> Member::receive(const Deadline& deadline, std::span<const uint8_t> key) {
  for (;;) {
    CFX_TRY_ASSIGN(std::optional<ft::member::Frame> f, reader_.next());
    if (f) {
      CFX_TRY_ASSIGN(Message m, ft::member::open(*f, key, recvCounter_));
      ++recvCounter_;
      return m;
    }
    uint8_t buf[512];
    CFX_TRY(sock_.waitReadable(deadline, nullptr));
    CFX_TRY_ASSIGN(size_t n, sock_.recvSome(buf, sizeof(buf)));
    reader_.feed(std::span<const uint8_t>(buf, n));
  }
}

Result<Message> Member::ask(const Message& request, const std::function<bool(const Message&)>& isAnswer,
                            const char* waitingFor, const Deadline& deadline) {
  // Two tries: a master that restarted meanwhile is reached again, told where we stand (the Hello), and asked again.
  Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!sock_.valid()) {
      if (Status st = connect(deadline); !st.ok()) return st;
    }
    Status st = send(request, deadline);
    Result<Message> m = st.ok() ? receive(deadline, key_) : Result<Message>(st);
    if (m.ok() && isAnswer(*m)) return m;
    if (m.ok() && m->kind == Kind::Kicked) {
      sock_.close();
      return Status::error(Errc::RemoteError,
                           strprintf("the membership master removed this member (%s)", kickText(m->reason).c_str()));
    }
    last = m.ok() ? Status::error(Errc::RemoteError, strprintf("membership master sent %s %s",
                                                               ft::member::kindName(m->kind), waitingFor))
                  : m.status();
    sock_.close();
    if (last.code() == Errc::Timeout) break;
    CFX_INFO(log::Sys::Init, "member: lost the membership master %s (%s); reconnecting", waitingFor,
             last.message().c_str());
  }
  return last;
}

Result<ft::member::EpochNote> Member::awaitBoundary(const Deadline& deadline) {
  Message ready;
  ready.kind = Kind::Ready;
  ready.epoch = epoch_;
  // A communicator that broke (a failed collective, a revoke) cannot carry the next epoch even if nobody left.
  ready.rebuild = epoch_ != 0 && (comm_ == nullptr || !isLiveComm(comm_) || !comm_->checkUsable().ok());
  Result<Message> m = ask(ready, [](const Message& a) { return a.kind == Kind::Epoch; }, "at an epoch boundary",
                          deadline);
  if (!m.ok()) return Status::error(m.status().code(), "cfxMemberUpdate: " + m.status().message());
  return m->note;
}

Status Member::agree(const Status& local) {
  const uint64_t seq = ++voteSeq_;
  const Deadline deadline(options_.bootstrap.options.timeout);
  Message outcome;
  outcome.kind = Kind::Outcome;
  outcome.vote.epoch = epoch_;
  outcome.vote.seq = seq;
  outcome.vote.ok = local.ok();
  Result<Message> m = ask(
      outcome,
      [&](const Message& a) { return a.kind == Kind::Verdict && a.vote.epoch == epoch_ && a.vote.seq == seq; },
      "instead of a verdict", deadline);
  if (!m.ok()) {
    // Without a verdict this member cannot know how the others ended; it reports failure, and the next boundary
    // (whose shared-state sync settles any difference) brings the members together again.
    return Status::error(m.status().code() == Errc::Timeout ? Errc::Timeout : Errc::RemoteError,
                         strprintf("no verdict for collective #%llu of membership epoch %llu (%s)%s%s",
                                   static_cast<unsigned long long>(seq), static_cast<unsigned long long>(epoch_),
                                   m.status().message().c_str(), local.ok() ? "" : "; here it failed with: ",
                                   local.ok() ? "" : local.message().c_str()));
  }
  verdictSeq_ = seq;
  verdictOk_ = m->vote.ok;
  // A member's own failure stands as it is: it says best what happened here (the master blames whichever failure
  // reached it first, which may be a consequence, such as another member's revoke, of the cause).
  if (m->vote.ok || !local.ok()) return local;
  const std::string who = m->vote.failedRank >= 0 ? strprintf("member rank %d", m->vote.failedRank)
                                                  : std::string("a member that vanished or stayed silent");
  return Status::error(Errc::RemoteError,
                       strprintf("collective #%llu of membership epoch %llu failed on %s, so it fails on every member "
                                 "(all-or-nothing); in-place inputs are restored: call cfxMemberUpdate and retry the "
                                 "step",
                                 static_cast<unsigned long long>(seq), static_cast<unsigned long long>(epoch_),
                                 who.c_str()));
}

Status Member::formComm(const ft::member::EpochNote& note, const Deadline& deadline) {
  uint8_t wire[transport::UniqueId::kBytes] = {};
  if (note.rank == 0) {
    CFX_TRY_ASSIGN(transport::UniqueId id, transport::createUniqueId(options_.bootstrap.options));
    id.encode(wire);
    Message m;
    m.kind = Kind::Id;
    m.epoch = note.epoch;
    std::copy(std::begin(wire), std::end(wire), m.id.begin());
    CFX_TRY(send(m, deadline));
  } else {
    CFX_TRY_ASSIGN(Message m, receive(deadline, key_));
    if (m.kind != Kind::Id || m.epoch != note.epoch) {
      return Status::error(Errc::RemoteError, strprintf("membership master sent %s instead of epoch %llu's id",
                                                        ft::member::kindName(m.kind),
                                                        static_cast<unsigned long long>(note.epoch)));
    }
    if (std::all_of(m.id.begin(), m.id.end(), [](uint8_t b) { return b == 0; })) {
      return Status::error(Errc::RemoteError, strprintf("rank 0 of epoch %llu left before it handed out the epoch's id; "
                                                        "call cfxMemberUpdate again",
                                                        static_cast<unsigned long long>(note.epoch)));
    }
    std::copy(m.id.begin(), m.id.end(), std::begin(wire));
  }
  CFX_TRY_ASSIGN(transport::UniqueId id, transport::UniqueId::decode(wire));
  CFX_TRY_ASSIGN(std::unique_ptr<Communicator> c, Communicator::create(id, note.rank, note.nRanks, config_, options_));
  comm_ = c.release();
  registerComm(comm_);
  voteSeq_ = 0;
  verdictSeq_ = 0;
  verdictOk_ = false;
  if (allOrNothingParam.get()) comm_->setOutcomeAgreement([this](const Status& local) { return agree(local); });
  return Status();
}

Result<EpochInfo> Member::update() {
  const Deadline deadline(options_.bootstrap.options.timeout);
  CFX_TRY_ASSIGN(ft::member::EpochNote note, awaitBoundary(deadline));
  EpochInfo info;
  info.epoch = note.epoch;
  info.rank = note.rank;
  info.nRanks = note.nRanks;
  info.changed = note.changed;
  info.joined = static_cast<int>(note.joined);
  info.left = static_cast<int>(note.left);
  epoch_ = note.epoch;
  rank_ = note.rank;
  nRanks_ = note.nRanks;
  if (!note.changed && comm_ != nullptr) return info;
  if (!note.changed) {
    // Unchanged members, but this one lost its communicator (an earlier update failed after the boundary): it
    // cannot form one alone. Say so; the others notice at their next collective and all meet at the next boundary.
    return Status::error(Errc::RemoteError, "cfxMemberUpdate: this member has no communicator for the unchanged "
                                            "epoch (an earlier update failed); call cfxMemberUpdate again");
  }
  dropComm();
  CFX_INFO(log::Sys::Init, "member: epoch %llu, rank %d of %d (%d joined, %d left)",
           static_cast<unsigned long long>(epoch_), rank_, nRanks_, info.joined, info.left);
  if (Status st = formComm(note, deadline); !st.ok()) return Status::error(st.code(), "cfxMemberUpdate: " + st.message());
  return info;
}

void Member::dropComm() {
  if (comm_ == nullptr) return;
  if (isLiveComm(comm_)) {
    comm_->abort();
    unregisterComm(comm_);
    delete comm_;
  }
  comm_ = nullptr;
}

}  // namespace cfx::core
