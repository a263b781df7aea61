// SPDX-License-Identifier: Apache-2.0
// Fork-based launcher: children talk to the parent over one pipe pair each, in length-prefixed frames.
// The parent relays collectives (barrier, allGather), collects failures and reports, and enforces the timeout.
#include "integration/multiproc.h"

#include <execinfo.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

namespace cfx::itest {
namespace {

// Frame types, child -> parent. Every frame is {uint32 type, uint32 length, payload}.
enum FrameType : unsigned { kFailure = 1, kReport = 2, kNote = 3, kGather = 4, kExpectDeath = 5 };

bool writeAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

void putU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

double timeoutScale() {
  const char* s = std::getenv("CFX_TEST_TIMEOUT_SCALE");
  if (s == nullptr) return 1.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  return (end != s && *end == '\0' && v > 0) ? v : 1.0;
}

// Forwards every failed gtest assertion made inside a child to the parent.
class ForwardingListener : public ::testing::EmptyTestEventListener {
 public:
  explicit ForwardingListener(RankContext* ctx) : ctx_(ctx) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::ostringstream msg;
    msg << (result.file_name() ? result.file_name() : "?") << ":" << result.line_number() << ": "
        << result.message();
    ctx_->countFailure();
    ctx_->sendFrame(kFailure, msg.str());
  }

 private:
  RankContext* ctx_;
};

struct Child {
  pid_t pid = -1;
  int upRead = -1;     // parent reads frames from the child
  int downWrite = -1;  // parent writes gather replies
  bool running = false;
  std::optional<std::string> pendingGather;
};

int gChildRank = -1;
int gChildUpFd = -1;                      // the child's pipe to the parent, for the sanitizer hook below
std::atomic<int> gSanitizerReports{0};    // counted by the hook, read when the child finishes

}  // namespace
}  // namespace cfx::itest

// Sanitizers (ASan, TSan, UBSan) call this weak hook once per report. Children leave with _exit, which skips the
// sanitizers' exit-time verdict, so the report is forwarded here as a failure of the rank. No allocation: the
// runtime may hold its own locks while reporting.
// Default visibility: the build hides symbols, and the sanitizer runtime must find this one dynamically.
extern "C" __attribute__((visibility("default"))) void __sanitizer_report_error_summary(const char* summary) {
  using cfx::itest::gChildUpFd;
  ++cfx::itest::gSanitizerReports;
  (void)!::write(STDERR_FILENO, summary, std::strlen(summary));  // what the runtime's default hook prints
  (void)!::write(STDERR_FILENO, "\n", 1);
  if (gChildUpFd < 0) return;
  char frame[8 + 512];
  const char prefix[] = "sanitizer report: ";
  const size_t prefixLen = sizeof(prefix) - 1;
  const size_t len = prefixLen + std::min<size_t>(std::strlen(summary), sizeof(frame) - 8 - prefixLen);
  const uint32_t header[2] = {1 /* kFailure */, static_cast<uint32_t>(len)};
  std::memcpy(frame, header, 8);
  std::memcpy(frame + 8, prefix, prefixLen);
  std::memcpy(frame + 8 + prefixLen, summary, len - prefixLen);
  (void)!::write(gChildUpFd, frame, 8 + len);  // one write below PIPE_BUF: atomic with respect to other frames
}

namespace cfx::itest {
namespace {

// Prints a backtrace of a crashing child to stderr, then dies of the same signal (async-signal-safe calls only).
void crashHandler(int sig) {
  char line[64];
  const int n = std::snprintf(line, sizeof(line), "[rank %d] fatal signal %d; backtrace:\n", gChildRank, sig);
  (void)!::write(STDERR_FILENO, line, static_cast<size_t>(n));
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  ::raise(sig);  // SA_RESETHAND restored the default action
}

// Sanitizers install their own handlers (with better reports); only fill in where the default is still set.
void installCrashHandlers() {
  void* warmup[1];
  ::backtrace(warmup, 1);  // loads libgcc now: the first backtrace() allocates, which a signal handler must not
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction handler {};
    handler.sa_handler = crashHandler;
    handler.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &handler, nullptr);
  }
}

