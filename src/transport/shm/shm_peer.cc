// SPDX-License-Identifier: Apache-2.0
// Peer liveness for the shm transport: closed flag, /proc/<pid>/stat, kill(pid, 0) (transport layer).
#include "transport/shm/shm_peer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace cfx::transport::shm {

namespace {

struct ProcStat {
  char state = '?';
  uint64_t startTime = 0;
};

// Reads /proc/<pid>/stat ("self" for pid 0). Returns nullopt and sets *err when it cannot be read.
std::optional<ProcStat> readProcStat(pid_t pid, int* err) {
  char path[64];
  if (pid == 0) {
    std::snprintf(path, sizeof(path), "/proc/self/stat");
  } else {
    std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  }
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) {
    *err = errno;
    return std::nullopt;
  }
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    *err = n < 0 ? errno : ESRCH;  // an empty read means the process went away while we read
    return std::nullopt;
  }
  buf[n] = '\0';
  // "pid (comm) state ppid ... starttime ...": comm may contain spaces and parentheses, so parse after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ' || p[2] == '\0') {
    *err = EINVAL;
    return std::nullopt;
  }
  ProcStat out;
  out.state = p[2];
  p += 3;
  // Fields 4..21 precede starttime (field 22).
  for (int field = 4; field <= 22; ++field) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(p, &end, 10);  // negative fields (priority) parse too; unused
    if (end == p) break;
    if (field == 22) out.startTime = v;
    p = end;
  }
  return out;
}

}  // namespace

ProcessIdentity selfIdentity() {
  ProcessIdentity id;
  id.pid = ::getpid();
  int err = 0;
  if (auto st = readProcStat(0, &err)) id.startTime = st->startTime;
  struct stat ns {};
  if (::stat("/proc/self/ns/pid", &ns) == 0) id.pidNamespace = static_cast<uint64_t>(ns.st_ino);
  return id;
}

ProcessState probeProcess(pid_t pid, uint64_t startTime) {
  int err = 0;
  if (auto st = readProcStat(pid, &err)) {
    if (st->state == 'Z' || st->state == 'X' || st->state == 'x') return ProcessState::Exited;
    if (startTime != 0 && st->startTime != startTime) return ProcessState::Exited;  // the pid was reused
    return ProcessState::Alive;
  }
  if (err == ENOENT || err == ESRCH) return ProcessState::Exited;
  // /proc is not readable here (hidepid, not mounted): fall back to the signal-0 probe.
  if (::kill(pid, 0) != 0 && errno == ESRCH) return ProcessState::Exited;
  return ProcessState::Alive;
}

ShmPeer::ShmPeer(int rank, std::string hostName, std::shared_ptr<ShmSegment> segment, const ProcessIdentity& self)
    : rank_(rank), hostName_(std::move(hostName)), segment_(std::move(segment)) {
  const SegmentHeader& h = header();
  identity_.pid = h.pid;
  identity_.startTime = h.startTime;
  identity_.pidNamespace = h.pidNamespace;
  // Without /proc neither side knows its namespace; assume the common case (the same one).
  probeByPid_ = identity_.pidNamespace == self.pidNamespace;
}

Status ShmPeer::check() const {
  int gone = gone_.load(std::memory_order_relaxed);  // relaxed: see the member's comment
  if (gone == kNotGone) {
    // Acquire pairs with the release store of `closed` in ShmTransport's destructor (peer side). Nothing else is
    // read based on it; acquire just keeps the verdict in order with anything the peer wrote before closing.
    if (header().closed.load(std::memory_order_acquire) != 0) {
      gone = kClosed;
    } else if (probeByPid_ && probeProcess(identity_.pid, identity_.startTime) == ProcessState::Exited) {
      gone = kExited;
    }
    if (gone != kNotGone) gone_.store(gone, std::memory_order_relaxed);
  }
  switch (gone) {
    case kClosed:
      return Status::error(Errc::RemoteError,
                           strprintf("peer rank %d (host %s, pid %d) closed its shared-memory connection: its "
                                     "communicator was destroyed or aborted; check that process for its own error",
                                     rank_, hostName_.c_str(), static_cast<int>(identity_.pid)));
    case kExited:
      return Status::error(Errc::RemoteError,
                           strprintf("peer rank %d (host %s, pid %d) has exited while connected over shared memory; "
                                     "check that process for its own error or exit status",
                                     rank_, hostName_.c_str(), static_cast<int>(identity_.pid)));
    default:
      return Status();
  }
}

}  // namespace cfx::transport::shm
