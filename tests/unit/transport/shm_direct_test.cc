// SPDX-License-Identifier: Apache-2.0
// Direct (single-copy) transfers over the shm transport, with ranks as threads of one process: agreement at init,
// the DirectRegion slot protocol of the ends, and every verb pair that may send or receive a direct message.
// Cross-process reads (process_vm_readv) are covered by tests/integration/direct_copy_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "primitives/executor.h"
#include "primitives/prims.h"
#include "transport/shm/shm_transport.h"

namespace cfx::transport::shm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class FakeWorld {
 public:
  explicit FakeWorld(int nRanks) : parts_(static_cast<size_t>(nRanks)), sync_(nRanks) {}
  int nRanks() const { return static_cast<int>(parts_.size()); }
  Status allGather(int rank, void* data, size_t bytesPerRank) {
    auto* bytes = static_cast<uint8_t*>(data);
    const uint8_t* mine = bytes + static_cast<size_t>(rank) * bytesPerRank;
    parts_[static_cast<size_t>(rank)].assign(mine, mine + bytesPerRank);
    sync_.arrive_and_wait();
    for (int r = 0; r < nRanks(); ++r) {
      std::memcpy(bytes + static_cast<size_t>(r) * bytesPerRank, parts_[static_cast<size_t>(r)].data(), bytesPerRank);
    }
    sync_.arrive_and_wait();
    return Status();
  }
  void barrier() { sync_.arrive_and_wait(); }

 private:
  std::vector<std::vector<uint8_t>> parts_;
  std::barrier<> sync_;
};

class FakeBootstrap final : public Bootstrap {
 public:
  FakeBootstrap(FakeWorld& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int nRanks() const override { return world_.nRanks(); }
  const Secret& secret() const override { return secret_; }
  bool authenticated() const override { return true; }
  const sockaddr_storage& localAddress() const override { return address_; }
  Status allGather(void* data, size_t bytesPerRank) override { return world_.allGather(rank_, data, bytesPerRank); }
  Status barrier() override {
    world_.barrier();
    return Status();
  }
  Status send(int, uint64_t, const void*, size_t) override { return Status::error(Errc::InternalError, "unused"); }
  Status recv(int, uint64_t, void*, size_t) override { return Status::error(Errc::InternalError, "unused"); }
  Status recv(int, uint64_t, void*, size_t, const std::function<Status()>&) override {
    return Status::error(Errc::InternalError, "unused");
  }
  void setPeerWatch(std::function<Status(int)>) override {}
  void abort() override {}

 private:
  FakeWorld& world_;
  int rank_;
  Secret secret_{};
  sockaddr_storage address_{};
};

// Counts the slots a SendEnd posts, to tell a direct message (one slot) from a sliced one.
class CountingSendEnd final : public SendEnd {
 public:
  explicit CountingSendEnd(std::unique_ptr<SendEnd> inner) : inner_(std::move(inner)) {}
  void* tryAcquire() override { return inner_->tryAcquire(); }
  void post(size_t bytes, uint64_t tag) override {
    ++posts;
    if (tag & kDirectTagFlag) ++directPosts;
    inner_->post(bytes, tag);
  }
  size_t slotBytes() const override { return inner_->slotBytes(); }
  int nSlots() const override { return inner_->nSlots(); }
  Status check() override { return inner_->check(); }
  const char* kind() const override { return inner_->kind(); }
  size_t directThreshold() const override { return inner_->directThreshold(); }
  bool drained() override { return inner_->drained(); }
  int posts = 0;
  int directPosts = 0;

