// SPDX-License-Identifier: Apache-2.0
// The CUDA stand-in's virtual memory management (cuMemCreate and friends), which ncclMemAlloc uses so that peers can
// map a buffer through a file descriptor and read it in place.
//
// How faithfully: a physical allocation is a memfd of the granularity's multiple; an exported handle is a dup of it
// (a real file descriptor, so tests pass it between processes with SCM_RIGHTS as the library does on a GPU); an
// imported one maps the same pages. A reservation is an inaccessible anonymous range; cuMemMap puts the memfd's
// pages there still inaccessible, and only cuMemSetAccess makes them readable and writable, so a library that forgot
// it faults here as it would on a GPU. As in CUDA, a mapping keeps its pages alive after cuMemRelease and after the
// exporter freed its side, a mapping belongs to no context, and legacy IPC handles refuse this memory.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "emu_internal.h"

namespace cfx::emu {
namespace {

constexpr size_t kGranularity = size_t{2} << 20;  // an H100's, for device memory

struct PhysicalHandle {
  int fd = -1;
  size_t bytes = 0;
  int ordinal = 0;
  bool exportable = false;  // created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR requested
  bool imported = false;
};

std::mutex gVmmMutex;
std::map<uint64_t, PhysicalHandle> gHandles;
std::map<uintptr_t, size_t> gReservations;  // base -> bytes
uint64_t gNextHandle = 1;

// The reservation holding all of [p, p + bytes), if any.
bool reserved(uintptr_t p, size_t bytes) {
  auto it = gReservations.upper_bound(p);
  if (it == gReservations.begin()) return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}

int protectionOf(int flags) {
  if (flags == cuda::kMemAccessReadWrite) return PROT_READ | PROT_WRITE;
  if (flags == 1) return PROT_READ;  // CU_MEM_ACCESS_FLAGS_PROT_READ
  return PROT_NONE;
}

}  // namespace

}  // namespace cfx::emu

using namespace cfx::emu;  // NOLINT(google-build-using-namespace): the entry points below use the internals
using cfx::cuda::CUmemGenericAllocationHandle;
using cfx::cuda::MemAccessDesc;
using cfx::cuda::MemAllocationProp;

extern "C" {

CFX_EMU_API cuMemGetAllocationGranularity(size_t* granularity, const MemAllocationProp* prop, int) {
  if (granularity == nullptr || prop == nullptr) return kInvalidValue;
  *granularity = kGranularity;
  return kSuccess;
}

CFX_EMU_API cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const MemAllocationProp* prop,
                        unsigned long long flags) {
  if (refusedOnProgressThread("cuMemCreate")) return kNotSupported;
  if (handle == nullptr || prop == nullptr || flags != 0 || bytes == 0 || bytes % kGranularity != 0) {
    return kInvalidValue;
  }
  if (prop->type != cfx::cuda::kMemAllocationTypePinned || prop->location.type != cfx::cuda::kMemLocationTypeDevice ||
      !validDevice(prop->location.id)) {
    return kInvalidValue;
  }
  if (!allocationAllowed()) return kCaptureUnsupported;
  const int fd = ::memfd_create("cfx-emulated-vmm-memory", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) ::close(fd);
    return kOutOfMemory;
  }
  std::lock_guard lk(gVmmMutex);
  *handle = gNextHandle++;
  gHandles[*handle] = PhysicalHandle{fd, bytes, prop->location.id,
                                     (prop->requestedHandleTypes & cfx::cuda::kMemHandleTypePosixFd) != 0, false};
  return kSuccess;
}

CFX_EMU_API cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (refusedOnProgressThread("cuMemRelease")) return kNotSupported;
  std::lock_guard lk(gVmmMutex);
  auto it = gHandles.find(handle);
  if (it == gHandles.end()) return kInvalidValue;
  ::close(it->second.fd);  // mappings keep the pages
  gHandles.erase(it);
  return kSuccess;
}

