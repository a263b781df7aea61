// SPDX-License-Identifier: Apache-2.0
// Unit tests for the shm transport's building blocks: segment layout, POSIX segment RAII and errors, process
// liveness probes, and the knobs.
#include "transport/shm/shm_layout.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/param.h"
#include "transport/shm/shm_peer.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_transport.h"

namespace cfx::transport::shm {
namespace {

using ::testing::HasSubstr;

std::string testPrefix() { return "cfxlt" + std::to_string(::getpid()); }

// A segment name of this test process. Built by appending: GCC 12 at -O3 reports a bogus -Wstringop-overflow
// inside libstdc++ for `"/" + std::string(...)` when GoogleTest comes precompiled.
std::string segmentName(const char* suffix) {
  std::string name = "/";
  name += testPrefix();
  name += suffix;
  return name;
}

std::vector<std::string> devShmEntries(const std::string& prefix) {
  std::vector<std::string> found;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  return found;
}

// Page-aligned, zero-filled memory standing in for a mapped segment.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : bytes(n), data(std::aligned_alloc(kFifoAlign, n)) { std::memset(data, 0, n); }
  ~AlignedBuffer() { std::free(data); }
  size_t bytes;
  void* data;
};

TEST(ShmLayout, FifosArePageAlignedDisjointAndInsideTheSegment) {
  const FifoGeometry g{.slotBytes = 4096, .nSlots = 5};
  const std::vector<bool> incoming{true, false, true, true};
  const SegmentLayout layout = computeLayout(4, g, incoming);

  EXPECT_GE(layout.directoryOffset, sizeof(SegmentHeader));
  EXPECT_EQ(layout.fifoBytes % kFifoAlign, 0u);
  EXPECT_GE(layout.fifoBytes, sizeof(FifoControl) + 5 * sizeof(SlotDescriptor) + 5 * 4096u);
  std::vector<uint64_t> used;
  for (int ch = 0; ch < kNumChannels; ++ch) {
    for (int sender = 0; sender < 4; ++sender) {
      const uint64_t offset = layout.fifoOffsets[static_cast<size_t>(ch * 4 + sender)];
      EXPECT_EQ(offset != 0, static_cast<bool>(incoming[static_cast<size_t>(sender)]));
      if (offset == 0) continue;
      EXPECT_EQ(offset % kFifoAlign, 0u);
      EXPECT_GE(offset, layout.directoryOffset + layout.fifoOffsets.size() * sizeof(uint64_t));
      EXPECT_LE(offset + layout.fifoBytes, layout.totalBytes);
      used.push_back(offset);
    }
  }
  ASSERT_EQ(used.size(), 6u);
  for (size_t i = 1; i < used.size(); ++i) EXPECT_GE(used[i], used[i - 1] + layout.fifoBytes);
}

TEST(ShmLayout, CountersDescriptorsAndSlotsDoNotShareCacheLines) {
  const FifoGeometry g{.slotBytes = 192, .nSlots = 3};
  const SegmentLayout layout = computeLayout(2, g, {false, true});
  AlignedBuffer buf(layout.totalBytes);
  initSegment(buf.data, layout, 0, 2, g, ProcessIdentity{});
  const FifoView fifo = fifoAt(buf.data, layout.fifoOffsets[1], g.nSlots);

  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  EXPECT_EQ(addr(&fifo.control->tail) - addr(&fifo.control->head), kCounterBlock);
  EXPECT_GE(addr(fifo.descriptors), addr(&fifo.control->tail) + kCounterBlock);
  EXPECT_EQ(addr(&fifo.descriptors[1]) - addr(&fifo.descriptors[0]), kSlotAlign);
  EXPECT_GE(addr(fifo.slots), addr(&fifo.descriptors[g.nSlots]));
  EXPECT_EQ(addr(fifo.slots) % kSlotAlign, 0u);
  EXPECT_EQ(fifo.control->head.load(), 0u);
  EXPECT_EQ(fifo.control->tail.load(), 0u);
}

TEST(ShmLayout, RankWithoutLocalPeersNeedsOnlyHeaderAndDirectory) {
  const SegmentLayout layout = computeLayout(3, FifoGeometry{}, {false, false, false});
  for (uint64_t offset : layout.fifoOffsets) EXPECT_EQ(offset, 0u);
  EXPECT_LE(layout.totalBytes, 2 * kHeaderBytes);
}

// Bytes the FIFOs of a host of n ranks take with geometry g.
size_t hostFifoBytes(int n, const FifoGeometry& g) {
  return static_cast<size_t>(n) * static_cast<size_t>(n - 1) * static_cast<size_t>(kNumChannels) * fifoBytes(g);
}

TEST(ShmScaledGeometry, FewRanksKeepTheConfiguredFifos) {
  const FifoGeometry configured{};  // 8 x 128 KiB
  for (int n : {1, 2, 4, 8, 11}) {
    const FifoGeometry g = scaledGeometry(configured, n, kDefaultHostBytes);
    EXPECT_EQ(g.slotBytes, configured.slotBytes) << n;
    EXPECT_EQ(g.nSlots, configured.nSlots) << n;
  }
  const FifoGeometry unbounded = scaledGeometry(configured, 64, 0);
  EXPECT_EQ(unbounded.slotBytes, configured.slotBytes);
  EXPECT_EQ(unbounded.nSlots, configured.nSlots);
}

TEST(ShmScaledGeometry, ManyRanksShrinkSlotsThenSlotCountWithinTheHostBound) {
  const FifoGeometry configured{};
  const FifoGeometry at64 = scaledGeometry(configured, 64, kDefaultHostBytes);
  EXPECT_EQ(at64.nSlots, 8);
  EXPECT_EQ(at64.slotBytes, 3968u);
  const FifoGeometry at128 = scaledGeometry(configured, 128, kDefaultHostBytes);
  EXPECT_EQ(at128.nSlots, 2);
  EXPECT_EQ(at128.slotBytes, 3904u);
  EXPECT_EQ(fifoBytes(at128), kMinScaledFifoBytes);
  // The documented bound: max(hostBytes, n(n-1) kNumChannels kMinScaledFifoBytes), for every n, and slots that
  // stay usable (a positive multiple of 64, at least two).
  for (int n = 2; n <= 300; ++n) {
    const FifoGeometry g = scaledGeometry(configured, n, kDefaultHostBytes);
    const size_t floor = hostFifoBytes(n, FifoGeometry{.slotBytes = 3904, .nSlots = 2});
    EXPECT_LE(hostFifoBytes(n, g), std::max(kDefaultHostBytes, floor)) << n;
    EXPECT_GE(g.nSlots, 2) << n;
    EXPECT_GT(g.slotBytes, 0u) << n;
    EXPECT_EQ(g.slotBytes % kSlotAlign, 0u) << n;
    EXPECT_LE(g.slotBytes, configured.slotBytes) << n;
  }
}

class ShmValidate : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = computeLayout(3, geometry_, {true, false, true});
    buf_ = std::make_unique<AlignedBuffer>(layout_.totalBytes);
    header_ = initSegment(buf_->data, layout_, 1, 3, geometry_, ProcessIdentity{.pid = 42});
  }
  Status validate(int sender) {
    return validateSegment(buf_->data, layout_.totalBytes, 1, 3, geometry_, sender, &offsets_);
  }

  FifoGeometry geometry_{.slotBytes = 1024, .nSlots = 4};
  SegmentLayout layout_;
  std::unique_ptr<AlignedBuffer> buf_;
  SegmentHeader* header_ = nullptr;
  std::vector<uint64_t> offsets_;
};

