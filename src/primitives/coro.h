// SPDX-License-Identifier: Apache-2.0
// Coro: the coroutine type algorithms are written in (primitives layer).
//
// An algorithm is straight-line code over verbs: `CFX_CO_TRY(co_await prims.recvReduceSend(...))`. A verb
// that cannot move data right now suspends the coroutine; the Executor resumes it once the transfer has
// finished. So one thread can drive many algorithms at once (several communicators in one group, collectives
// beside point-to-point), and a rank that waits sleeps on its doorbell instead of burning a core.
//
// Coros start suspended. Awaiting a Coro runs it to completion (symmetric transfer, no recursion on the
// stack) and yields its Status. The root Coro of a Work is started by the Executor.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include "common/status.h"

namespace cfx::prims {

struct Work;

// Coroutine frames come from a small per-thread cache: every op creates two or three frames (launch, algorithm,
// sometimes a helper), and the largest exceed glibc's per-thread cache, so plain new/delete cost more than the
// whole exchange of a small all-reduce. Frames are kept in kFrameClass-byte classes up to kFrameClasses classes,
// at most kFramesPerClass per class; larger frames and overflow go to the global allocator. A frame freed on
// another thread (a Work handed to a progress thread) simply lands in that thread's cache.
namespace frame_cache {
inline constexpr size_t kFrameClass = 256;
inline constexpr size_t kFrameClasses = 16;  // frames up to 4 KiB
inline constexpr int kFramesPerClass = 8;
void* allocate(size_t bytes);
void release(void* p, size_t bytes) noexcept;
}  // namespace frame_cache

class [[nodiscard]] Coro {
 public:
  struct promise_type {
    std::coroutine_handle<> continuation;  // the awaiting parent, or null for a root task
    Work* work = nullptr;                  // the Work this task runs for; children inherit it
    Status status;

    static void* operator new(size_t bytes) { return frame_cache::allocate(bytes); }
    static void operator delete(void* p, size_t bytes) noexcept { frame_cache::release(p, bytes); }

    Coro get_return_object() { return Coro(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_value(Status s) { status = std::move(s); }
    void unhandled_exception() noexcept {
      try {
        std::rethrow_exception(std::current_exception());
      } catch (const std::exception& e) {
        status = Status::error(Errc::InternalError, std::string("exception in algorithm: ") + e.what());
      } catch (...) {
        status = Status::error(Errc::InternalError, "unknown exception in algorithm");
      }
    }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Coro() = default;
  explicit Coro(Handle h) : h_(h) {}
  Coro(Coro&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Coro& operator=(Coro&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Coro(const Coro&) = delete;
  Coro& operator=(const Coro&) = delete;
  ~Coro() { reset(); }

  bool valid() const { return static_cast<bool>(h_); }
  bool done() const { return h_ && h_.done(); }
  Handle handle() const { return h_; }
  const Status& status() const { return h_.promise().status; }

  // Awaiting a child task: it inherits the parent's Work and resumes the parent when it completes.
  bool await_ready() const noexcept { return !h_ || h_.done(); }
  std::coroutine_handle<> await_suspend(Handle parent) noexcept {
    h_.promise().continuation = parent;
    h_.promise().work = parent.promise().work;
    return h_;
  }
  Status await_resume() { return h_ ? std::move(h_.promise().status) : Status(); }

 private:
  void reset() {
    if (h_) h_.destroy();
    h_ = {};
  }
  Handle h_;
};

}  // namespace cfx::prims

// CFX_TRY for coroutines: propagates a failed Status with co_return.
#define CFX_CO_TRY(expr)                                                      \
  do {                                                                        \
    if (::cfx::Status cfxSt_ = (expr); !cfxSt_.ok())                          \
      co_return std::move(cfxSt_).addFrame(std::source_location::current());  \
  } while (0)

// CFX_TRY_ASSIGN for coroutines: CFX_CO_TRY_ASSIGN(auto x, makeX()); co_returns the error on failure.
#define CFX_CO_TRY_ASSIGN_IMPL_(tmp, decl, expr)                                                        \
  auto tmp = (expr);                                                                                    \
  if (!tmp.ok()) co_return std::move(tmp).status().addFrame(std::source_location::current());          \
  decl = std::move(tmp).value()
#define CFX_CO_TRY_ASSIGN(decl, expr) CFX_CO_TRY_ASSIGN_IMPL_(CFX_CONCAT_(cfxCoRes_, __LINE__), decl, expr)
