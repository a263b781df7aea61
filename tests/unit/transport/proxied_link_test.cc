// SPDX-License-Identifier: Apache-2.0
// The proxied link shared by tcp and ucx: the ring protocol of its ends, where they offer the owner's thread to the
// link, and when they wake the proxy. A fake link plays the transport; the test plays its proxy.
#include "transport/link/proxied_link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "transport/owner_drive.h"

namespace cfx::transport::link {
namespace {

constexpr FifoGeometry kGeometry{.slotBytes = 128, .nSlots = 2};

// Records every moment an end offers and answers with `drives`.
class FakeLink final : public ProxiedLink {
 public:
  FakeLink(std::shared_ptr<ProxyWaker> waker, size_t room)
      : ProxiedLink(3, 1, "peer rank 3 (fake), channel 1", kGeometry, room, {std::move(waker)}, "fake") {}
  bool driveFromOwner(OwnerMoment moment) override {
    moments.push_back(moment);
    if (moment == OwnerMoment::SendFull && freeOnDrive) {
      sendRing().tail.store(sendRing().tail.load() + 1, std::memory_order_release);
    }
    return drives;
  }
  std::vector<OwnerMoment> moments;
  bool drives = false;
  bool freeOnDrive = false;
};

// Whether the waker was woken since the last call (reads its eventfd like a proxy would).
bool takeWake(ProxyWaker& waker) {
  uint64_t count = 0;
  const bool woken = ::read(waker.fd(), &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count));
  if (woken) waker.drain();
  return woken;
}

struct Rig {
  explicit Rig(size_t room = 0) : waker(*ProxyWaker::create("fake")), link(std::make_shared<FakeLink>(waker, room)) {}
  std::shared_ptr<ProxyWaker> waker;
  std::shared_ptr<FakeLink> link;
  ProxiedSendEnd send{link};
  ProxiedRecvEnd recv{link};

  // The owner: posts a one-byte message into every slot of the send ring.
  void fill() {
    for (int i = 0; i < kGeometry.nSlots; ++i) {
      ASSERT_NE(send.tryAcquire(), nullptr);
      send.post(1, 1);
    }
  }

