// SPDX-License-Identifier: Apache-2.0
// The CUDA stand-in's memory (see cuda_emulator.cc): the table of what it allocated or mapped, which tells device
// memory from pinned host memory and from pageable memory it never saw, and what it counts for tests.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "emu_internal.h"

namespace cfx::emu {

std::mutex gAllocMutex;
std::map<uintptr_t, Allocation> gAllocations;  // by base address

// The allocation holding `p`, if any: (base, allocation).
bool findAllocation(uintptr_t p, uintptr_t* base, Allocation* out) {
  std::lock_guard lk(gAllocMutex);
  auto it = gAllocations.upper_bound(p);
  if (it == gAllocations.begin()) return false;
  --it;
  if (p >= it->first + it->second.bytes) return false;
  if (base != nullptr) *base = it->first;
  if (out != nullptr) *out = it->second;
  return true;
}

Counters gCounters;

bool onProgressThread() {
  char name[16] = {};
  return pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 && std::strncmp(name, "cfx-prog-", 9) == 0;
}

bool refusedOnProgressThread(const char* call) {
  if (!onProgressThread()) return false;
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  std::fprintf(stderr, "cuda emulator: %s called on the library's progress thread %s (refused: it can deadlock)\n",
               call, name);
  return true;
}

void trackAllocation(uintptr_t base, const Allocation& a) {
  std::lock_guard lk(gAllocMutex);
  gAllocations[base] = a;
}

void untrackAllocation(uintptr_t base) {
  std::lock_guard lk(gAllocMutex);
  gAllocations.erase(base);
}

bool isTracked(const void* p) { return findAllocation(reinterpret_cast<uintptr_t>(p), nullptr, nullptr); }

bool isPeerMemory(const void* p) {
  Allocation a;
  return findAllocation(reinterpret_cast<uintptr_t>(p), nullptr, &a) && a.opened;
}

bool isImportedVmm(const void* p) {
  Allocation a;
  return findAllocation(reinterpret_cast<uintptr_t>(p), nullptr, &a) && a.opened && a.vmm;
}

CUresult allocate(void** p, size_t bytes, bool device) {
  if (p == nullptr) return kInvalidValue;
  if (!allocationAllowed()) return kCaptureUnsupported;
  // mmap, not malloc: page-aligned, as device allocations are aligned far beyond malloc's 16 bytes, and an access
  // past the end faults instead of reading some other allocation. Device memory is a shared mapping of a memfd of
  // its own, so that another process can map the same pages through an IPC handle (which names the fd).
  const size_t length = bytes == 0 ? 1 : bytes;  // every allocation covers at least one address
  int fd = -1;
  if (device) {
    fd = ::memfd_create("cfx-emulated-device-memory", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(length)) != 0) {
      if (fd >= 0) ::close(fd);
      return kOutOfMemory;
    }
  }
  void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, device ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
  if (m == MAP_FAILED) {
    if (fd >= 0) ::close(fd);
    return kOutOfMemory;
  }
  std::lock_guard lk(gAllocMutex);
  gAllocations[reinterpret_cast<uintptr_t>(m)] = Allocation{length, device, fd, false, currentDevice()};
  *p = m;
  return kSuccess;
}

// Frees an allocation of this process (opened: false) or unmaps a peer's (opened: true).
CUresult release(void* p, bool device, bool opened) {
  Allocation a;
  {
    std::lock_guard lk(gAllocMutex);
    auto it = gAllocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == gAllocations.end() || it->second.device != device || it->second.opened != opened) {
      return kInvalidValue;
    }
    a = it->second;
    gAllocations.erase(it);
  }
  ::munmap(p, a.bytes);
  if (a.fd >= 0) ::close(a.fd);
  return kSuccess;
}

}  // namespace cfx::emu
