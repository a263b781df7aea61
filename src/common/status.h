// SPDX-License-Identifier: Apache-2.0
// Status and Result<T>: the one error vocabulary inside Conflux (common layer).
// Errc mirrors ncclResult_t value for value (checked in api/), so the C boundary is a cast.
#pragma once

#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace cfx {

enum class Errc : int {
  Ok = 0,
  UnhandledCudaError = 1,
  SystemError = 2,
  InternalError = 3,
  InvalidArgument = 4,
  InvalidUsage = 5,
  RemoteError = 6,
  InProgress = 7,
  // NCCL 2.30 gives 8 to ncclTimeout. A 2.28 caller cannot know it, so the api layer reports it as
  // ncclRemoteError; the message still says "timeout" and names the peer.
  Timeout = 8,
};

const char* errcName(Errc code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  // Creates an error where the context is: say what failed, with which peer/rank/address, and what to try.
  static Status error(Errc code, std::string message, std::source_location origin = std::source_location::current());

  bool ok() const noexcept { return detail_ == nullptr; }
  Errc code() const noexcept { return ok() ? Errc::Ok : detail_->code; }
  // Empty for Ok.
  const std::string& message() const noexcept;
  // File:line where the error was created (source-relative), or "" for Ok.
  std::string origin() const;
  // Records a CFX_TRY frame; printed at INFO when the error is reported (NCCL's "-> N" trail).
  Status&& addFrame(std::source_location where) &&;
  const std::vector<std::source_location>& frames() const noexcept;

 private:
  struct Detail {
    Errc code;
    std::string message;
    std::vector<std::source_location> frames;  // frames[0] is the origin
  };
  std::unique_ptr<Detail> detail_;
};

// Holds a T or a failed Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): return-by-value ergonomics
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return status_.ok(); }
  const Status& status() const& noexcept { return status_; }
  Status&& status() && noexcept { return std::move(status_); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// printf into a std::string.
[[gnu::format(printf, 1, 2)]] std::string strprintf(const char* fmt, ...);

}  // namespace cfx

#define CFX_TRY(expr)                                                      \
  do {                                                                     \
    if (::cfx::Status cfxSt_ = (expr); !cfxSt_.ok())                       \
      return std::move(cfxSt_).addFrame(std::source_location::current()); \
  } while (0)

#define CFX_CONCAT_INNER_(a, b) a##b
#define CFX_CONCAT_(a, b) CFX_CONCAT_INNER_(a, b)
#define CFX_TRY_ASSIGN_IMPL_(tmp, decl, expr)                                       \
  auto tmp = (expr);                                                                \
  if (!tmp.ok()) return std::move(tmp).status().addFrame(std::source_location::current()); \
  decl = std::move(tmp).value()

// CFX_TRY_ASSIGN(auto x, makeX()); on failure returns the error from the enclosing function.
#define CFX_TRY_ASSIGN(decl, expr) CFX_TRY_ASSIGN_IMPL_(CFX_CONCAT_(cfxRes_, __LINE__), decl, expr)
