// SPDX-License-Identifier: Apache-2.0
// Membership frames and the master's handling of strangers (faulttol layer): every kind round-trips, tampering and
// replays are refused, and the master drops garbage, a wrong secret and out-of-order frames while it admits a
// member that speaks the protocol.
#include "faulttol/member_master.h"
#include "faulttol/member_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "common/socket.h"

namespace cfx::ft {
namespace {

using namespace std::chrono_literals;
using member::Kind;
using member::Message;

std::vector<uint8_t> secretOf(uint8_t fill) { return std::vector<uint8_t>(32, fill); }

std::vector<Message> everyKind() {
  std::vector<Message> all(9);
  all[0].kind = Kind::Challenge;
  all[0].challenge.fill(7);
  all[1].kind = Kind::Hello;
  all[1].hello.nonce.fill(1);
  all[1].hello.uuid.fill(2);
  all[1].hello.epoch = 3;
  all[1].hello.rank = 1;
  all[1].hello.nRanks = 4;
  all[2].kind = Kind::Ready;
  all[2].epoch = 9;
  all[3].kind = Kind::Epoch;
  all[3].note = {10, 2, 3, true, 1, 2};
  all[4].kind = Kind::Id;
  all[4].epoch = 10;
  all[4].id.fill(0xab);
  all[5].kind = Kind::Leave;
  all[6].kind = Kind::Kicked;
  all[6].reason = 1;
  all[7].kind = Kind::Outcome;
  all[7].vote = {10, 4, true, -1};
  all[8].kind = Kind::Verdict;
  all[8].vote = {10, 4, false, 2};
  all[1].hello.verdictSeq = 7;
  all[1].hello.verdictOk = true;
  return all;
}

TEST(MemberWire, EveryKindRoundTripsThroughAStreamCutAnywhere) {
  const std::vector<uint8_t> key = secretOf(5);
  std::vector<uint8_t> stream;
  const std::vector<Message> all = everyKind();
  for (size_t i = 0; i < all.size(); ++i) {
    Result<std::vector<uint8_t>> f = member::seal(all[i], i, key);
    ASSERT_TRUE(f.ok());
    stream.insert(stream.end(), f->begin(), f->end());
  }
  member::FrameReader reader;
  size_t got = 0;
  for (uint8_t byte : stream) {  // one byte at a time: frames straddle every possible cut
    reader.feed(std::span<const uint8_t>(&byte, 1));
    Result<std::optional<member::Frame>> f = reader.next();
    ASSERT_TRUE(f.ok()) << f.status().message();
    if (!f->has_value()) continue;
    Result<Message> m = member::open(**f, key, got);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->kind, all[got].kind);
    EXPECT_EQ(m->vote.epoch, all[got].vote.epoch);
    EXPECT_EQ(m->vote.seq, all[got].vote.seq);
    EXPECT_EQ(m->vote.ok, all[got].vote.ok);
    EXPECT_EQ(m->vote.failedRank, all[got].vote.failedRank);
    EXPECT_EQ(m->hello.verdictSeq, all[got].hello.verdictSeq);
    EXPECT_EQ(m->hello.verdictOk, all[got].hello.verdictOk);
    ++got;
  }
  EXPECT_EQ(got, all.size());
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(MemberWire, TamperingAnotherKeyAndReplaysAreRefused) {
  const std::vector<uint8_t> key = secretOf(5);
  Message m = everyKind()[3];
  Result<std::vector<uint8_t>> frame = member::seal(m, 4, key);
  ASSERT_TRUE(frame.ok());
  auto cut = [](std::vector<uint8_t> bytes) {
    member::FrameReader r;
    r.feed(bytes);
    Result<std::optional<member::Frame>> f = r.next();
    EXPECT_TRUE(f.ok() && f->has_value());
    return f.ok() && f->has_value() ? **f : member::Frame{};
  };
  EXPECT_TRUE(member::open(cut(*frame), key, 4).ok());
  EXPECT_FALSE(member::open(cut(*frame), secretOf(6), 4).ok()) << "another secret";
  EXPECT_FALSE(member::open(cut(*frame), key, 5).ok()) << "a replayed or reordered frame";
  std::vector<uint8_t> flipped = *frame;
  flipped[member::kHeaderBytes + 5] ^= 1;
  EXPECT_FALSE(member::open(cut(flipped), key, 4).ok()) << "a changed payload";
  // An Epoch whose rank is outside its size is refused even with a valid MAC.
  m.note.rank = 7;
  Result<std::vector<uint8_t>> bad = member::seal(m, 0, key);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(member::open(cut(*bad), key, 0).ok());
  // Headers no sender writes stop the stream at once.
  for (size_t at : {size_t{0}, size_t{4}, size_t{6}, size_t{9}}) {
    std::vector<uint8_t> broken = *frame;
    broken[at] ^= 0x40;
    member::FrameReader r;
    r.feed(broken);
    EXPECT_FALSE(r.next().ok()) << "header byte " << at;
  }
}

// A raw client of the master, speaking the protocol by hand.
class RawClient {
 public:
  explicit RawClient(const sockaddr_storage& master) {
    Result<net::Socket> s = net::Socket::connect(master, net::ConnectOptions{}, Deadline(5000ms), nullptr);
    EXPECT_TRUE(s.ok());
    if (s.ok()) sock_ = std::move(*s);
  }
  Result<member::Frame> frame() {
    for (;;) {
      CFX_TRY_ASSIGN(std::optional<member::Frame> f, reader_.next());
      if (f) return std::move(*f);
      uint8_t buf[256];
      CFX_TRY(sock_.waitReadable(Deadline(5000ms), nullptr));
      CFX_TRY_ASSIGN(size_t n, sock_.recvSome(buf, sizeof(buf)));
      reader_.feed(std::span<const uint8_t>(buf, n));
    }
  }
  void sendRaw(const std::vector<uint8_t>& bytes) {
    EXPECT_TRUE(sock_.sendAll(bytes.data(), bytes.size(), Deadline(5000ms), nullptr).ok());
  }
  void send(const Message& m, uint64_t counter, std::span<const uint8_t> key) {
    Result<std::vector<uint8_t>> f = member::seal(m, counter, key);
    ASSERT_TRUE(f.ok());
    sendRaw(*f);
  }
  // True when the master closes the connection within 5 s.
  bool closedByMaster() {
    for (;;) {
      if (!sock_.waitReadable(Deadline(5000ms), nullptr).ok()) return false;
      uint8_t buf[256];
      Result<size_t> n = sock_.recvSome(buf, sizeof(buf));
      if (!n.ok()) return true;
    }
  }
  // Says Hello (as hello()) and Ready as a joiner, and returns the master's answer: the Epoch that admits it.
  Result<Message> join(std::span<const uint8_t> secret, uint8_t uuidFill) {
    const crypto::Digest key = hello(secret, uuidFill);
    Message ready;
    ready.kind = Kind::Ready;
    send(ready, 1, key);
    CFX_TRY_ASSIGN(member::Frame f, frame());
    return member::open(f, key, 1);
  }
  // Reads the Challenge and answers with a Hello keyed from `secret`; returns the session key used.
  crypto::Digest hello(std::span<const uint8_t> secret, uint8_t uuidFill) {
    Result<member::Frame> f = frame();
    EXPECT_TRUE(f.ok());
    Result<Message> challenge = member::open(*f, secret, 0);
    Message h;
    h.kind = Kind::Hello;
    h.hello.nonce.fill(0x77);
    h.hello.uuid.fill(uuidFill);
    const crypto::Digest key = member::sessionKey(secret, challenge.ok() ? challenge->challenge : member::Nonce{},
                                                  h.hello.nonce);
    send(h, 0, key);
    return key;
  }