TEST_F(ShmValidate, AcceptsAWellFormedSegmentAndFindsTheSendersFifos) {
  ASSERT_TRUE(validate(2).ok()) << validate(2).message();
  ASSERT_EQ(offsets_.size(), static_cast<size_t>(kNumChannels));
  EXPECT_EQ(offsets_[0], layout_.fifoOffsets[0 * 3 + 2]);
  EXPECT_EQ(offsets_[1], layout_.fifoOffsets[1 * 3 + 2]);
  ASSERT_TRUE(validate(1).ok());
  EXPECT_EQ(offsets_[0], 0u);  // no FIFO from a rank that is not an incoming peer
  EXPECT_EQ(header_->pid, 42);
}

TEST_F(ShmValidate, RejectsAnotherFormatVersion) {
  header_->version = kLayoutVersion + 1;
  const Status st = validate(0);
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("same Conflux build"));
}

TEST_F(ShmValidate, RejectsAnotherGeometry) {
  geometry_.nSlots = 8;
  const Status st = validate(0);
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("CFX_SHM_SLOTS"));
}

TEST_F(ShmValidate, RejectsAFifoOffsetOutsideTheSegment) {
  auto* directory = reinterpret_cast<uint64_t*>(static_cast<char*>(buf_->data) + header_->directoryOffset);
  directory[0] = layout_.totalBytes;  // channel 0, sender 0
  EXPECT_EQ(validate(0).code(), Errc::InternalError);
}