 private:
  std::unique_ptr<SendEnd> inner_;
};

constexpr size_t kSlot = 4096;
constexpr int kSlots = 4;  // a FIFO holds 16 KiB: larger messages may go direct

ShmOptions directOptions(size_t threshold = 1, bool direct = true) {
  ShmOptions options;
  options.geometry = FifoGeometry{.slotBytes = kSlot, .nSlots = kSlots};
  options.segmentPrefix = "cfxdt" + std::to_string(::getpid());
  options.direct = direct ? ShmOptions::Direct::Always : ShmOptions::Direct::Off;
  options.directThresholdBytes = threshold;
  return options;
}

struct Job {
  std::vector<std::unique_ptr<ShmTransport>> transports;
  std::vector<Endpoints> ends;
  std::vector<Status> statuses;
};

Job createAll(int n, const std::function<ShmOptions(int)>& optionsFor) {
  std::vector<PeerInfo> peers(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    peers[static_cast<size_t>(r)].rank = r;
    peers[static_cast<size_t>(r)].pid = ::getpid();
    peers[static_cast<size_t>(r)].hostHash = 7;
  }
  FakeWorld world(n);
  Job job;
  job.transports.resize(static_cast<size_t>(n));
  job.ends.resize(static_cast<size_t>(n));
  job.statuses.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      FakeBootstrap bootstrap(world, r);
      auto created = ShmTransport::create(bootstrap, peers, optionsFor(r), job.ends[static_cast<size_t>(r)]);
      if (created.ok()) job.transports[static_cast<size_t>(r)] = std::move(created).value();
      else job.statuses[static_cast<size_t>(r)] = std::move(created).status();
    });
  }
  for (auto& t : threads) t.join();
  return job;
}

// Wraps every collective-channel send end of every rank in a CountingSendEnd.
std::vector<std::vector<CountingSendEnd*>> countSends(Job& job) {
  const size_t n = job.ends.size();
  std::vector<std::vector<CountingSendEnd*>> counters(n, std::vector<CountingSendEnd*>(n, nullptr));
  for (size_t r = 0; r < n; ++r) {
    for (size_t p = 0; p < n; ++p) {
      auto& end = job.ends[r].send[kCollChannel][p];
      if (!end) continue;
      auto wrapped = std::make_unique<CountingSendEnd>(std::move(end));
      counters[r][p] = wrapped.get();
      end = std::move(wrapped);
    }
  }
  return counters;
}

// Runs body(rank, prims) as one Work per rank, one thread per rank; returns each rank's Status.
std::vector<Status> runVerbs(Job& job, const std::function<prims::Coro(int, prims::Prims&)>& body,
                             std::chrono::milliseconds timeout = 20s) {
  const int n = static_cast<int>(job.ends.size());
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      prims::Prims prims(job.ends[static_cast<size_t>(r)], kCollChannel, r, n, kSlot);
      prims.setOpSeq(5);
      prims::Work work;
      work.task = body(r, prims);
      std::vector<prims::Work*> works{&work};
      prims::ExecOptions eo;
      eo.doorbell = &job.transports[static_cast<size_t>(r)]->doorbell();
      eo.spins = 50;
      eo.timeout = timeout;
      out[static_cast<size_t>(r)] = prims::execute(works, eo);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<float> pattern(size_t count, float seed) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = seed + static_cast<float>(i % 1000);
  return v;
}

void expectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
}

