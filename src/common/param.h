// SPDX-License-Identifier: Apache-2.0
// The knob registry: every NCCL_* / CFX_* variable is declared once, with a default, help text and a validator,
// in the .cc of the module that owns it (common layer). docs/ENV.md is generated from this registry.
//
// Sources and precedence follow NCCL: the process environment wins over NCCL_CONF_FILE (or ~/.nccl.conf),
// which wins over /etc/nccl.conf. Parsing is strict: "12abc" is rejected with a WARN and the default is kept.
// Values are read once per process on first get(); modules read them when a communicator is created and pass
// plain option structs down, so nothing below core/ calls get() on a hot path.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cfx::param {

class ParamBase {
 public:
  ParamBase(const char* name, const char* help);
  virtual ~ParamBase() = default;
  ParamBase(const ParamBase&) = delete;
  ParamBase& operator=(const ParamBase&) = delete;

  const char* name() const { return name_; }
  const char* help() const { return help_; }
  virtual std::string defaultText() const = 0;
  virtual const char* typeName() const = 0;
  // True when the default passes the validator (a unit test checks every knob).
  virtual bool defaultIsValid() const = 0;
  // The text from the environment or a config file, without parsing or logging.
  std::optional<std::string> rawValue() const;

 private:
  const char* name_;
  const char* help_;
};

// Every registered knob, in registration order.
const std::vector<ParamBase*>& all();

// Parses `text` strictly. Returns an error description, or nullopt on success.
std::optional<std::string> parse(const std::string& text, int64_t& out);
std::optional<std::string> parse(const std::string& text, int& out);
std::optional<std::string> parse(const std::string& text, bool& out);
std::optional<std::string> parse(const std::string& text, double& out);
std::optional<std::string> parse(const std::string& text, std::string& out);
std::optional<std::string> parse(const std::string& text, std::chrono::milliseconds& out);

std::string toText(int64_t v);
std::string toText(int v);
std::string toText(bool v);
std::string toText(double v);
std::string toText(const std::string& v);
std::string toText(std::chrono::milliseconds v);

void logSet(const char* name, const std::string& text);
void logInvalid(const char* name, const std::string& text, const std::string& why, const std::string& def);

template <typename T>
using Validator = std::function<std::optional<std::string>(const T&)>;

template <typename T>
class Param final : public ParamBase {
 public:
  Param(const char* name, T def, const char* help, Validator<T> validator = {})
      : ParamBase(name, help), default_(std::move(def)), validator_(std::move(validator)) {}

  // Parsed once, on first use; later calls return the cached value.
  const T& get() const {
    std::call_once(once_, [this] { value_ = load(); });
    return value_;
  }
  const T& defaultValue() const { return default_; }
  std::string defaultText() const override { return toText(default_); }
  const char* typeName() const override;
  bool defaultIsValid() const override { return !validator_ || !validator_(default_).has_value(); }

 private:
  T load() const {
    const std::optional<std::string> raw = rawValue();
    if (!raw) return default_;
    T parsed{};
    std::optional<std::string> err = parse(*raw, parsed);
    if (!err && validator_) err = validator_(parsed);
    if (err) {
      logInvalid(name(), *raw, *err, defaultText());
      return default_;
    }
    logSet(name(), *raw);
    return parsed;
  }

  T default_;
  Validator<T> validator_;
  mutable std::once_flag once_;
  mutable T value_{};
};

template <>
inline const char* Param<int64_t>::typeName() const { return "integer"; }
template <>
inline const char* Param<int>::typeName() const { return "integer"; }
template <>
inline const char* Param<bool>::typeName() const { return "bool (0/1)"; }
template <>
inline const char* Param<double>::typeName() const { return "number"; }
template <>
inline const char* Param<std::string>::typeName() const { return "string"; }
template <>
inline const char* Param<std::chrono::milliseconds>::typeName() const { return "milliseconds"; }

template <typename T>
Validator<T> inRange(T lo, T hi) {
  return [lo, hi](const T& v) -> std::optional<std::string> {
    if (v < lo || v > hi) return "out of range [" + toText(lo) + ", " + toText(hi) + "]";
    return std::nullopt;
  };
}

template <typename T>
Validator<T> atLeast(T lo) {
  return [lo](const T& v) -> std::optional<std::string> {
    if (v < lo) return "below the minimum " + toText(lo);
    return std::nullopt;
  };
}

Validator<std::string> oneOf(std::vector<std::string> choices);

// Variables named `prefix`* that are set (in the environment or a config file) but that no knob declares, with
// their values, in name order; names starting with one of `exempt` are left out (variables other programs of the
// job read, such as nccl-tests' NCCL_TESTS_*).
std::vector<std::pair<std::string, std::string>> undeclared(const std::string& prefix,
                                                            const std::vector<std::string>& exempt);

// Logs each of undeclared("NCCL_", {"NCCL_TESTS_"}) once per process at INFO/ENV as ignored, so a drop-in user
// learns why a setting written for NVIDIA's library had no effect.
void logIgnoredNcclVariables();

// Test hook: forget cached config-file contents so a test can point NCCL_CONF_FILE elsewhere.
void reloadConfigFilesForTesting();

}  // namespace cfx::param

// Declares a knob at namespace scope in the owning module's .cc file.
#define CFX_PARAM(type, var, envName, def, help, ...) \
  static ::cfx::param::Param<type> var(envName, def, help __VA_OPT__(, ) __VA_ARGS__)