TEST_F(ShmValidate, RejectsASegmentOfAnotherRank) {
  header_->rank = 2;
  EXPECT_EQ(validate(0).code(), Errc::InternalError);
}

TEST(ShmSegment, CreatedSegmentIsSharedWithOpenersUntilUnlinked) {
  const std::string prefix = testPrefix();
  const std::string name = "/" + prefix + "-share";
  auto created = ShmSegment::create(name, 8192);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_EQ(devShmEntries(prefix).size(), 1u);

  auto opened = ShmSegment::open(name, 8192);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  static_cast<char*>(created.value()->data())[100] = 'x';
  EXPECT_EQ(static_cast<char*>(opened.value()->data())[100], 'x');
  EXPECT_EQ(static_cast<char*>(opened.value()->data())[8191], 0);  // zero-filled

  ASSERT_TRUE(created.value()->unlink().ok());
  EXPECT_TRUE(devShmEntries(prefix).empty());
  static_cast<char*>(opened.value()->data())[200] = 'y';  // still mapped in both
  EXPECT_EQ(static_cast<char*>(created.value()->data())[200], 'y');
}

TEST(ShmSegment, DestructorRemovesTheNameIfNobodyUnlinkedIt) {
  const std::string prefix = testPrefix();
  {
    auto created = ShmSegment::create("/" + prefix + "-dtor", 4096);
    ASSERT_TRUE(created.ok()) << created.status().message();
    EXPECT_EQ(devShmEntries(prefix).size(), 1u);
  }
  EXPECT_TRUE(devShmEntries(prefix).empty());
}

TEST(ShmSegment, OpenReportsAMissingSegmentWithItsErrno) {
  int openErrno = 0;
  auto opened = ShmSegment::open(segmentName("-missing"), 4096, &openErrno);
  EXPECT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), Errc::SystemError);
  EXPECT_EQ(openErrno, ENOENT);
  EXPECT_THAT(opened.status().message(), HasSubstr("-missing"));
}

TEST(ShmSegment, OpenRejectsASizeOtherThanAnnounced) {
  const std::string name = segmentName("-size");
  auto created = ShmSegment::create(name, 4096);
  ASSERT_TRUE(created.ok());
  auto opened = ShmSegment::open(name, 8192);
  EXPECT_FALSE(opened.ok());
}

TEST(ShmSegment, CreateRefusesAnExistingName) {
  const std::string name = segmentName("-excl");
  auto first = ShmSegment::create(name, 4096);
  ASSERT_TRUE(first.ok());
  auto second = ShmSegment::create(name, 4096);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Errc::SystemError);
  EXPECT_THAT(second.status().message(), HasSubstr(name));
  EXPECT_THAT(second.status().message(), HasSubstr("NCCL_SHM_DISABLE=1"));
  EXPECT_TRUE(first.value()->linked());  // the failed attempt did not remove the first one's name
}

TEST(ShmSegment, FullDevShmIsASystemErrorWithSizeAndHintAndLeavesNothingBehind) {
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs("/dev/shm", &vfs), 0);
  if (vfs.f_blocks == 0) GTEST_SKIP() << "/dev/shm has no size limit here, so it cannot be overfilled safely";
  const std::string prefix = testPrefix();
  const size_t tooBig = static_cast<size_t>(vfs.f_blocks) * vfs.f_frsize * 2;
  auto created = ShmSegment::create("/" + prefix + "-full", tooBig);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), Errc::SystemError);
  EXPECT_THAT(created.status().message(), HasSubstr(std::to_string(tooBig)));
  EXPECT_THAT(created.status().message(), HasSubstr("-full"));
  EXPECT_THAT(created.status().message(), HasSubstr("NCCL_SHM_DISABLE=1"));
  EXPECT_THAT(created.status().message(), HasSubstr("/dev/shm"));
  EXPECT_TRUE(devShmEntries(prefix).empty());
}

