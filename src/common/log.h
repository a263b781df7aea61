// SPDX-License-Identifier: Apache-2.0
// Logging with NCCL's user contract: NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE and the line format
// "host:pid:tid [rank] NCCL INFO ..." that users grep for (common layer).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <source_location>

namespace cfx::log {

// Same order and values as NCCL's ncclDebugLogLevel.
enum class Level : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// NCCL's subsystem bits unchanged; ours live in high bits so a future NCCL subsystem never collides.
enum class Sys : uint64_t {
  Init = 1ull << 0,
  Coll = 1ull << 1,
  P2P = 1ull << 2,
  Shm = 1ull << 3,
  Net = 1ull << 4,
  Graph = 1ull << 5,
  Tuning = 1ull << 6,
  Env = 1ull << 7,
  Alloc = 1ull << 8,
  Call = 1ull << 9,
  Proxy = 1ull << 10,
  Nvls = 1ull << 11,
  Bootstrap = 1ull << 12,
  Reg = 1ull << 13,
  Profile = 1ull << 14,
  Ras = 1ull << 15,
  Ft = 1ull << 40,
  Compress = 1ull << 41,
  HostMem = 1ull << 42,
  Interpose = 1ull << 43,
};

namespace detail {
// -1 until the environment has been read. Relaxed: the values are only ever widened once, at init, and a
// racing reader at worst skips one line while init runs.
inline std::atomic<int> gLevel{-1};
inline std::atomic<uint64_t> gMask{0};
void init();
inline bool enabled(Level level, uint64_t sys) {
  int lv = gLevel.load(std::memory_order_relaxed);
  if (lv < 0) {
    init();
    lv = gLevel.load(std::memory_order_relaxed);
  }
  if (lv < static_cast<int>(level)) return false;
  return level != Level::Info && level != Level::Trace ? true : (gMask.load(std::memory_order_relaxed) & sys) != 0;
}
}  // namespace detail

inline bool enabled(Level level, Sys sys) { return detail::enabled(level, static_cast<uint64_t>(sys)); }

[[gnu::format(printf, 4, 5)]] void write(Level level, Sys sys, std::source_location where, const char* fmt, ...);

// ncclGetLastError(): the text of the most recent WARN in this process, "" if none. Never NULL; valid until the
// calling thread calls it again.
const char* lastError();
void setLastError(const char* text);

// The number printed in brackets: the rank the calling thread is working for (NCCL prints the CUDA device).
void setThreadRank(int rank);
int threadRank();

// Forces re-reading the environment (ncclResetDebugInit); tests use it after setenv.
void reset();

// Prints "NCCL version ..." once per process when NCCL_DEBUG >= VERSION.
void printVersionOnce();

// Bounds the WARN lines that strangers can trigger (a rejected connection, a failed accept, a forged datagram):
// at most `burst` lines per `interval`; the others are dropped and counted, and the next line let through says
// how many were (CFX_WARN_LIMITED). Thread-safe.
class WarnLimiter {
 public:
  explicit WarnLimiter(int burst = 5, std::chrono::milliseconds interval = std::chrono::seconds(1))
      : burst_(burst), interval_(interval) {}
  // The number of lines dropped since the last one let through (>= 0) when this line may be written; -1 when it
  // must be dropped.
  long admit();

 private:
  std::mutex mu_;
  const int burst_;
  const std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point windowStart_{};
  int inWindow_ = 0;
  long dropped_ = 0;
};

}  // namespace cfx::log

#define CFX_LOG_(level, sys, ...)                                                         \
  do {                                                                                    \
    if (::cfx::log::enabled(level, sys))                                                  \
      ::cfx::log::write(level, sys, std::source_location::current(), __VA_ARGS__);        \
  } while (0)

// WARN: the user must act, or an error is being returned. It always becomes ncclGetLastError(), even when
// NCCL_DEBUG is unset (PyTorch appends that text to its exceptions), so it is formatted unconditionally:
// warnings are rare.
#define CFX_WARN(...) ::cfx::log::write(::cfx::log::Level::Warn, ::cfx::log::Sys::Init, std::source_location::current(), __VA_ARGS__)
// CFX_WARN through a WarnLimiter: `fmt` must be a string literal, and at least one argument must follow it.
#define CFX_WARN_LIMITED(limiter, fmt, ...)                                                                     \
  do {                                                                                                         \
    if (const long cfxDropped_ = (limiter).admit(); cfxDropped_ > 0) {                                         \
      CFX_WARN(fmt " (%ld similar line%s dropped before this one)", __VA_ARGS__, cfxDropped_,                   \
               cfxDropped_ == 1 ? "" : "s");                                                                  \
    } else if (cfxDropped_ == 0) {                                                                             \
      CFX_WARN(fmt, __VA_ARGS__);                                                                              \
    }                                                                                                          \
  } while (0)
#define CFX_INFO(sys, ...) CFX_LOG_(::cfx::log::Level::Info, sys, __VA_ARGS__)
#define CFX_TRACE(sys, ...) CFX_LOG_(::cfx::log::Level::Trace, sys, __VA_ARGS__)