 private:
  net::Socket sock_;
  member::FrameReader reader_;
};

sockaddr_storage loopbackAnyPort() {
  Result<sockaddr_storage> a = net::parseAddress("127.0.0.1:0");
  EXPECT_TRUE(a.ok());
  return *a;
}

TEST(MembershipMaster, DropsStrangersAndAdmitsAMemberThatSpeaksTheProtocol) {
  const std::vector<uint8_t> secret = secretOf(9);
  Result<std::unique_ptr<MembershipMaster>> master = MembershipMaster::start(loopbackAnyPort(), secret, MasterOptions{});
  ASSERT_TRUE(master.ok()) << master.status().message();
  const sockaddr_storage at = (*master)->address();

  {  // A member with another secret cannot even read the master's Challenge as authentic.
    RawClient c(at);
    Result<member::Frame> f = c.frame();
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE(member::open(*f, secretOf(8), 0).ok());
    EXPECT_TRUE(member::open(*f, secret, 0).ok());
  }
  {  // A Hello keyed with another secret is dropped.
    RawClient c(at);
    (void)c.hello(secretOf(8), 1);
    EXPECT_TRUE(c.closedByMaster());
  }
  {  // Garbage is dropped.
    RawClient c(at);
    c.sendRaw(std::vector<uint8_t>(200, 'x'));
    EXPECT_TRUE(c.closedByMaster());
  }
  {  // A frame out of order (a replay, or one lost) is dropped.
    RawClient c(at);
    const crypto::Digest key = c.hello(secret, 2);
    Message ready;
    ready.kind = Kind::Ready;
    c.send(ready, 5, key);
    EXPECT_TRUE(c.closedByMaster());
  }
  {  // A joiner that speaks the protocol forms a group of one.
    RawClient c(at);
    Result<Message> note = c.join(secret, 3);
    ASSERT_TRUE(note.ok()) << note.status().message();
    ASSERT_EQ(note->kind, Kind::Epoch);
    EXPECT_EQ(note->note.epoch, 1u);
    EXPECT_EQ(note->note.rank, 0);
    EXPECT_EQ(note->note.nRanks, 1);
    EXPECT_TRUE(note->note.changed);
    // The master publishes its snapshot after it sent the decision: wait for it a little.
    for (int i = 0; i < 200 && (*master)->snapshot().members != 1; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ((*master)->snapshot().members, 1);
    EXPECT_EQ((*master)->snapshot().epoch, 1u);
  }
}

TEST(MembershipMaster, AFloodOfSilentConnectionsIsShedOldestFirstAndAMemberStillGetsIn) {
  const std::vector<uint8_t> secret = secretOf(9);
  Result<std::unique_ptr<MembershipMaster>> master = MembershipMaster::start(loopbackAnyPort(), secret, MasterOptions{});
  ASSERT_TRUE(master.ok()) << master.status().message();
  const sockaddr_storage at = (*master)->address();
  std::vector<std::unique_ptr<RawClient>> flood;
  for (int i = 0; i < 300; ++i) flood.push_back(std::make_unique<RawClient>(at));
  // The master keeps at most 64 of them: the first ones it accepted are gone.
  EXPECT_TRUE(flood.front()->closedByMaster());
  // The snapshot is published every loop turn (20 ms): wait for one taken after the flood.
  for (int i = 0; i < 200; ++i) {
    const int h = (*master)->snapshot().handshakes;
    if (h > 0 && h <= 64) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LE((*master)->snapshot().handshakes, 64);
  EXPECT_GT((*master)->snapshot().handshakes, 0);
  // A member that speaks the protocol is admitted while the flood still holds its connections.
  RawClient c(at);
  Result<Message> note = c.join(secret, 3);
  ASSERT_TRUE(note.ok()) << note.status().message();
  EXPECT_EQ(note->kind, Kind::Epoch);
  EXPECT_EQ(note->note.nRanks, 1);
}

}  // namespace
}  // namespace cfx::ft