CFX_EMU_API cuMemAddressReserve(CUdeviceptr* p, size_t bytes, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags) {
  if (refusedOnProgressThread("cuMemAddressReserve")) return kNotSupported;
  if (p == nullptr || bytes == 0 || bytes % kGranularity != 0 || addr != 0 || flags != 0) return kInvalidValue;
  const size_t align = alignment == 0 ? kGranularity : alignment;
  void* m = ::mmap(nullptr, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  const auto start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t base = (start + align - 1) / align * align;
  if (base > start) ::munmap(m, base - start);
  if (start + bytes + align > base + bytes) {
    ::munmap(reinterpret_cast<void*>(base + bytes), start + bytes + align - (base + bytes));
  }
  std::lock_guard lk(gVmmMutex);
  gReservations[base] = bytes;
  *p = base;
  return kSuccess;
}

CFX_EMU_API cuMemAddressFree(CUdeviceptr p, size_t bytes) {
  if (refusedOnProgressThread("cuMemAddressFree")) return kNotSupported;
  std::lock_guard lk(gVmmMutex);
  auto it = gReservations.find(static_cast<uintptr_t>(p));
  if (it == gReservations.end() || it->second != bytes) return kInvalidValue;
  if (isTracked(ptr(p))) return kInvalidValue;  // still mapped
  ::munmap(ptr(p), bytes);
  gReservations.erase(it);
  return kSuccess;
}

CFX_EMU_API cuMemMap(CUdeviceptr p, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                     unsigned long long flags) {
  if (refusedOnProgressThread("cuMemMap")) return kNotSupported;
  // As CUDA: the address, size and offset are multiples of the granularity.
  if (flags != 0 || bytes == 0 || bytes % kGranularity != 0 || offset % kGranularity != 0 || p % kGranularity != 0) {
    return kInvalidValue;
  }
  std::lock_guard lk(gVmmMutex);
  auto it = gHandles.find(handle);
  if (it == gHandles.end() || offset + bytes > it->second.bytes || !reserved(static_cast<uintptr_t>(p), bytes) ||
      isTracked(ptr(p))) {
    return kInvalidValue;
  }
  void* m = ::mmap(ptr(p), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, it->second.fd, static_cast<off_t>(offset));
  if (m == MAP_FAILED) return kOutOfMemory;
  Allocation a;
  a.bytes = bytes;
  a.device = true;
  a.fd = -1;  // the mapping holds the pages; cuMemRelease closes the handle's fd
  a.opened = it->second.imported;
  a.ordinal = it->second.ordinal;
  a.vmm = true;
  trackAllocation(static_cast<uintptr_t>(p), a);
  return kSuccess;
}

CFX_EMU_API cuMemUnmap(CUdeviceptr p, size_t bytes) {
  if (refusedOnProgressThread("cuMemUnmap")) return kNotSupported;
  uintptr_t base = 0;
  Allocation a;
  if (!findAllocation(static_cast<uintptr_t>(p), &base, &a) || !a.vmm || base != p || a.bytes != bytes) {
    return kInvalidValue;
  }
  untrackAllocation(base);
  // The range stays reserved and inaccessible, as after cuMemUnmap.
  ::mmap(ptr(p), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return kSuccess;
}

CFX_EMU_API cuMemSetAccess(CUdeviceptr p, size_t bytes, const MemAccessDesc* desc, size_t count) {
  if (refusedOnProgressThread("cuMemSetAccess")) return kNotSupported;
  if (desc == nullptr || count == 0) return kInvalidValue;
  uintptr_t base = 0;
  Allocation a;
  if (!findAllocation(static_cast<uintptr_t>(p), &base, &a) || !a.vmm || p + bytes > base + a.bytes) {
    return kInvalidValue;
  }
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != cfx::cuda::kMemLocationTypeDevice || !validDevice(desc[i].location.id)) {
      return kInvalidValue;
    }
    if (::mprotect(ptr(p), bytes, protectionOf(desc[i].flags)) != 0) return kInvalidValue;
  }
  return kSuccess;
}

CFX_EMU_API cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle, int type,
                                         unsigned long long flags) {
  if (shareable == nullptr || type != cfx::cuda::kMemHandleTypePosixFd || flags != 0) return kInvalidValue;
  std::lock_guard lk(gVmmMutex);
  auto it = gHandles.find(handle);
  if (it == gHandles.end() || !it->second.exportable) return kInvalidValue;
  const int fd = ::fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return kOutOfMemory;
  *static_cast<int*>(shareable) = fd;
  return kSuccess;
}

CFX_EMU_API cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle, int type) {
  if (refusedOnProgressThread("cuMemImportFromShareableHandle")) return kNotSupported;
  if (handle == nullptr || type != cfx::cuda::kMemHandleTypePosixFd) return kInvalidValue;
  // CFX_EMU_DIE_AT_IMPORT=1: the process dies here, SIGKILLed as by the OOM killer, for the tests of a peer that
  // dies after handing out its own block and while mapping its peers'.
  if (const char* die = std::getenv("CFX_EMU_DIE_AT_IMPORT"); die != nullptr && std::string(die) == "1") {
    ::raise(SIGKILL);
  }
  const int given = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  struct stat st {};
  if (given < 0 || ::fstat(given, &st) != 0 || st.st_size <= 0) return kInvalidValue;
  const int fd = ::fcntl(given, F_DUPFD_CLOEXEC, 0);  // the caller keeps and closes its descriptor, as with CUDA
  if (fd < 0) return kOutOfMemory;
  std::lock_guard lk(gVmmMutex);
  *handle = gNextHandle++;
  gHandles[*handle] = PhysicalHandle{fd, static_cast<size_t>(st.st_size), currentDevice(), false, true};
  gCounters.vmmImports.fetch_add(1);
  return kSuccess;
}

}  // extern "C"
