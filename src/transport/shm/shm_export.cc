// SPDX-License-Identifier: Apache-2.0
// Exported host memory and the cache of mapped peer blocks (transport layer, shm transport); see shm_export.h.
#include "transport/shm/shm_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace cfx::transport::shm {
namespace {

struct OwnBlock {
  uint64_t id;
  int fd;
  size_t bytes;
};

std::mutex gOwnMutex;
uint64_t gNextId = 1;
// Keyed by base address. Leaked on purpose: ncclMemFree may run during static destruction.
std::map<uintptr_t, OwnBlock>& ownBlocks() {
  static auto* m = new std::map<uintptr_t, OwnBlock>();
  return *m;
}

struct PeerMapping {
  pid_t pid;
  uint64_t nonce;
  uint64_t id;
  int fd;          // the fd number in the owner, to check the block still exists there
  ino_t inode;     // the file it named when we mapped it
  dev_t device;
  const char* base;
  size_t bytes;
  uint64_t lastUse;
  int pins;  // receiving verbs reading from it now: never unmapped while > 0
};

std::mutex gPeerMutex;
uint64_t gUseClock = 0;
std::vector<PeerMapping>& peerMappings() {
  static auto* v = new std::vector<PeerMapping>();
  return *v;
}

std::string procFdPath(pid_t pid, int fd) { return strprintf("/proc/%d/fd/%d", static_cast<int>(pid), fd); }

// Whether the owner still holds the file we mapped under that fd (false once freed or once the owner exited).
bool stillExported(const PeerMapping& m) {
  struct stat st{};
  if (stat(procFdPath(m.pid, m.fd).c_str(), &st) != 0) return false;
  return st.st_ino == m.inode && st.st_dev == m.device;
}

void dropStaleLocked(std::vector<PeerMapping>& maps) {
  auto stale = std::remove_if(maps.begin(), maps.end(), [](const PeerMapping& m) {
    if (m.pins > 0 || stillExported(m)) return false;
    munmap(const_cast<char*>(m.base), m.bytes);
    return true;
  });
  maps.erase(stale, maps.end());
  while (maps.size() >= kMaxMappedBlocks) {
    auto oldest = maps.end();
    for (auto it = maps.begin(); it != maps.end(); ++it) {
      if (it->pins == 0 && (oldest == maps.end() || it->lastUse < oldest->lastUse)) oldest = it;
    }
    if (oldest == maps.end()) break;  // all in use: the cache grows past its bound until some are released
    munmap(const_cast<char*>(oldest->base), oldest->bytes);
    maps.erase(oldest);
  }
}

}  // namespace

uint64_t processNonce() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    uint64_t v = 0;
    while (v == 0) v = (static_cast<uint64_t>(rd()) << 32) | rd();
    return v;
  }();
  return nonce;
}

Result<void*> allocExported(size_t bytes) {
  if (bytes == 0) return Status::error(Errc::InvalidArgument, "cannot export a block of 0 bytes");
  const int fd = memfd_create("cfx-mem", MFD_CLOEXEC);
  if (fd < 0) return Status::error(Errc::SystemError, strprintf("memfd_create(%zu bytes): %s", bytes, strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    return Status::error(Errc::SystemError, strprintf("ftruncate of a %zu-byte memfd: %s", bytes, strerror(err)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return Status::error(Errc::SystemError, strprintf("mmap of a %zu-byte memfd: %s", bytes, strerror(err)));
  }
  std::lock_guard<std::mutex> lock(gOwnMutex);
  ownBlocks()[reinterpret_cast<uintptr_t>(p)] = {gNextId++, fd, bytes};
  return p;
}

bool freeExported(void* p) {
  std::lock_guard<std::mutex> lock(gOwnMutex);
  auto it = ownBlocks().find(reinterpret_cast<uintptr_t>(p));
  if (it == ownBlocks().end()) return false;
  munmap(p, it->second.bytes);
  close(it->second.fd);
  ownBlocks().erase(it);
  return true;
}

std::optional<ExportedBlock> findExported(const void* p, size_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(gOwnMutex);
  auto& blocks = ownBlocks();
  auto it = blocks.upper_bound(addr);
  if (it == blocks.begin()) return std::nullopt;
  --it;
  const uintptr_t base = it->first;
  if (addr - base > it->second.bytes || bytes > it->second.bytes - (addr - base)) return std::nullopt;
  return ExportedBlock{it->second.id, it->second.fd, base, it->second.bytes};
}

Result<const char*> mapPeerBlock(pid_t pid, uint64_t nonce, const ExportedBlock& block) {
  std::lock_guard<std::mutex> lock(gPeerMutex);
  auto& maps = peerMappings();
  for (PeerMapping& m : maps) {
    if (m.pid == pid && m.nonce == nonce && m.id == block.id) {
      if (m.bytes != block.bytes) {
        return Status::error(Errc::RemoteError,
                             strprintf("pid %d announced block %llu as %llu bytes, but it was %zu bytes when mapped",
                                       static_cast<int>(pid), static_cast<unsigned long long>(block.id),
                                       static_cast<unsigned long long>(block.bytes), m.bytes));
      }
      m.lastUse = ++gUseClock;
      ++m.pins;
      return m.base;
    }
  }
  dropStaleLocked(maps);
  const std::string path = procFdPath(pid, block.fd);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(Errc::SystemError, strprintf("open(%s): %s", path.c_str(), strerror(errno)));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < block.bytes) {
    close(fd);
    return Status::error(Errc::SystemError,
                         strprintf("%s is not a block of %llu bytes of pid %d", path.c_str(),
                                   static_cast<unsigned long long>(block.bytes), static_cast<int>(pid)));
  }
  // Populated now: faulting a large block in page by page on the first read would cost more than the read.
  void* p = mmap(nullptr, block.bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    return Status::error(Errc::SystemError, strprintf("mmap of %llu bytes of %s: %s",
                                                      static_cast<unsigned long long>(block.bytes), path.c_str(),
                                                      strerror(err)));
  }
  maps.push_back({pid, nonce, block.id, block.fd, st.st_ino, st.st_dev, static_cast<const char*>(p),
                  static_cast<size_t>(block.bytes), ++gUseClock, 1});
  return static_cast<const char*>(p);
}

void unpinPeerBlock(pid_t pid, uint64_t nonce, uint64_t id) {
  std::lock_guard<std::mutex> lock(gPeerMutex);
  for (PeerMapping& m : peerMappings()) {
    if (m.pid == pid && m.nonce == nonce && m.id == id && m.pins > 0) {
      --m.pins;
      return;
    }
  }
}

size_t mappedPeerBlocks() {
  std::lock_guard<std::mutex> lock(gPeerMutex);
  return peerMappings().size();
}

}  // namespace cfx::transport::shm
