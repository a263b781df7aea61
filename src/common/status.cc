// SPDX-License-Identifier: Apache-2.0
// Status implementation (common layer).
#include "common/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/source_path.h"

namespace cfx {

const char* errcName(Errc code) noexcept {
  switch (code) {
    case Errc::Ok: return "ok";
    case Errc::UnhandledCudaError: return "unhandled cuda error";
    case Errc::SystemError: return "system error";
    case Errc::InternalError: return "internal error";
    case Errc::InvalidArgument: return "invalid argument";
    case Errc::InvalidUsage: return "invalid usage";
    case Errc::RemoteError: return "remote error";
    case Errc::InProgress: return "in progress";
    case Errc::Timeout: return "timeout";
  }
  return "unknown";
}

Status::Status(const Status& other)
    : detail_(other.detail_ ? std::make_unique<Detail>(*other.detail_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) detail_ = other.detail_ ? std::make_unique<Detail>(*other.detail_) : nullptr;
  return *this;
}

Status Status::error(Errc code, std::string message, std::source_location origin) {
  Status st;
  st.detail_ = std::make_unique<Detail>(Detail{code, std::move(message), {origin}});
  return st;
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return ok() ? kEmpty : detail_->message;
}

const char* relativeSource(const char* file) noexcept {
  const char* p = std::strstr(file, "/src/");
  return p ? p + 5 : file;
}

std::string Status::origin() const {
  if (ok() || detail_->frames.empty()) return "";
  const auto& f = detail_->frames.front();
  return strprintf("%s:%u", relativeSource(f.file_name()), static_cast<unsigned>(f.line()));
}

Status&& Status::addFrame(std::source_location where) && {
  if (detail_) detail_->frames.push_back(where);
  return std::move(*this);
}

const std::vector<std::source_location>& Status::frames() const noexcept {
  static const std::vector<std::source_location> kNone;
  return ok() ? kNone : detail_->frames;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n));
    std::vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  }
  va_end(ap2);
  return out;
}

}  // namespace cfx
