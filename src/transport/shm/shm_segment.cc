// SPDX-License-Identifier: Apache-2.0
// POSIX shared-memory segments with RAII ownership and actionable errors (transport layer, shm transport).
#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"

namespace cfx::transport::shm {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MappedRegion::reset() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

Result<MappedRegion> MappedRegion::map(int fd, size_t bytes, const std::string& what) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    return Status::error(Errc::SystemError,
                         strprintf("mmap of shared-memory segment %s (%zu bytes) failed: %s; check the address-space "
                                   "limit (ulimit -v) and vm.max_map_count, or set NCCL_SHM_DISABLE=1",
                                   what.c_str(), bytes, std::strerror(err)));
  }
  return MappedRegion(base, bytes);
}

Result<MappedRegion> MappedRegion::anonymous(size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    return Status::error(Errc::SystemError, strprintf("mmap of %zu bytes of anonymous shared memory failed: %s", bytes,
                                                      std::strerror(err)));
  }
  return MappedRegion(base, bytes);
}

std::string devShmHint() {
  struct statvfs vfs {};
  std::string avail = "unknown";
  if (::statvfs("/dev/shm", &vfs) == 0) {
    avail = strprintf("%llu MiB free", static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize >> 20);
  }
  return strprintf(
      "/dev/shm has %s; increase /dev/shm size (docker: --shm-size or --ipc=host), lower "
      "CFX_SHM_SLOTS or CFX_SHM_SLOT_BYTES, or set NCCL_SHM_DISABLE=1",
      avail.c_str());
}

ShmSegment::~ShmSegment() {
  if (!linked_) return;
  if (Status st = unlink(); !st.ok()) CFX_WARN("%s", st.message().c_str());
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::create(const std::string& name, size_t bytes) {
  UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) {
    const int err = errno;
    return Status::error(Errc::SystemError,
                         strprintf("shm_open(%s, O_CREAT) failed: %s; check that /dev/shm is mounted and writable, or "
                                   "set NCCL_SHM_DISABLE=1",
                                   name.c_str(), std::strerror(err)));
  }
  // From here on the name exists: the object below owns it, so every error path removes it again.
  std::unique_ptr<ShmSegment> segment(new ShmSegment(name, MappedRegion(), /*linked=*/true));
  // Marks the name as alive (see sweepStale). Blocking: a sweep that opened the name in the gap since shm_open
  // holds the lock only for a moment and leaves young names alone.
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    return Status::error(Errc::SystemError,
                         strprintf("flock of shared-memory segment %s failed: %s", name.c_str(), std::strerror(err)));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    return Status::error(Errc::SystemError,
                         strprintf("ftruncate of shared-memory segment %s to %zu bytes failed: %s; %s", name.c_str(),
                                   bytes, std::strerror(err), devShmHint().c_str()));
  }
  // tmpfs allocates pages lazily; a full /dev/shm would otherwise surface as SIGBUS on first touch, possibly in
  // the peer that writes into this segment. Reserving now turns that into an error here.
  int rc;
  do {
    rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  } while (rc == EINTR);
  if (rc != 0) {
    return Status::error(Errc::SystemError, strprintf("cannot reserve %zu bytes for shared-memory segment %s: %s; %s",
                                                      bytes, name.c_str(), std::strerror(rc), devShmHint().c_str()));
  }
  CFX_TRY_ASSIGN(segment->region_, MappedRegion::map(fd.get(), bytes, name));
  segment->owner_ = std::move(fd);
  return segment;
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::createAnonymous(size_t bytes) {
  CFX_TRY_ASSIGN(MappedRegion region, MappedRegion::anonymous(bytes));
  return std::unique_ptr<ShmSegment>(new ShmSegment(std::string(), std::move(region), /*linked=*/false));
}

Result<std::unique_ptr<ShmSegment>> ShmSegment::open(const std::string& name, size_t expectBytes, int* openErrno) {
  if (openErrno != nullptr) *openErrno = 0;
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) {
    const int err = errno;
    if (openErrno != nullptr) *openErrno = err;
    return Status::error(Errc::SystemError, strprintf("shm_open(%s) failed: %s", name.c_str(), std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    const int err = errno;
    return Status::error(Errc::SystemError, strprintf("fstat(%s) failed: %s", name.c_str(), std::strerror(err)));
  }
  if (static_cast<size_t>(st.st_size) != expectBytes) {
    return Status::error(Errc::InternalError,
                         strprintf("shared-memory segment %s has %lld bytes, but its creator announced %zu",
                                   name.c_str(), static_cast<long long>(st.st_size), expectBytes));
  }
  CFX_TRY_ASSIGN(MappedRegion region, MappedRegion::map(fd.get(), expectBytes, name));
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, std::move(region), /*linked=*/false));
}

Status ShmSegment::unlink() {
  if (!linked_) return Status();
  linked_ = false;
  const int rc = ::shm_unlink(name_.c_str());
  const int err = errno;
  owner_.reset();  // after the unlink, so no sweep ever sees the name unlocked while it is ours
  if (rc != 0) {
    return Status::error(Errc::SystemError, strprintf("shm_unlink(%s) failed: %s; remove it from /dev/shm by hand",
                                                      name_.c_str(), std::strerror(err)));
  }
  return Status();
}

int ShmSegment::sweepStale(const std::string& prefix, std::chrono::milliseconds grace) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const std::string head = prefix + "-";
  std::vector<std::string> candidates;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, head.c_str(), head.size()) == 0) candidates.emplace_back(e->d_name);
  }
  ::closedir(dir);
  int removed = 0;
  for (const std::string& entry : candidates) {
    const std::string name = "/" + entry;
    UniqueFd fd(::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0));
    if (!fd) continue;  // gone already, or not ours to open
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its creator is alive
    struct stat held {};
    if (::fstat(fd.get(), &held) != 0) continue;
    const auto changed = std::chrono::seconds(held.st_ctim.tv_sec) + std::chrono::nanoseconds(held.st_ctim.tv_nsec);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    if (now - changed < grace) continue;
    // Only the file we locked: a name that now points elsewhere was removed and created again meanwhile.
    struct stat named {};
    if (::stat(("/dev/shm/" + entry).c_str(), &named) != 0 || named.st_ino != held.st_ino ||
        named.st_dev != held.st_dev) {
      continue;
    }
    if (::shm_unlink(name.c_str()) == 0) {
      ++removed;
      CFX_INFO(log::Sys::Shm, "shm: removed stale segment %s (%lld bytes), left behind by a process that died",
               name.c_str(), static_cast<long long>(held.st_size));
    }
  }
  return removed;
}

}  // namespace cfx::transport::shm
