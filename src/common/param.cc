// SPDX-License-Identifier: Apache-2.0
// Knob registry implementation: config files, strict parsing, ENV logging (common layer).
#include "common/param.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "common/log.h"

namespace cfx::param {

namespace {

std::vector<ParamBase*>& registry() {
  static std::vector<ParamBase*> params;
  return params;
}

struct ConfigFiles {
  std::mutex mutex;
  bool loaded = false;
  std::map<std::string, std::string> values;
};

ConfigFiles& configFiles() {
  static ConfigFiles files;
  return files;
}

// NAME=value lines, '#' comments. Earlier files win, as NCCL applies them with setenv(overwrite=0).
void loadFile(const std::string& path, std::map<std::string, std::string>& into) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t\r");
      const size_t e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    const std::string key = trim(line.substr(0, eq));
    if (!key.empty()) into.emplace(key, trim(line.substr(eq + 1)));
  }
}

// Declared for the registry (docs/ENV.md, and so it is not reported as ignored); configValues() reads it with
// getenv, since going through the registry would ask the files for the name of the file.
CFX_PARAM(std::string, confFileParam, "NCCL_CONF_FILE", "",
          "A file of NAME=value lines ('#' starts a comment) read instead of ~/.nccl.conf; /etc/nccl.conf is read "
          "after either. The environment wins over both files, and NCCL_CONF_FILE wins over /etc/nccl.conf.");

const std::map<std::string, std::string>& configValues() {
  ConfigFiles& cf = configFiles();
  std::lock_guard<std::mutex> lock(cf.mutex);
  if (!cf.loaded) {
    cf.loaded = true;
    if (const char* conf = std::getenv("NCCL_CONF_FILE"); conf && *conf) {
      loadFile(conf, cf.values);
    } else if (const char* home = std::getenv("HOME"); home && *home) {
      loadFile(std::string(home) + "/.nccl.conf", cf.values);
    }
    loadFile("/etc/nccl.conf", cf.values);
  }
  return cf.values;
}

}  // namespace

ParamBase::ParamBase(const char* name, const char* help) : name_(name), help_(help) { registry().push_back(this); }

std::optional<std::string> ParamBase::rawValue() const {
  if (const char* env = std::getenv(name_)) return std::string(env);
  const auto& values = configValues();
  if (auto it = values.find(name_); it != values.end()) return it->second;
  return std::nullopt;
}

const std::vector<ParamBase*>& all() { return registry(); }

std::optional<std::string> parse(const std::string& text, int64_t& out) {
  if (text.empty()) return "empty";
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 0);  // base 0: hex works, as in NCCL
  if (errno == ERANGE) return "out of range";
  if (end == text.c_str() || *end != '\0') return "not an integer";
  out = v;
  return std::nullopt;
}

std::optional<std::string> parse(const std::string& text, int& out) {
  int64_t v = 0;
  if (auto err = parse(text, v)) return err;
  if (v < INT32_MIN || v > INT32_MAX) return "out of range";
  out = static_cast<int>(v);
  return std::nullopt;
}

std::optional<std::string> parse(const std::string& text, bool& out) {
  if (text == "1" || strcasecmp(text.c_str(), "true") == 0 || strcasecmp(text.c_str(), "yes") == 0) {
    out = true;
    return std::nullopt;
  }
  if (text == "0" || strcasecmp(text.c_str(), "false") == 0 || strcasecmp(text.c_str(), "no") == 0) {
    out = false;
    return std::nullopt;
  }
  return "not a boolean (use 0 or 1)";
}

std::optional<std::string> parse(const std::string& text, double& out) {
  if (text.empty()) return "empty";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || !std::isfinite(v)) return "out of range";
  if (end == text.c_str() || *end != '\0') return "not a number";
  out = v;
  return std::nullopt;
}

std::optional<std::string> parse(const std::string& text, std::string& out) {
  out = text;
  return std::nullopt;
}

std::optional<std::string> parse(const std::string& text, std::chrono::milliseconds& out) {
  int64_t v = 0;
  if (auto err = parse(text, v)) return err;
  out = std::chrono::milliseconds(v);
  return std::nullopt;
}

std::string toText(int64_t v) { return std::to_string(v); }
std::string toText(int v) { return std::to_string(v); }
std::string toText(bool v) { return v ? "1" : "0"; }
std::string toText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
std::string toText(const std::string& v) { return v; }
std::string toText(std::chrono::milliseconds v) { return std::to_string(v.count()); }

void logSet(const char* name, const std::string& text) {
  CFX_INFO(log::Sys::Env, "%s set by environment to %s.", name, text.c_str());
}

void logInvalid(const char* name, const std::string& text, const std::string& why, const std::string& def) {
  CFX_WARN("Invalid value %s for %s (%s), using default %s.", text.c_str(), name, why.c_str(), def.c_str());
}

Validator<std::string> oneOf(std::vector<std::string> choices) {
  return [choices = std::move(choices)](const std::string& v) -> std::optional<std::string> {
    for (const auto& c : choices) {
      if (strcasecmp(c.c_str(), v.c_str()) == 0) return std::nullopt;
    }
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    return "not one of: " + list;
  };
}

std::vector<std::pair<std::string, std::string>> undeclared(const std::string& prefix,
                                                            const std::vector<std::string>& exempt) {
  std::map<std::string, std::string> found(configValues());
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) found[std::string(entry.substr(0, eq))] = entry.substr(eq + 1);  // env wins
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : found) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    bool skip = false;
    for (const std::string& e : exempt) skip = skip || name.compare(0, e.size(), e) == 0;
    for (const ParamBase* p : registry()) skip = skip || name == p->name();
    if (!skip) out.emplace_back(name, value);
  }
  return out;
}

void logIgnoredNcclVariables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& [name, value] : undeclared("NCCL_", {"NCCL_TESTS_"})) {
      CFX_INFO(log::Sys::Env,
               "%s set by environment to %s, but this library does not use it: ignored "
               "(docs/ENV.md lists the variables it reads).",
               name.c_str(), value.c_str());
    }
  });
}

void reloadConfigFilesForTesting() {
  ConfigFiles& cf = configFiles();
  std::lock_guard<std::mutex> lock(cf.mutex);
  cf.loaded = false;
  cf.values.clear();
}

}  // namespace cfx::param