[[noreturn]] void runChild(int rank, int nRanks, int upFd, int downFd, pid_t parent, const RunOptions& options,
                           const std::function<void(RankContext&)>& fn) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);
  for (const auto& [name, value] : options.env) ::setenv(name.c_str(), value.c_str(), 1);
  gChildRank = rank;
  gChildUpFd = upFd;
  installCrashHandlers();
  RankContext ctx(rank, nRanks, upFd, downFd);
  ::testing::UnitTest::GetInstance()->listeners().Append(new ForwardingListener(&ctx));
  try {
    fn(ctx);
  } catch (const std::exception& e) {
    ctx.fail(std::string("uncaught exception: ") + e.what());
  } catch (...) {
    ctx.fail("uncaught non-standard exception");
  }
  if (gSanitizerReports.load() > 0) ctx.countFailure();  // already forwarded by the hook
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: the child shares the parent's gtest and static state, which must not be torn down twice.
  ::_exit(ctx.failureCount() == 0 ? 0 : 1);
}

class Launcher {
 public:
  Launcher(int nRanks, const RunOptions& options) : nRanks_(nRanks), options_(options), children_(nRanks) {
    result_.ranks.resize(nRanks);
    for (int r = 0; r < nRanks; ++r) result_.ranks[r].rank = r;
  }

  RunResult run(const std::function<void(RankContext&)>& fn);

 private:
  void handleFrame(int rank, unsigned type, std::string payload);
  void onChildGone(int rank);
  void maybeCompleteGather();
  void reply(int rank, uint32_t status, const std::vector<std::string>& parts);
  void killRemaining();

  int nRanks_;
  RunOptions options_;
  std::vector<Child> children_;
  RunResult result_;
  bool gatherBroken_ = false;
};

RunResult Launcher::run(const std::function<void(RankContext&)>& fn) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout * timeoutScale());
  std::vector<int> upFds(nRanks_ * 2), downFds(nRanks_ * 2);
  for (int r = 0; r < nRanks_; ++r) {
    if (::pipe2(&upFds[2 * r], O_CLOEXEC) != 0 || ::pipe2(&downFds[2 * r], O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2 failed: " << std::strerror(errno);
      return result_;
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  for (int r = 0; r < nRanks_; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (int o = 0; o < nRanks_; ++o) {
        ::close(upFds[2 * o]);
        ::close(downFds[2 * o + 1]);
        if (o != r) {
          ::close(upFds[2 * o + 1]);
          ::close(downFds[2 * o]);
        }
      }
      runChild(r, nRanks_, upFds[2 * r + 1], downFds[2 * r], parent, options_, fn);
    }
    if (pid < 0) {
      ADD_FAILURE() << "fork failed for rank " << r << ": " << std::strerror(errno);
      break;
    }
    children_[r].pid = pid;
    children_[r].running = true;
  }
  for (int r = 0; r < nRanks_; ++r) {
    ::close(upFds[2 * r + 1]);
    ::close(downFds[2 * r]);
    children_[r].upRead = upFds[2 * r];
    children_[r].downWrite = downFds[2 * r + 1];
  }
  for (int r = 0; r < nRanks_; ++r) {
    if (children_[r].pid < 0) {
      children_[r].running = false;
      result_.ranks[r].failures.push_back("never started (fork failed)");
    }
  }

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (int r = 0; r < nRanks_; ++r) {
      if (!children_[r].running) continue;
      fds.push_back({children_[r].upRead, POLLIN, 0});
      ranks.push_back(r);
    }
    if (fds.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      result_.timedOut = true;
      killRemaining();
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left + 1, 1000)));
    if (n < 0 && errno != EINTR) {
      ADD_FAILURE() << "poll failed: " << std::strerror(errno);
      result_.timedOut = true;
      killRemaining();
      break;
    }
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int r = ranks[i];
      uint32_t header[2];
      if (!readAll(children_[r].upRead, header, sizeof(header))) {
        onChildGone(r);
        continue;
      }
      std::string payload(header[1], '\0');
      if (!readAll(children_[r].upRead, payload.data(), payload.size())) {
        onChildGone(r);
        continue;
      }
      handleFrame(r, header[0], std::move(payload));
    }
  }
  for (auto& c : children_) {
    if (c.upRead >= 0) ::close(c.upRead);
    if (c.downWrite >= 0) ::close(c.downWrite);
  }
  result_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return result_;
}

