// SPDX-License-Identifier: Apache-2.0
// cfxrun: the tagged relay of the ranks' output; see rank_output.h.
#include "rank_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace cfxrun {

bool RankOutput::open(int nRanks) {
  streams_.resize(static_cast<size_t>(nRanks) * 2);
  for (size_t i = 0; i < streams_.size(); ++i) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      fprintf(stderr, "cfxrun: cannot create the pipes that tag the ranks' output: %s\n", strerror(errno));
      return false;
    }
    streams_[i].readFd = fds[0];
    streams_[i].writeFd = fds[1];
    streams_[i].rank = static_cast<int>(i / 2);
    streams_[i].destFd = i % 2 == 0 ? STDOUT_FILENO : STDERR_FILENO;
  }
  return true;
}

void RankOutput::attachChild(int rank) {
  // dup2 clears O_CLOEXEC on the copies; every other pipe end closes at exec.
  dup2(streams_[static_cast<size_t>(rank) * 2].writeFd, STDOUT_FILENO);
  dup2(streams_[static_cast<size_t>(rank) * 2 + 1].writeFd, STDERR_FILENO);
}

void RankOutput::closeChildEnds() {
  for (Stream& s : streams_) {
    if (s.writeFd >= 0) close(s.writeFd);
    s.writeFd = -1;
  }
}

void RankOutput::emit(const Stream& s, const char* data, size_t n) {
  std::string line = "[rank " + std::to_string(s.rank) + "] ";
  line.append(data, n);
  if (line.back() != '\n') line += '\n';
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = write(s.destFd, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our own output is gone (a closed pipe): nothing better to do with it
    done += static_cast<size_t>(w);
  }
}

void RankOutput::relay(Stream& s, bool atEof) {
  size_t start = 0;
  for (size_t nl = s.pending.find('\n'); nl != std::string::npos; nl = s.pending.find('\n', start)) {
    emit(s, s.pending.data() + start, nl - start + 1);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  while (s.pending.size() >= kMaxLine) {
    emit(s, s.pending.data(), kMaxLine);
    s.pending.erase(0, kMaxLine);
  }
  if (atEof && !s.pending.empty()) {
    emit(s, s.pending.data(), s.pending.size());
    s.pending.clear();
  }
}

void RankOutput::pump(int timeoutMs) {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;
  for (Stream& s : streams_) {
    if (s.readFd < 0) continue;
    fds.push_back({s.readFd, POLLIN, 0});
    owners.push_back(&s);
  }
  if (fds.empty()) return;
  if (poll(fds.data(), fds.size(), timeoutMs) <= 0) return;
  char buf[16384];
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Stream& s = *owners[i];
    const ssize_t n = read(s.readFd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      relay(s, false);
    } else {
      relay(s, true);
      close(s.readFd);
      s.readFd = -1;
    }
  }
}

void RankOutput::drain(int timeoutMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  auto open = [this] {
    for (const Stream& s : streams_) {
      if (s.readFd >= 0) return true;
    }
    return false;
  };
  while (open() && std::chrono::steady_clock::now() < deadline) pump(20);
  for (Stream& s : streams_) {
    relay(s, true);
    if (s.readFd >= 0) close(s.readFd);
    s.readFd = -1;
  }
}

}  // namespace cfxrun