TEST(ShmSegment, SweepRemovesOnlyTheSegmentsOfDeadCreators) {
  const std::string prefix = testPrefix();
  auto alive = ShmSegment::create("/" + prefix + "-alive", 4096);
  ASSERT_TRUE(alive.ok()) << alive.status().message();
  // A creator killed while its name exists, as SIGKILL during communicator setup leaves it.
  const pid_t child = ::fork();
  if (child == 0) {
    auto orphan = ShmSegment::create("/" + prefix + "-orphan", 4096);
    if (!orphan.ok()) ::_exit(1);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child could not create its segment";
  ASSERT_EQ(devShmEntries(prefix).size(), 2u);

  // Young stale names are left alone: their creator may be between creating the name and locking it.
  EXPECT_EQ(ShmSegment::sweepStale(prefix, std::chrono::hours(1)), 0);
  EXPECT_EQ(devShmEntries(prefix).size(), 2u);

  EXPECT_EQ(ShmSegment::sweepStale(prefix, std::chrono::milliseconds(0)), 1);
  EXPECT_EQ(devShmEntries(prefix), std::vector<std::string>{prefix + "-alive"});
  EXPECT_TRUE(alive.value()->linked());
  EXPECT_TRUE(alive.value()->unlink().ok());
  EXPECT_TRUE(devShmEntries(prefix).empty());
}

TEST(ShmSegment, AnonymousSegmentIsZeroFilledAndHasNoName) {
  auto segment = ShmSegment::createAnonymous(3 * 4096);
  ASSERT_TRUE(segment.ok());
  EXPECT_TRUE(segment.value()->name().empty());
  EXPECT_FALSE(segment.value()->linked());
  EXPECT_EQ(static_cast<char*>(segment.value()->data())[3 * 4096 - 1], 0);
  EXPECT_TRUE(segment.value()->unlink().ok());
}

TEST(ShmProcessProbe, ThisProcessIsAlive) {
  const ProcessIdentity self = selfIdentity();
  EXPECT_EQ(self.pid, ::getpid());
  EXPECT_EQ(probeProcess(self.pid, self.startTime), ProcessState::Alive);
}

TEST(ShmProcessProbe, AZombieAndAReapedChildHaveExited) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  // Wait for the exit but leave the child a zombie: kill(pid, 0) still succeeds on it.
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(probeProcess(child, 0), ProcessState::Exited);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_EQ(probeProcess(child, 0), ProcessState::Exited);
}

TEST(ShmProcessProbe, AReusedPidCountsAsExited) {
  const ProcessIdentity self = selfIdentity();
  if (self.startTime == 0) GTEST_SKIP() << "/proc/self/stat is not readable here";
  EXPECT_EQ(probeProcess(self.pid, self.startTime + 1), ProcessState::Exited);
}

TEST(ShmKnobs, AreRegisteredWithHelpAndValidDefaults) {
  for (const char* name : {"NCCL_SHM_DISABLE", "CFX_SHM_SLOT_BYTES", "CFX_SHM_SLOTS"}) {
    const param::ParamBase* found = nullptr;
    for (const param::ParamBase* p : param::all()) {
      if (std::strcmp(p->name(), name) == 0) found = p;
    }
    ASSERT_NE(found, nullptr) << name;
    EXPECT_GT(std::strlen(found->help()), 20u) << name;
    EXPECT_TRUE(found->defaultIsValid()) << name;
  }
}

TEST(ShmKnobs, FromParamsGivesAUsableGeometry) {
  const ShmOptions options = ShmOptions::fromParams();
  EXPECT_EQ(options.geometry.slotBytes % 64, 0u);
  EXPECT_GE(options.geometry.slotBytes, 4096u);
  EXPECT_LE(options.geometry.slotBytes, 16u << 20);
  EXPECT_GE(options.geometry.nSlots, 2);
  EXPECT_LE(options.geometry.nSlots, 64);
  EXPECT_EQ(options.segmentPrefix, "cfx");
}

}  // namespace
}  // namespace cfx::transport::shm