void Launcher::handleFrame(int rank, unsigned type, std::string payload) {
  RankOutcome& out = result_.ranks[rank];
  switch (type) {
    case kFailure:
      out.failures.push_back(std::move(payload));
      break;
    case kReport: {
      const size_t nul = payload.find('\0');
      if (nul == std::string::npos) break;
      out.reports[payload.substr(0, nul)] = payload.substr(nul + 1);
      break;
    }
    case kNote:
      out.lastNote = std::move(payload);
      break;
    case kExpectDeath:
      out.deathExpected = true;
      break;
    case kGather:
      if (gatherBroken_) {
        reply(rank, 1, {});
        break;
      }
      children_[rank].pendingGather = std::move(payload);
      maybeCompleteGather();
      break;
    default:
      out.failures.push_back("launcher: unknown frame type " + std::to_string(type));
  }
}

void Launcher::maybeCompleteGather() {
  for (const auto& c : children_) {
    if (!c.pendingGather) return;
  }
  std::vector<std::string> parts;
  for (auto& c : children_) parts.push_back(*c.pendingGather);
  for (int r = 0; r < nRanks_; ++r) {
    children_[r].pendingGather.reset();
    reply(r, 0, parts);
  }
}

void Launcher::reply(int rank, uint32_t status, const std::vector<std::string>& parts) {
  std::string msg;
  putU32(msg, status);
  putU32(msg, static_cast<uint32_t>(parts.size()));
  for (const auto& p : parts) {
    putU32(msg, static_cast<uint32_t>(p.size()));
    msg += p;
  }
  // A dead child's pipe gives EPIPE (SIGPIPE is ignored while the launcher runs); its EOF is handled by poll.
  (void)writeAll(children_[rank].downWrite, msg.data(), msg.size());
}

void Launcher::onChildGone(int rank) {
  Child& c = children_[rank];
  RankOutcome& out = result_.ranks[rank];
  int status = 0;
  pid_t got = 0;
  // EOF means the process is exiting; wait for it a bounded time, then kill it.
  for (int i = 0; i < 5000; ++i) {
    got = ::waitpid(c.pid, &status, WNOHANG);
    if (got != 0) break;
    std::this_thread::sleep_for(1ms);
  }
  if (got == 0) {
    ::kill(c.pid, SIGKILL);
    got = ::waitpid(c.pid, &status, 0);
    out.failures.push_back("closed its launcher pipe but did not exit; killed");
  }
  if (got == c.pid) {
    if (WIFEXITED(status)) {
      out.exited = true;
      out.exitCode = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      out.termSignal = WTERMSIG(status);
    }
  }
  c.running = false;
  c.pendingGather.reset();
  // Peers waiting in a barrier for this rank would wait forever: release them with an error.
  gatherBroken_ = true;
  for (int r = 0; r < nRanks_; ++r) {
    if (children_[r].pendingGather) {
      children_[r].pendingGather.reset();
      reply(r, 1, {});
    }
  }
}

void Launcher::killRemaining() {
  for (int r = 0; r < nRanks_; ++r) {
    Child& c = children_[r];
    if (!c.running) continue;
    result_.ranks[r].timedOut = true;
    ::kill(c.pid, SIGKILL);
  }
  for (int r = 0; r < nRanks_; ++r) {
    Child& c = children_[r];
    if (!c.running) continue;
    int status = 0;
    if (::waitpid(c.pid, &status, 0) == c.pid && WIFSIGNALED(status)) result_.ranks[r].termSignal = WTERMSIG(status);
    c.running = false;
  }
}

}  // namespace

