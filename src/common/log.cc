// SPDX-License-Identifier: Apache-2.0
// Logging implementation: reads NCCL_DEBUG* once, formats lines exactly like NCCL's debug.cc (common layer).
#include "common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cfx_config.h"
#include "common/source_path.h"
#include "common/param.h"

namespace cfx::log {

CFX_PARAM(std::string, debugLevelParam, "NCCL_DEBUG", "",
          "Log level: VERSION, WARN, INFO, ABORT or TRACE. Unset means silent.");
CFX_PARAM(std::string, debugSubsysParam, "NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV",
          "Comma list of INFO subsystems (INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, "
          "BOOTSTRAP, REG, PROFILE, RAS, FT, COMPRESS, HOSTMEM, INTERPOSE, ALL); a leading ^ inverts the list.");
CFX_PARAM(std::string, debugFileParam, "NCCL_DEBUG_FILE", "",
          "Write the log to this file instead of stdout; %h is the host name, %p the pid.");

namespace {

std::mutex gMutex;                // guards gFile, gLastError and init
FILE* gFile = nullptr;            // stdout unless NCCL_DEBUG_FILE names a file
std::string gLastError;
char gHost[64] = "";
thread_local int tRank = 0;
std::once_flag gVersionOnce;

struct SubsysName {
  const char* name;
  uint64_t bits;
};
constexpr SubsysName kSubsys[] = {
    {"INIT", 1ull << 0},        {"COLL", 1ull << 1},      {"P2P", 1ull << 2},        {"SHM", 1ull << 3},
    {"NET", 1ull << 4},         {"GRAPH", 1ull << 5},     {"TUNING", 1ull << 6},     {"ENV", 1ull << 7},
    {"ALLOC", 1ull << 8},       {"CALL", 1ull << 9},      {"PROXY", 1ull << 10},     {"NVLS", 1ull << 11},
    {"BOOTSTRAP", 1ull << 12},  {"REG", 1ull << 13},      {"PROFILE", 1ull << 14},   {"RAS", 1ull << 15},
    {"FT", 1ull << 40},         {"COMPRESS", 1ull << 41}, {"HOSTMEM", 1ull << 42},   {"INTERPOSE", 1ull << 43},
    {"ALL", ~0ull},
};

int parseLevel(const std::string& v) {
  if (v.empty()) return static_cast<int>(Level::None);
  if (strcasecmp(v.c_str(), "VERSION") == 0) return static_cast<int>(Level::Version);
  if (strcasecmp(v.c_str(), "WARN") == 0) return static_cast<int>(Level::Warn);
  if (strcasecmp(v.c_str(), "INFO") == 0) return static_cast<int>(Level::Info);
  if (strcasecmp(v.c_str(), "ABORT") == 0) return static_cast<int>(Level::Abort);
  if (strcasecmp(v.c_str(), "TRACE") == 0) return static_cast<int>(Level::Trace);
  return static_cast<int>(Level::None);
}

uint64_t parseSubsys(const std::string& v) {
  bool invert = false;
  size_t pos = 0;
  if (!v.empty() && v[0] == '^') {
    invert = true;
    pos = 1;
  }
  uint64_t mask = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    const std::string tok = v.substr(pos, comma - pos);
    for (const auto& s : kSubsys) {
      if (strcasecmp(tok.c_str(), s.name) == 0) mask |= s.bits;
    }
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

FILE* openDebugFile(const std::string& pattern) {
  if (pattern.empty()) return stdout;
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'h') path += gHost;
      else if (c == 'p') path += std::to_string(getpid());
      else if (c == '%') path += '%';
      else {
        path += '%';
        path += c;
      }
    } else {
      path += pattern[i];
    }
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return stdout;
  setvbuf(f, nullptr, _IOLBF, 1024);
  return f;
}

}  // namespace