TEST(ShmDirect, RanksAgreeOnTheLargestThreshold) {
  const std::vector<size_t> asked{1000, 5000, 3000};
  Job job = createAll(3, [&](int r) { return directOptions(asked[static_cast<size_t>(r)]); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(job.statuses[static_cast<size_t>(r)].ok()) << job.statuses[static_cast<size_t>(r)].message();
    EXPECT_EQ(job.transports[static_cast<size_t>(r)]->directThreshold(), 5000u);
    for (int p = 0; p < 3; ++p) {
      if (p == r) continue;
      EXPECT_TRUE(job.transports[static_cast<size_t>(r)]->direct(r, p));
      for (int ch = 0; ch < kNumChannels; ++ch) {
        EXPECT_EQ(job.ends[static_cast<size_t>(r)].send[ch][static_cast<size_t>(p)]->directThreshold(), 5000u);
      }
    }
  }
}

TEST(ShmDirect, ARankThatOptsOutTurnsItOffForItsPairsOnly) {
  Job job = createAll(3, [](int r) { return directOptions(1, /*direct=*/r != 1); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(job.statuses[static_cast<size_t>(r)].ok());
    const ShmTransport& t = *job.transports[static_cast<size_t>(r)];
    EXPECT_FALSE(t.direct(0, 1));
    EXPECT_FALSE(t.direct(1, 2));
    EXPECT_TRUE(t.direct(0, 2));
  }
  EXPECT_EQ(job.ends[0].send[kCollChannel][1]->directThreshold(), 0u);
  EXPECT_EQ(job.ends[1].send[kCollChannel][0]->directThreshold(), 0u);
  EXPECT_EQ(job.ends[0].send[kCollChannel][2]->directThreshold(), 1u);

  Job off = createAll(2, [](int) { return directOptions(1, false); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(off.transports[static_cast<size_t>(r)]->directThreshold(), 0u);
}

TEST(ShmDirect, SlotProtocolReadThenReleaseDrains) {
  Job job = createAll(2, [](int) { return directOptions(); });
  ASSERT_TRUE(job.statuses[0].ok() && job.statuses[1].ok());
  SendEnd& send = *job.ends[0].send[kCollChannel][1];
  RecvEnd& recv = *job.ends[1].recv[kCollChannel][0];
  std::vector<uint8_t> src(100000);
  std::iota(src.begin(), src.end(), uint8_t{3});
  EXPECT_TRUE(send.drained());

  DirectRegion region;
  region.magic = kDirectMagic;
  region.address = reinterpret_cast<uintptr_t>(src.data());
  region.bytes = src.size();
  region.pid = ::getpid();
  void* slot = send.tryAcquire();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, &region, sizeof(region));
  send.post(sizeof(region), 42 | kDirectTagFlag);
  EXPECT_FALSE(send.drained());

  size_t bytes = 0;
  uint64_t tag = 0;
  const void* in = recv.tryPeek(&bytes, &tag);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(bytes, sizeof(DirectRegion));
  EXPECT_EQ(tag, 42 | kDirectTagFlag);
  DirectRegion got;
  std::memcpy(&got, in, sizeof(got));
  std::vector<uint8_t> dst(src.size());
  ASSERT_TRUE(recv.readDirect(got, 0, dst.data(), 60000).ok());
  ASSERT_TRUE(recv.readDirect(got, 60000, dst.data() + 60000, 40000).ok());
  EXPECT_EQ(dst, src);

  // Out of bounds, or another process: refused, nothing read.
  EXPECT_EQ(recv.readDirect(got, 60000, dst.data(), 40001).code(), Errc::RemoteError);
  DirectRegion other = got;
  other.pid = ::getpid() + 1;
  EXPECT_EQ(recv.readDirect(other, 0, dst.data(), 1).code(), Errc::RemoteError);

  EXPECT_FALSE(send.drained());
  recv.release();
  EXPECT_TRUE(send.drained());
}

TEST(ShmDirect, EndsWithoutDirectRefuseARegion) {
  Job job = createAll(2, [](int) { return directOptions(1, false); });
  ASSERT_TRUE(job.statuses[0].ok() && job.statuses[1].ok());
  DirectRegion region;
  region.magic = kDirectMagic;
  region.bytes = 1;
  region.pid = ::getpid();
  char byte = 0;
  region.address = reinterpret_cast<uintptr_t>(&byte);
  char out = 1;
  EXPECT_EQ(job.ends[1].recv[kCollChannel][0]->readDirect(region, 0, &out, 1).code(), Errc::RemoteError);
}

TEST(ShmDirect, SendToRecvIsOneSlot) {
  Job job = createAll(2, [](int) { return directOptions(); });
  auto counts = countSends(job);
  const size_t bytes = (size_t{3} << 20) + 12;  // several read pieces, not a multiple of anything
  std::vector<uint8_t> src(bytes), dst(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  auto statuses = runVerbs(job, [&](int r, prims::Prims& p) -> prims::Coro {
    if (r == 0) co_return co_await p.send(1, src.data(), bytes);
    co_return co_await p.recv(0, dst.data(), bytes);
  });
  expectAllOk(statuses);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(counts[0][1]->posts, 1);
  EXPECT_EQ(counts[0][1]->directPosts, 1);
}

TEST(ShmDirect, SmallMessagesAndMessagesBelowTheThresholdUseSlices) {
  Job job = createAll(2, [](int) { return directOptions(64 * 1024); });
  auto counts = countSends(job);
  const size_t small = 3 * kSlot;   // fits in the FIFO
  const size_t below = 40 * 1024;   // larger than the FIFO, below the threshold
  std::vector<uint8_t> a(small, 7), b(below, 9), ra(small), rb(below);
  auto statuses = runVerbs(job, [&](int r, prims::Prims& p) -> prims::Coro {
    if (r == 0) {
      CFX_CO_TRY(co_await p.send(1, a.data(), small));
      co_return co_await p.send(1, b.data(), below);
    }
    CFX_CO_TRY(co_await p.recv(0, ra.data(), small));
    co_return co_await p.recv(0, rb.data(), below);
  });
  expectAllOk(statuses);
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
  EXPECT_EQ(counts[0][1]->directPosts, 0);
  EXPECT_EQ(counts[0][1]->posts, 3 + 10);
}

TEST(ShmDirect, ChainForwardsItsOwnDestination) {
  Job job = createAll(4, [](int) { return directOptions(); });
  auto counts = countSends(job);
  const size_t bytes = size_t{1} << 20;
  std::vector<std::vector<uint8_t>> buf(4, std::vector<uint8_t>(bytes, 0));
  for (size_t i = 0; i < bytes; ++i) buf[0][i] = static_cast<uint8_t>(i * 7 + 5);
  std::vector<uint8_t> forwarded(bytes, 0);
  auto statuses = runVerbs(job, [&](int r, prims::Prims& p) -> prims::Coro {
    switch (r) {
      case 0: co_return co_await p.send(1, buf[0].data(), bytes);
      case 1: co_return co_await p.recvCopySend(0, 2, buf[1].data(), bytes);   // direct in, direct out
      case 2: co_return co_await p.recvCopySend(1, 3, nullptr, bytes);         // pure forward: slices out
      default: co_return co_await p.recv(2, buf[3].data(), bytes);
    }
  });
  expectAllOk(statuses);
  EXPECT_EQ(buf[1], buf[0]);
  EXPECT_EQ(buf[3], buf[0]);
  EXPECT_EQ(counts[0][1]->directPosts, 1);
  EXPECT_EQ(counts[1][2]->directPosts, 1);
  EXPECT_EQ(counts[2][3]->directPosts, 0);
  EXPECT_EQ(counts[2][3]->posts, static_cast<int>(bytes / kSlot));
}

TEST(ShmDirect, ReducingVerbsReduceFromARemoteRegion) {
  Job job = createAll(4, [](int) { return directOptions(); });
  auto counts = countSends(job);
  const size_t count = (size_t{600} << 10) / sizeof(float) + 3;  // several scratch pieces, odd tail
  const size_t bytes = count * sizeof(float);
  const ReduceOp sum = ReduceOp::builtin(DataType::Float32, RedOpKind::Sum, 4);
  std::vector<std::vector<float>> in;
  for (int r = 0; r < 4; ++r) in.push_back(pattern(count, static_cast<float>(r + 1)));
  std::vector<float> out1(count), out2(count), out3(count);
  // 0 --Send--> 1 --RecvReduceCopySend (direct out)--> 2 --RecvReduceSend (slices)--> 3 RecvReduceCopy
  auto statuses = runVerbs(job, [&](int r, prims::Prims& p) -> prims::Coro {
    switch (r) {
      case 0: co_return co_await p.sendPre(1, in[0].data(), count, sum);
      case 1: co_return co_await p.recvReduceCopySend(0, 2, in[1].data(), out1.data(), count, sum, false);
      case 2: co_return co_await p.recvReduceSend(1, 3, in[2].data(), count, sum);
      default: co_return co_await p.recvReduceCopy(2, in[3].data(), out3.data(), count, sum, true);
    }
  });
  expectAllOk(statuses);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(out1[i], in[0][i] + in[1][i]) << i;
    ASSERT_EQ(out3[i], in[0][i] + in[1][i] + in[2][i] + in[3][i]) << i;
  }
  EXPECT_EQ(counts[0][1]->directPosts, 1);
  EXPECT_EQ(counts[1][2]->directPosts, 1);
  EXPECT_EQ(counts[2][3]->directPosts, 0);
  (void)bytes;
  (void)out2;
}

TEST(ShmDirect, SizeMismatchOnADirectSlotIsNamed) {
  Job job = createAll(2, [](int) { return directOptions(); });
  const size_t bytes = size_t{1} << 20;
  std::vector<uint8_t> src(bytes, 1), dst(bytes / 2);
  auto statuses = runVerbs(
      job,
      [&](int r, prims::Prims& p) -> prims::Coro {
        if (r == 0) co_return co_await p.send(1, src.data(), bytes);
        co_return co_await p.recv(0, dst.data(), bytes / 2);
      },
      1500ms);
  EXPECT_EQ(statuses[1].code(), Errc::InvalidUsage);
  EXPECT_THAT(statuses[1].message(), HasSubstr("direct slot"));
  EXPECT_EQ(statuses[0].code(), Errc::Timeout);  // the sender still waits for its region to be read
  EXPECT_THAT(statuses[0].message(), HasSubstr("directly"));
}

}  // namespace
}  // namespace cfx::transport::shm
