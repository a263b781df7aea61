// SPDX-License-Identifier: Apache-2.0
// Health datagrams and the HealthMonitor state machine, with several monitors in one process over loopback.
#include "faulttol/health_monitor.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "faulttol/health_wire.h"

namespace cfx::ft {
namespace {

using namespace std::chrono_literals;

const std::vector<uint8_t> kSecret(32, 0x5a);
constexpr uint64_t kTag = 0x1234;

sockaddr_storage loopback() {
  sockaddr_storage a{};
  auto* in = reinterpret_cast<sockaddr_in*>(&a);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

Failure sampleFailure() {
  Failure f;
  f.rank = 2;
  f.reason = FailureReason::Hung;
  f.detectedBy = 1;
  f.pid = 4242;
  f.host = "node-7";
  f.op = "AllReduce";
  f.opSeq = 99;
  f.text = "no heartbeat";
  return f;
}

TEST(HealthWire, SealedDatagramOpensWithItsHeaderAndPayload) {
  wire::Header h;
  h.kind = wire::FailureNotice;
  h.commTag = kTag;
  h.sender = 1;
  h.receiver = 3;
  h.nRanks = 4;
  h.counter = 7;
  h.known = 1;
  const std::vector<uint8_t> payload = wire::encodeFailure(sampleFailure());
  auto sealed = wire::seal(h, payload, kSecret);
  ASSERT_TRUE(sealed.ok()) << sealed.status().message();
  auto opened = wire::open(*sealed, kSecret, kTag, 4, 3);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->header.kind, wire::FailureNotice);
  EXPECT_EQ(opened->header.sender, 1);
  EXPECT_EQ(opened->header.counter, 7u);
  EXPECT_EQ(opened->header.known, 1u);
  auto f = wire::decodeFailure(opened->payload, 4);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->reason, FailureReason::Hung);
  EXPECT_EQ(f->detectedBy, 1);
  EXPECT_EQ(f->pid, 4242);
  EXPECT_EQ(f->host, "node-7");
  EXPECT_EQ(f->op, "AllReduce");
  EXPECT_EQ(f->opSeq, 99u);
  EXPECT_EQ(f->text, "no heartbeat");
}

// A revoke notice carries the rank that revoked (the sender may forward it) and, for a revoke that an error caused,
// the error's code and text; a kind beyond the known ones is refused even when the MAC
// is right (an older or newer peer must not be misread).
TEST(HealthWire, RevokeNoticeOpensAndUnknownKindsAreRefused) {
  wire::Header h;
  h.kind = wire::Revoke;
  h.commTag = kTag;
  h.sender = 1;
  h.receiver = 0;
  h.nRanks = 3;
  h.counter = 9;
  const cfx::ft::RevokeNotice mismatch{2, cfx::Errc::InvalidUsage, "mismatched operation across ranks: ..."};
  auto sealed = wire::seal(h, wire::encodeRevoke(mismatch), kSecret);  // rank 1 forwards rank 2's revoke
  ASSERT_TRUE(sealed.ok());
  auto opened = wire::open(*sealed, kSecret, kTag, 3, 0);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->header.kind, wire::Revoke);
  EXPECT_EQ(opened->header.sender, 1);
  auto notice = wire::decodeRevoke(opened->payload, 3);
  ASSERT_TRUE(notice.ok()) << notice.status().message();
  EXPECT_EQ(notice->origin, 2);
  EXPECT_EQ(notice->code, cfx::Errc::InvalidUsage);
  EXPECT_EQ(notice->reason, mismatch.reason);
  auto plain = wire::decodeRevoke(wire::encodeRevoke({0, cfx::Errc::Ok, ""}), 3);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->code, cfx::Errc::Ok);
  EXPECT_FALSE(wire::decodeRevoke(wire::encodeRevoke({3, cfx::Errc::Ok, ""}), 3).ok()) << "origin out of range";
  EXPECT_FALSE(wire::decodeRevoke({}, 3).ok()) << "no origin";
  EXPECT_FALSE(wire::decodeRevoke(wire::encodeRevoke({1, cfx::Errc::InProgress, "x"}), 3).ok()) << "not an error";
  EXPECT_FALSE(wire::decodeRevoke(wire::encodeRevoke({1, static_cast<cfx::Errc>(99), "x"}), 3).ok()) << "unknown";
  std::vector<uint8_t> longer = wire::encodeRevoke(mismatch);
  longer.push_back('!');
  EXPECT_FALSE(wire::decodeRevoke(longer, 3).ok()) << "text length disagrees with the payload";
  std::vector<uint8_t> reserved = wire::encodeRevoke(mismatch);
  reserved[10] = 1;
  EXPECT_FALSE(wire::decodeRevoke(reserved, 3).ok()) << "reserved field set";
  h.kind = static_cast<uint16_t>(wire::Revoke + 1);
  auto unknown = wire::seal(h, {}, kSecret);
  ASSERT_TRUE(unknown.ok());
  auto refused = wire::open(*unknown, kSecret, kTag, 3, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unknown kind"), std::string::npos) << refused.status().message();
}

