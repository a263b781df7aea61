// SPDX-License-Identifier: Apache-2.0
// Exported host memory (shm_export.h): lookup of this process's blocks, and mapping another process's blocks:
// the bytes are the owner's, a freed block is never served again, the cache stays bounded, and what cannot be
// mapped is an error that names the process.
#include "transport/shm/shm_export.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace cfx::transport::shm {
namespace {

TEST(ShmExport, FindsTheBlockHoldingARangeAndNothingOutsideIt) {
  auto p = allocExported(10000);
  ASSERT_TRUE(p.ok()) << p.status().message();
  char* base = static_cast<char*>(*p);
  auto whole = findExported(base, 10000);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->base, reinterpret_cast<uintptr_t>(base));
  EXPECT_EQ(whole->bytes, 10000u);
  EXPECT_GT(whole->id, 0u);
  EXPECT_GE(whole->fd, 0);
  auto inner = findExported(base + 100, 9900);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->id, whole->id);
  EXPECT_FALSE(findExported(base + 100, 9901).has_value());  // runs past the end
  EXPECT_FALSE(findExported(base - 1, 2).has_value());
  int onStack = 0;
  EXPECT_FALSE(findExported(&onStack, sizeof(onStack)).has_value());
  EXPECT_TRUE(freeExported(base));
  EXPECT_FALSE(findExported(base, 1).has_value());
  EXPECT_FALSE(freeExported(base));  // already freed
  EXPECT_FALSE(allocExported(0).ok());
}

TEST(ShmExport, BlockIdsNeverRepeat) {
  auto a = allocExported(4096);
  ASSERT_TRUE(a.ok());
  const uint64_t first = findExported(*a, 1)->id;
  ASSERT_TRUE(freeExported(*a));
  auto b = allocExported(4096);
  ASSERT_TRUE(b.ok());
  EXPECT_GT(findExported(*b, 1)->id, first);
  ASSERT_TRUE(freeExported(*b));
}

// A child process exports blocks and reports them through a pipe; the parent maps them.
class Exporter {
 public:
  Exporter() {
    EXPECT_EQ(pipe(toParent_), 0);
    EXPECT_EQ(pipe(toChild_), 0);
    pid_ = fork();
    if (pid_ == 0) childLoop();
  }
  ~Exporter() {
    command('q', 0);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }
  // Allocates a block of `bytes` filled with `fill` in the child and returns how it names it; frees the last one
  // first when `freeLast`.
  ExportedBlock allocate(size_t bytes, char fill, bool freeLast = false) {
    command(freeLast ? 'r' : 'a', bytes | (static_cast<uint64_t>(static_cast<unsigned char>(fill)) << 56));
    ExportedBlock b;
    EXPECT_EQ(read(toParent_[0], &b, sizeof(b)), static_cast<ssize_t>(sizeof(b)));
    EXPECT_EQ(read(toParent_[0], &nonce_, sizeof(nonce_)), static_cast<ssize_t>(sizeof(nonce_)));
    return b;
  }
  uint64_t nonce() const { return nonce_; }

 private:
  void command(char c, uint64_t arg) {
    EXPECT_EQ(write(toChild_[1], &c, 1), 1);
    EXPECT_EQ(write(toChild_[1], &arg, sizeof(arg)), static_cast<ssize_t>(sizeof(arg)));
  }
  [[noreturn]] void childLoop() {
    void* last = nullptr;
    for (;;) {
      char c = 0;
      uint64_t arg = 0;
      if (read(toChild_[0], &c, 1) != 1 || c == 'q') _exit(0);
      if (read(toChild_[0], &arg, sizeof(arg)) != sizeof(arg)) _exit(1);
      if (c == 'r' && last != nullptr) freeExported(last);
      const size_t bytes = arg & ((uint64_t{1} << 56) - 1);
      auto p = allocExported(bytes);
      if (!p.ok()) _exit(2);
      std::memset(*p, static_cast<int>(arg >> 56), bytes);
      last = *p;
      const ExportedBlock b = *findExported(*p, bytes);
      const uint64_t nonce = processNonce();
      if (write(toParent_[1], &b, sizeof(b)) != sizeof(b)) _exit(3);
      if (write(toParent_[1], &nonce, sizeof(nonce)) != sizeof(nonce)) _exit(3);
    }
  }
  int toParent_[2] = {-1, -1};
  int toChild_[2] = {-1, -1};
  pid_t pid_ = -1;
  uint64_t nonce_ = 0;
};

TEST(ShmExport, MapsAnotherProcesssBlockAndReadsItsBytes) {
  Exporter child;
  const ExportedBlock b = child.allocate(1 << 20, 'x');
  auto view = mapPeerBlock(child.pid(), child.nonce(), b);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ((*view)[0], 'x');
  EXPECT_EQ((*view)[(1 << 20) - 1], 'x');
  // The same block again: the cached mapping.
  auto again = mapPeerBlock(child.pid(), child.nonce(), b);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *view);
  unpinPeerBlock(child.pid(), child.nonce(), b.id);
  unpinPeerBlock(child.pid(), child.nonce(), b.id);
}

TEST(ShmExport, AFreedBlockIsDroppedAndItsSuccessorReadFresh) {
  Exporter child;
  const ExportedBlock first = child.allocate(64 << 10, 'a');
  auto v1 = mapPeerBlock(child.pid(), child.nonce(), first);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)[0], 'a');
  unpinPeerBlock(child.pid(), child.nonce(), first.id);
  const size_t before = mappedPeerBlocks();
  // The child frees the first block; its successor may even reuse the fd number.
  const ExportedBlock second = child.allocate(64 << 10, 'b', /*freeLast=*/true);
  EXPECT_NE(second.id, first.id);
  auto v2 = mapPeerBlock(child.pid(), child.nonce(), second);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ((*v2)[0], 'b');
  unpinPeerBlock(child.pid(), child.nonce(), second.id);
  EXPECT_EQ(mappedPeerBlocks(), before);  // the freed block's mapping went when the new one came
}

TEST(ShmExport, TheCacheStaysBoundedButNeverUnmapsAPinnedBlock) {
  Exporter child;
  const ExportedBlock pinned = child.allocate(4096, 'p');
  auto held = mapPeerBlock(child.pid(), child.nonce(), pinned);
  ASSERT_TRUE(held.ok());
  for (size_t i = 0; i < kMaxMappedBlocks + 8; ++i) {
    const ExportedBlock b = child.allocate(4096, static_cast<char>('A' + i % 26));
    auto v = mapPeerBlock(child.pid(), child.nonce(), b);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ((*v)[100], static_cast<char>('A' + i % 26));
    unpinPeerBlock(child.pid(), child.nonce(), b.id);
    EXPECT_LE(mappedPeerBlocks(), kMaxMappedBlocks);
  }
  EXPECT_EQ((*held)[4095], 'p');  // still mapped: it was pinned all along
  unpinPeerBlock(child.pid(), child.nonce(), pinned.id);
}

TEST(ShmExport, ABlockThatCannotBeOpenedIsAnErrorNamingTheProcess) {
  Exporter child;
  ExportedBlock b = child.allocate(4096, 'z');
  b.fd = 999;  // no such fd in the child
  auto v = mapPeerBlock(child.pid(), child.nonce(), b);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find(std::to_string(child.pid())), std::string::npos) << v.status().message();
  ExportedBlock big = child.allocate(4096, 'y');
  big.bytes = 1 << 20;  // larger than the file behind the fd
  EXPECT_FALSE(mapPeerBlock(child.pid(), child.nonce(), big).ok());
}

}  // namespace
}  // namespace cfx::transport::shm