std::string RankOutcome::describe() const {
  std::ostringstream s;
  s << "rank " << rank << ": ";
  if (timedOut) {
    s << "still running at the timeout (killed)";
  } else if (termSignal != 0) {
    s << "killed by signal " << termSignal << " (" << ::strsignal(termSignal) << ")";
  } else if (exited) {
    s << "exited with code " << exitCode;
  } else {
    s << "status unknown";
  }
  if (!lastNote.empty()) s << "; last note: " << lastNote;
  for (const auto& f : failures) s << "\n    " << f;
  return s.str();
}

bool RunResult::ok() const {
  if (timedOut) return false;
  for (const auto& r : ranks) {
    if (r.deathExpected && r.termSignal != 0 && r.failures.empty()) continue;
    if (!r.ok()) return false;
  }
  return true;
}

const std::string& RunResult::report(int rank, const std::string& key) const {
  static const std::string kEmpty;
  const auto& reports = ranks.at(rank).reports;
  auto it = reports.find(key);
  return it == reports.end() ? kEmpty : it->second;
}

bool RunResult::allReportsEqual(const std::string& key) const {
  for (const auto& r : ranks) {
    if (r.reports.count(key) == 0) return false;
    if (r.reports.at(key) != ranks[0].reports.at(key)) return false;
  }
  return true;
}

RunResult runRanks(int nRanks, const RunOptions& options, const std::function<void(RankContext&)>& fn) {
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  Launcher launcher(nRanks, options);
  RunResult result = launcher.run(fn);
  ::sigaction(SIGPIPE, &previous, nullptr);
  if (options.failOnChildError) {
    for (const auto& r : result.ranks) {
      const bool expectedDeath = r.deathExpected && r.termSignal != 0 && r.failures.empty();
      if (!r.ok() && !expectedDeath) ADD_FAILURE() << r.describe();
    }
    if (result.timedOut) {
      std::ostringstream hung;
      for (const auto& r : result.ranks) {
        if (r.timedOut) hung << " " << r.rank;
      }
      ADD_FAILURE() << "job of " << nRanks << " ranks timed out after " << result.elapsed.count()
                    << " ms; ranks still running:" << hung.str();
    }
  }
  return result;
}

// ---- RankContext ----------------------------------------------------------------------------------------------

void RankContext::sendFrame(unsigned type, std::string_view payload) {
  std::string frame;
  putU32(frame, type);
  putU32(frame, static_cast<uint32_t>(payload.size()));
  frame.append(payload);
  const std::lock_guard<std::mutex> lock(sendMutex_);
  if (!writeAll(upFd_, frame.data(), frame.size())) ::_exit(4);  // the parent is gone
}

bool RankContext::exchange(unsigned type, std::string_view payload, std::string* replyOut) {
  sendFrame(type, payload);
  uint32_t head[2];
  if (!readAll(downFd_, head, sizeof(head))) ::_exit(4);
  std::string body;
  for (uint32_t i = 0; i < head[1]; ++i) {
    uint32_t len = 0;
    if (!readAll(downFd_, &len, sizeof(len))) ::_exit(4);
    std::string part(len, '\0');
    if (!readAll(downFd_, part.data(), len)) ::_exit(4);
    putU32(body, len);
    body += part;
  }
  *replyOut = std::move(body);
  return head[0] == 0;
}

std::vector<std::string> RankContext::allGather(std::string_view bytes) {
  std::string body;
  if (!exchange(kGather, bytes, &body)) {
    fail("launcher collective failed: a peer exited before reaching it");
    return std::vector<std::string>(nRanks_);
  }
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos + 4 <= body.size()) {
    uint32_t len = 0;
    std::memcpy(&len, body.data() + pos, 4);
    parts.push_back(body.substr(pos + 4, len));
    pos += 4 + len;
  }
  return parts;
}

bool RankContext::barrier() {
  const int before = failures_.load();
  allGather({});
  return failures_.load() == before;
}

std::string RankContext::broadcast(int root, std::string_view bytes) {
  auto parts = allGather(rank_ == root ? bytes : std::string_view{});
  return parts.at(root);
}

ncclUniqueId RankContext::newUniqueId() {
  ncclUniqueId id{};
  std::string bytes;
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) fail(std::string("ncclGetUniqueId returned ") + resultName(rc));
    bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  const std::string got = broadcast(0, bytes);
  if (got.size() == sizeof(id)) std::memcpy(&id, got.data(), sizeof(id));
  return id;
}