TEST(HealthWire, RejectsTamperedForeignTruncatedAndOversizedDatagrams) {
  wire::Header h;
  h.commTag = kTag;
  h.sender = 0;
  h.receiver = 1;
  h.nRanks = 2;
  h.counter = 1;
  auto sealed = wire::seal(h, {}, kSecret);
  ASSERT_TRUE(sealed.ok());
  ASSERT_TRUE(wire::open(*sealed, kSecret, kTag, 2, 1).ok());
  for (size_t i = 0; i < sealed->size(); ++i) {
    std::vector<uint8_t> bad = *sealed;
    bad[i] ^= 0x01;
    EXPECT_FALSE(wire::open(bad, kSecret, kTag, 2, 1).ok()) << "a flipped bit at byte " << i << " went unnoticed";
  }
  const std::vector<uint8_t> otherSecret(32, 0x11);
  EXPECT_FALSE(wire::open(*sealed, otherSecret, kTag, 2, 1).ok());
  EXPECT_FALSE(wire::open(*sealed, kSecret, kTag + 1, 2, 1).ok());
  EXPECT_FALSE(wire::open(*sealed, kSecret, kTag, 3, 1).ok());
  // Sent to rank 1, it is refused by any other rank (redirected, it could pass that rank's counter check).
  EXPECT_FALSE(wire::open(*sealed, kSecret, kTag, 2, 0).ok());
  for (size_t n = 0; n < sealed->size(); ++n) {
    EXPECT_FALSE(wire::open(std::span<const uint8_t>(sealed->data(), n), kSecret, kTag, 2, 1).ok()) << n << " bytes";
  }
  std::vector<uint8_t> huge(wire::kMaxDatagramBytes + 1, 0);
  EXPECT_FALSE(wire::open(huge, kSecret, kTag, 2, 1).ok());
}

TEST(HealthWire, FailurePayloadsWithBadRanksReasonsOrLengthsAreRejected) {
  const std::vector<uint8_t> good = wire::encodeFailure(sampleFailure());
  EXPECT_TRUE(wire::decodeFailure(good, 4).ok());
  EXPECT_FALSE(wire::decodeFailure(good, 2).ok()) << "rank 2 of 2 ranks";
  std::vector<uint8_t> badReason = good;
  badReason[7] = 9;
  EXPECT_FALSE(wire::decodeFailure(badReason, 4).ok());
  std::vector<uint8_t> shortText(good.begin(), good.end() - 1);
  EXPECT_FALSE(wire::decodeFailure(shortText, 4).ok());
  std::vector<uint8_t> longer = good;
  longer.push_back('x');
  EXPECT_FALSE(wire::decodeFailure(longer, 4).ok());
  for (size_t n = 0; n < 32; ++n) {
    EXPECT_FALSE(wire::decodeFailure(std::span<const uint8_t>(good.data(), n), 4).ok());
  }
  std::vector<uint8_t> reserved = good;
  reserved[31] = 1;  // the u16 after the three text lengths
  auto refused = wire::decodeFailure(reserved, 4);
  ASSERT_FALSE(refused.ok()) << "a notice that does not re-encode to itself";
  EXPECT_NE(refused.status().message().find("reserved"), std::string::npos) << refused.status().message();
  Failure longText = sampleFailure();
  longText.text.assign(5000, 'y');
  auto clipped = wire::decodeFailure(wire::encodeFailure(longText), 4);
  ASSERT_TRUE(clipped.ok());
  EXPECT_EQ(clipped->text.size(), wire::kMaxTextBytes);
}

// n monitors of one communicator in this process. Those in `silent` are opened (their address exists) but never
// started: they never send a heartbeat, like a stopped process.
class Mesh {
 public:
  Mesh(int n, const HealthOptions& options, std::vector<int> silent = {}) {
    for (int r = 0; r < n; ++r) {
      auto m = HealthMonitor::open(r, n, options, kSecret, kTag, loopback());
      EXPECT_TRUE(m.ok()) << m.status().message();
      monitors.push_back(std::move(m).value());
    }
    sinkCalls = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      if (std::find(silent.begin(), silent.end(), r) != silent.end()) continue;
      std::vector<PeerIdentity> ids(static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) {
        ids[static_cast<size_t>(p)].pid = 1000 + p;
        ids[static_cast<size_t>(p)].host = "host" + std::to_string(p);
        ids[static_cast<size_t>(p)].address = monitors[static_cast<size_t>(p)]->address();
      }
      EXPECT_TRUE(
          monitors[static_cast<size_t>(r)]
              ->start(std::move(ids), nullptr, [this, r](const Failure&) { ++sinkCalls[static_cast<size_t>(r)]; })
              .ok());
    }
  }
  HealthMonitor& operator[](int r) { return *monitors[static_cast<size_t>(r)]; }
  std::unique_ptr<std::atomic<int>[]> sinkCalls;  // declared first: the monitors' threads use it until destroyed
  std::vector<std::unique_ptr<HealthMonitor>> monitors;
};

bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit = 10s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

TEST(HealthMonitor, AReportedFailureReachesEverySurvivorOnceWithTheDetectorsRecord) {
  HealthOptions o;
  o.period = 50ms;
  o.misses = 100;  // no silence verdicts in this test
  Mesh mesh(4, o);
  ASSERT_TRUE(mesh[3].report(1, FailureReason::ConnectionLost, "closed", "AllReduce", 5));
  EXPECT_FALSE(mesh[3].report(1, FailureReason::ConnectionLost, "again", "AllReduce", 5)) << "deduplicated";
  for (int r : {0, 2, 3}) {
    ASSERT_TRUE(waitFor([&] { return mesh[r].failedCount() == 1; })) << "rank " << r << " never heard of it";
    const std::vector<Failure> fs = mesh[r].failures();
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].rank, 1);
    EXPECT_EQ(fs[0].detectedBy, 3);
    EXPECT_EQ(fs[0].reason, FailureReason::ConnectionLost);
    EXPECT_EQ(fs[0].host, "host1");
    EXPECT_EQ(fs[0].pid, 1001);
    EXPECT_EQ(fs[0].op, "AllReduce");
    EXPECT_EQ(fs[0].opSeq, 5u);
    // The monitor records the failure before it calls the sink, so under a slow build (TSan) the sink may lag.
    ASSERT_TRUE(waitFor([&] { return mesh.sinkCalls[static_cast<size_t>(r)].load() >= 1; })) << "rank " << r;
    EXPECT_EQ(mesh.sinkCalls[static_cast<size_t>(r)].load(), 1);
  }
  // A second report about another rank is dropped once a cause is known: the data path blames nobody else.
  EXPECT_FALSE(mesh[0].report(2, FailureReason::ConnectionLost, "closed", "AllReduce", 6));
}

TEST(HealthMonitor, ASilentPeerIsDeclaredHungByEveryOtherRank) {
  HealthOptions o;
  o.period = 20ms;
  o.misses = 25;  // live peers must not look hung on a loaded machine (at 4 misses, 80 ms, they did)
  Mesh mesh(3, o, /*silent=*/{2});
  for (int r : {0, 1}) {
    ASSERT_TRUE(waitFor([&] { return mesh[r].failedCount() >= 1; })) << "rank " << r;
    const Failure f = mesh[r].failures().front();
    EXPECT_EQ(f.rank, 2);
    EXPECT_EQ(f.reason, FailureReason::Hung);
  }
  EXPECT_EQ(mesh[0].failures().size(), 1u) << "the live ranks keep each other alive";
}

TEST(HealthMonitor, APeerThatLeftIsNotDeclaredHung) {
  HealthOptions o;
  o.period = 20ms;
  o.misses = 15;  // live peers must not look hung on a loaded machine
  Mesh mesh(3, o);
  mesh[2].stop();
  ASSERT_TRUE(waitFor([&] { return mesh[0].departed(2) && mesh[1].departed(2); }));
  std::this_thread::sleep_for(o.hungAfter() * 2);
  EXPECT_EQ(mesh[0].failedCount(), 0);
  EXPECT_EQ(mesh[1].failedCount(), 0);
  // Departed -> Failed when a transfer still needed it.
  EXPECT_TRUE(mesh[0].report(2, FailureReason::ConnectionLost, "closed", "Recv", 1));
}

TEST(HealthMonitor, GarbageDatagramsAreDroppedWithoutEffect) {
  HealthOptions o;
  o.period = 20ms;
  o.misses = 50;
  Mesh mesh(2, o);
  const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  const sockaddr_storage to = mesh[0].address();
  std::vector<uint8_t> junk(200, 0xee);
  for (int i = 0; i < 20; ++i) {
    (void)::sendto(s, junk.data(), junk.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(sockaddr_in));
  }
  ::close(s);
  mesh[0].pollNow();
  EXPECT_EQ(mesh[0].failedCount(), 0);
  EXPECT_FALSE(mesh[0].departed(1));
}

}  // namespace
}  // namespace cfx::ft