namespace detail {
void init() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gLevel.load(std::memory_order_relaxed) >= 0) return;
  if (gethostname(gHost, sizeof(gHost) - 1) != 0) std::strcpy(gHost, "unknown");
  if (char* dot = std::strchr(gHost, '.')) *dot = '\0';
  // The log reads its own knobs raw: the registry logs through us, so going through get() would recurse.
  const int level = parseLevel(debugLevelParam.rawValue().value_or(""));
  const std::string subsys = debugSubsysParam.rawValue().value_or(debugSubsysParam.defaultText());
  if (gFile == nullptr) gFile = level > static_cast<int>(Level::Version) ? openDebugFile(debugFileParam.rawValue().value_or("")) : stdout;
  gMask.store(parseSubsys(subsys), std::memory_order_relaxed);
  gLevel.store(level, std::memory_order_relaxed);
}
}  // namespace detail

void write(Level level, Sys sys, std::source_location where, const char* fmt, ...) {
  const bool print = enabled(level, sys);  // also runs init, which fills gHost
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);

  const long tid = syscall(SYS_gettid);
  char line[1280];
  int n = 0;
  if (level == Level::Warn || level == Level::Abort) {
    n = std::snprintf(line, sizeof(line), "\n%s:%d:%ld [%d] %s:%u NCCL WARN %s\n", gHost, getpid(), tid, tRank,
                      relativeSource(where.file_name()), static_cast<unsigned>(where.line()), msg);
  } else if (level == Level::Trace) {
    n = std::snprintf(line, sizeof(line), "%s:%d:%ld [%d] %s:%u NCCL TRACE %s\n", gHost, getpid(), tid, tRank,
                      relativeSource(where.file_name()), static_cast<unsigned>(where.line()), msg);
  } else {
    n = std::snprintf(line, sizeof(line), "%s:%d:%ld [%d] NCCL INFO %s\n", gHost, getpid(), tid, tRank, msg);
  }
  std::lock_guard<std::mutex> lock(gMutex);
  if (level == Level::Warn) gLastError = msg;
  if (print && n > 0) {
    std::fwrite(line, 1, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1), gFile ? gFile : stdout);
    std::fflush(gFile ? gFile : stdout);
  }
}

const char* lastError() {
  // A copy per thread: background threads (the health monitor, the bootstrap service) WARN too, and a caller
  // reading the text while one of them replaced it would race. The pointer stays valid until this thread asks again.
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gMutex);
  copy = gLastError;
  return copy.c_str();
}

void setLastError(const char* text) {
  std::lock_guard<std::mutex> lock(gMutex);
  gLastError = text ? text : "";
}

void setThreadRank(int rank) { tRank = rank; }
int threadRank() { return tRank; }

void reset() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gFile && gFile != stdout) std::fclose(gFile);
  gFile = nullptr;
  // Relaxed: see gLevel's comment; the next enabled() call re-runs init under gMutex.
  detail::gLevel.store(-1, std::memory_order_relaxed);
}

void printVersionOnce() {
  std::call_once(gVersionOnce, [] {
    if (!detail::enabled(Level::Version, ~0ull)) return;
    std::lock_guard<std::mutex> lock(gMutex);
    std::fprintf(gFile ? gFile : stdout, "NCCL version %d.%d.%d+conflux%s (host memory; CUDA or HIP via dlopen)\n",
                 CFX_NCCL_MAJOR, CFX_NCCL_MINOR, CFX_NCCL_PATCH, CFX_RELEASE_STRING);
    std::fflush(gFile ? gFile : stdout);
  });
}

long WarnLimiter::admit() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (now - windowStart_ >= interval_) {
    windowStart_ = now;
    inWindow_ = 0;
  }
  if (inWindow_ >= burst_) {
    ++dropped_;
    return -1;
  }
  ++inWindow_;
  const long dropped = dropped_;
  dropped_ = 0;
  return dropped;
}

}  // namespace cfx::log
