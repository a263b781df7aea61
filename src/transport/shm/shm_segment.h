// SPDX-License-Identifier: Apache-2.0
// RAII for POSIX shared memory: file descriptors, mappings and named segments in /dev/shm (transport layer,
// shm transport). Knows nothing about what the segment holds; shm_layout.h describes that.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace cfx::transport::shm {

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// Owns one MAP_SHARED mapping; munmaps it on destruction. The base is page-aligned.
class MappedRegion {
 public:
  MappedRegion() = default;
  ~MappedRegion() { reset(); }
  MappedRegion(MappedRegion&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  // Maps `bytes` of `fd` read-write. `what` names the object in the error message.
  static Result<MappedRegion> map(int fd, size_t bytes, const std::string& what);
  // Shared anonymous memory: zero-filled, visible to this process only (and to children forked later).
  static Result<MappedRegion> anonymous(size_t bytes);

  void* data() const { return base_; }
  size_t size() const { return bytes_; }
  void reset();

 private:
  MappedRegion(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// A shared-memory segment mapped into this process: a named POSIX object that other processes can open, or an
// anonymous mapping when nobody else needs to. The memory is zero-filled when created.
//
// Lifetime: the mapping lives as long as this object; the name is removed by unlink() or, at the latest, by the
// destructor of the creating object, so an error path never leaves an entry in /dev/shm. Once unlinked, the
// memory stays valid in every process that mapped it, whatever happens to the creator.
// A creator killed while its name exists cannot remove it, so the creator holds an exclusive flock on the segment
// for as long as the name is its own: a name nobody holds the lock on is stale, and sweepStale() removes it. The
// lock (unlike a pid in the name) also tells the truth across pid namespaces that share /dev/shm.
// Threading: not synchronised; data() may be used from any thread.
class ShmSegment {
 public:
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` ("/..." with no other '/') exclusively with mode 0600, reserves all of its pages up front
  // (so a full /dev/shm fails here with SystemError and a hint, not later with SIGBUS), and maps it.
  static Result<std::unique_ptr<ShmSegment>> create(const std::string& name, size_t bytes);
  static Result<std::unique_ptr<ShmSegment>> createAnonymous(size_t bytes);
  // Maps an existing segment created by another process; its size must be `expectBytes`. On failure,
  // *openErrno (when given) receives the errno of shm_open, or 0 when shm_open itself succeeded.
  static Result<std::unique_ptr<ShmSegment>> open(const std::string& name, size_t expectBytes,
                                                  int* openErrno = nullptr);

  // Removes the name from /dev/shm. Idempotent; a no-op for anonymous or opened segments.
  Status unlink();

  // Removes every "<prefix>-*" segment in /dev/shm whose creator died before removing it: no process holds its
  // lock and it is older than `grace` (a creator takes the lock a few instructions after creating the name; the
  // grace keeps a sweep from taking a name in that gap). Returns how many it removed; never fails (a segment it
  // cannot inspect is left alone).
  static int sweepStale(const std::string& prefix, std::chrono::milliseconds grace = std::chrono::seconds(2));

  void* data() const { return region_.data(); }
  size_t size() const { return region_.size(); }
  const std::string& name() const { return name_; }  // "" when anonymous
  bool linked() const { return linked_; }

 private:
  ShmSegment(std::string name, MappedRegion region, bool linked)
      : name_(std::move(name)), region_(std::move(region)), linked_(linked) {}

  std::string name_;
  MappedRegion region_;
  bool linked_;    // this object created the name and has not removed it yet
  UniqueFd owner_;  // holds the flock that marks the name as alive; closed when the name is removed
};

// The user-facing hint appended to errors about /dev/shm (free space, docker's --shm-size, NCCL_SHM_DISABLE).
std::string devShmHint();

}  // namespace cfx::transport::shm