  // The proxy: moves every posted send slot to the recv ring, as a loopback wire would.
  void loop() {
    SlotRing& out = link->sendRing();
    SlotRing& in = link->recvRing();
    const uint64_t posted = out.head.load(std::memory_order_acquire);
    for (uint64_t s = out.tail.load(); s < posted; ++s) {
      std::memcpy(in.slot(s), out.slot(s), out.header(s).bytes);
      in.header(s) = out.header(s);
    }
    out.tail.store(posted, std::memory_order_release);
    in.head.store(posted, std::memory_order_release);
  }
};

TEST(ProxiedLink, SlotsCarryBytesAndTagInOrder) {
  for (size_t room : {size_t{0}, size_t{64}}) {
    Rig rig(room);
    EXPECT_STREQ(rig.send.kind(), "fake");
    EXPECT_EQ(rig.send.slotBytes(), 128u);
    EXPECT_EQ(rig.send.nSlots(), 2);
    for (uint64_t i = 0; i < 5; ++i) {
      auto* slot = static_cast<uint8_t*>(rig.send.tryAcquire());
      ASSERT_NE(slot, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % 64, 0u) << "payloads stay cache-line aligned";
      std::memset(slot, static_cast<int>(0x40 + i), 10 + i);
      rig.send.post(10 + i, 0x1000 + i);
      rig.loop();
      size_t bytes = 0;
      uint64_t tag = 0;
      const auto* got = static_cast<const uint8_t*>(rig.recv.tryPeek(&bytes, &tag));
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(bytes, 10 + i);
      EXPECT_EQ(tag, 0x1000 + i);
      EXPECT_EQ(got[bytes - 1], 0x40 + i);
      rig.recv.release();
      EXPECT_EQ(rig.link->recvRing().tail.load(), i + 1);
    }
    size_t bytes = 0;
    uint64_t tag = 0;
    EXPECT_EQ(rig.recv.tryPeek(&bytes, &tag), nullptr);
  }
}

TEST(ProxiedLink, PostWakesTheProxyOnlyWhereTheOwnerDidNotDrive) {
  Rig rig;
  ASSERT_NE(rig.send.tryAcquire(), nullptr);
  rig.send.post(1, 1);
  EXPECT_TRUE(takeWake(*rig.waker));
  rig.link->drives = true;
  ASSERT_NE(rig.send.tryAcquire(), nullptr);
  rig.send.post(1, 2);
  EXPECT_FALSE(takeWake(*rig.waker));
  EXPECT_EQ(rig.link->moments, (std::vector<OwnerMoment>{OwnerMoment::Posted, OwnerMoment::Posted}));
}

TEST(ProxiedLink, AFullSendRingAsksTheLinkEveryFewPolls) {
  Rig rig;
  rig.fill();
  rig.link->moments.clear();
  for (uint32_t i = 1; i < kInlinePollEvery; ++i) EXPECT_EQ(rig.send.tryAcquire(), nullptr);
  EXPECT_TRUE(rig.link->moments.empty());
  // The drive frees a slot: the same poll hands it out.
  rig.link->drives = true;
  rig.link->freeOnDrive = true;
  EXPECT_NE(rig.send.tryAcquire(), nullptr);
  EXPECT_EQ(rig.link->moments, std::vector<OwnerMoment>{OwnerMoment::SendFull});
}

TEST(ProxiedLink, AnEmptyRecvRingAsksTheLinkEveryFewPolls) {
  Rig rig;
  size_t bytes = 0;
  uint64_t tag = 0;
  for (uint32_t i = 0; i < 2 * kInlinePollEvery; ++i) EXPECT_EQ(rig.recv.tryPeek(&bytes, &tag), nullptr);
  EXPECT_EQ(rig.link->moments, (std::vector<OwnerMoment>{OwnerMoment::RecvEmpty, OwnerMoment::RecvEmpty}));
}

TEST(ProxiedLink, ReleaseSaysWhetherTheRingWasFull) {
  Rig rig;
  rig.fill();
  rig.loop();
  rig.link->moments.clear();
  size_t bytes = 0;
  uint64_t tag = 0;
  for (int i = 0; i < kGeometry.nSlots; ++i) {
    ASSERT_NE(rig.recv.tryPeek(&bytes, &tag), nullptr);
    rig.recv.release();
  }
  EXPECT_EQ(rig.link->moments, (std::vector<OwnerMoment>{OwnerMoment::ReleasedFull, OwnerMoment::Released}));
  EXPECT_TRUE(takeWake(*rig.waker));
}

TEST(ProxiedLink, PostFromCopiesWhereTheLinkCannotSendFromTheCaller) {
  Rig rig;
  EXPECT_FALSE(rig.send.sendsFromCaller());
  const char text[] = "conflux";
  ASSERT_NE(rig.send.tryAcquire(), nullptr);
  rig.send.postFrom(text, sizeof(text), 7);
  rig.loop();
  size_t bytes = 0;
  uint64_t tag = 0;
  const void* got = rig.recv.tryPeek(&bytes, &tag);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(bytes, sizeof(text));
  EXPECT_EQ(tag, 7u);
  EXPECT_STREQ(static_cast<const char*>(got), text);
}

TEST(ProxiedLink, TheFirstFailureWinsAndNamesThePeer) {
  Rig rig;
  EXPECT_TRUE(rig.send.check().ok());
  rig.link->failLocally(/*aborted=*/true);
  rig.link->failLocally(/*aborted=*/false);
  const Status st = rig.recv.check();
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_EQ(st.message(), "fake: connection to peer rank 3 (fake), channel 1 was aborted by this rank");
  Rig closed;
  closed.link->failLocally(/*aborted=*/false);
  EXPECT_EQ(closed.send.check().message(),
            "fake: connection to peer rank 3 (fake), channel 1 was closed by this rank (transport destroyed)");
}

TEST(ProxiedLink, EndsGoWhereNoOtherTransportHasOne) {
  Rig rig;
  Endpoints out;
  out.resize(4);
  const std::vector<bool> connect{true, false, true, true};
  EXPECT_TRUE(checkEndsFree("fake", 0, 4, 4, connect, out).ok());
  addEnds(rig.link, out);
  ASSERT_NE(out.send[1][3], nullptr);
  ASSERT_NE(out.recv[1][3], nullptr);
  EXPECT_STREQ(out.send[1][3]->kind(), "fake");
  const Status st = checkEndsFree("fake", 0, 4, 4, connect, out);
  EXPECT_EQ(st.code(), Errc::InvalidArgument);
  EXPECT_EQ(st.message(), "fake: channel 1 to rank 3 already has an end of another transport");
  // Rank 3 itself, or a peer it does not connect, is never in the way.
  EXPECT_TRUE(checkEndsFree("fake", 3, 4, 4, connect, out).ok());
  EXPECT_TRUE(checkEndsFree("fake", 0, 4, 4, {true, false, true, false}, out).ok());
  // A peer table or a mask that is not one entry per rank is refused before any end is looked at.
  EXPECT_EQ(checkEndsFree("fake", 0, 4, 3, connect, out).message(), "fake: 3 peer infos and a mask of 4 for 4 ranks");
  EXPECT_EQ(checkEndsFree("fake", 0, 4, 4, {true, true}, out).code(), Errc::InvalidArgument);
}

}  // namespace
}  // namespace cfx::transport::link