ncclUniqueId RankContext::uniqueId() {
  if (!haveId_) {
    id_ = newUniqueId();
    haveId_ = true;
  }
  return id_;
}

ncclComm_t RankContext::initComm() {
  const ncclUniqueId id = uniqueId();
  note("ncclCommInitRank");
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&comm, nRanks_, id, rank_);
  if (rc != ncclSuccess) {
    fail(std::string("ncclCommInitRank returned ") + resultName(rc) + ": " + ncclGetLastError(nullptr));
    return nullptr;
  }
  note("after ncclCommInitRank");
  return comm;
}

void RankContext::report(std::string_view key, std::string_view bytes) {
  std::string payload(key);
  payload.push_back('\0');
  payload.append(bytes);
  sendFrame(kReport, payload);
}

void RankContext::note(std::string_view text) { sendFrame(kNote, text); }

void RankContext::fail(std::string_view message) {
  ++failures_;
  std::fprintf(stderr, "[rank %d] FAILURE: %.*s\n", rank_, static_cast<int>(message.size()), message.data());
  sendFrame(kFailure, message);
}

void RankContext::killSelf(int sig) {
  sendFrame(kExpectDeath, {});
  std::fflush(stdout);
  std::fflush(stderr);
  ::kill(::getpid(), sig);
  for (;;) ::pause();  // a stop signal lands here until the launcher kills the process
}

// ---- helpers --------------------------------------------------------------------------------------------------

namespace {
int exitStatusOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
}  // namespace

pid_t startInNewPidNamespace(pid_t pid, const std::function<int()>& body) {
  const pid_t outer = ::fork();
  if (outer != 0) return outer;
  // In the child: unshare() moves only its later children into the new namespace. Each process dies with its
  // parent, and the whole namespace with its pid 1, so nothing outlives a test the launcher killed.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::unshare(CLONE_NEWPID) != 0) ::_exit(kNoPidNamespace);
  const pid_t first = ::fork();
  if (first == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (pid == 2) {
      const pid_t second = ::fork();
      if (second != 0) {  // pid 1 only waits for pid 2
        int status = 0;
        ::_exit(second > 0 && ::waitpid(second, &status, 0) == second ? exitStatusOf(status) : 1);
      }
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    }
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "in a pid namespace of its own: %s\n", e.what());
    }
    ::_exit(rc);
  }
  int status = 0;
  ::_exit(first > 0 && ::waitpid(first, &status, 0) == first ? exitStatusOf(status) : 1);
}

int waitForPidNamespace(pid_t child) {
  int status = 0;
  if (child <= 0 || ::waitpid(child, &status, 0) != child) return 1;
  return exitStatusOf(status);
}

bool shareUniqueIdThroughPipe(int rank, int nRanks, const int pipe[2], ncclUniqueId* id) {
  if (rank != 0) return ::read(pipe[0], id, sizeof(*id)) == static_cast<ssize_t>(sizeof(*id));
  if (ncclGetUniqueId(id) != ncclSuccess) return false;
  for (int r = 1; r < nRanks; ++r) {
    if (::write(pipe[1], id, sizeof(*id)) != static_cast<ssize_t>(sizeof(*id))) return false;
  }
  return true;
}

bool quickMode() {
  const char* s = std::getenv("CFX_TEST_QUICK");
  return s != nullptr && std::strcmp(s, "1") == 0;
}

void Hash128::update(const void* data, size_t bytes) {
  // FNV-1a over 64-bit words (bytes for the tail), with the 128-bit FNV prime.
  const unsigned __int128 prime = (static_cast<unsigned __int128>(1) << 88) + 0x13b;
  const auto* p = static_cast<const unsigned char*>(data);
  unsigned __int128 h = state_;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * prime;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * prime;
  h = (h ^ bytes) * prime;
  state_ = h;
}

std::string Hash128::digest() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(state_ >> 64),
                static_cast<unsigned long long>(state_));
  return buf;
}

const char* resultName(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "(unknown ncclResult_t)";
  }
}

}  // namespace cfx::itest
