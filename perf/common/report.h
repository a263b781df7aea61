// SPDX-License-Identifier: Apache-2.0
// perf harness: the nccl-tests report. Every stdout line that nccl-tests prints is reproduced byte for byte
// (same printf formats, trailing spaces included) so that existing log parsers and CI gates keep working;
// Conflux-only information goes on extra '#' lines. The -J JSON report follows nccl-tests' schema.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "options.h"

namespace cfx::perf {

// A minimal streaming JSON writer (commas and nesting handled here).
class JsonWriter {
 public:
  ~JsonWriter();
  // Opens path with O_EXCL semantics, trying path.0, path.1, ... when it exists, as nccl-tests does; prints
  // "# Writing JSON output to <path>" or "# skipping json output; ..." on stdout.
  bool open(const std::string& path);
  bool active() const { return fp_ != nullptr; }
  void close();

  void beginObject();
  void endObject();
  void beginList();
  void endList();
  void key(const char* name);
  void str(const std::string& value);
  void integer(int64_t value);
  void number(double value);
  void boolean(bool value);
  void null();

 private:
  void separate();
  FILE* fp_ = nullptr;
  std::vector<bool> hasItems_;  // one per open object/list
  bool afterKey_ = false;
};

// One rank's "#  Rank ..." line, without the trailing newline.
std::string deviceLine(int rank, int group, int pid, const std::string& host, int device, const std::string& name);

// nccl-tests' number formatting: width characters, 2 decimals, falling back to 1, 0, then %.1e (%.0e when
// width < 7) when the value does not fit.
std::string floatField(double value, int width);

// Writes the report; all methods do nothing unless enabled (global rank 0).
class Report {
 public:
  Report(const Options& options, bool enabled, JsonWriter* json) : options_(options), enabled_(enabled), json_(json) {}
  bool enabled() const { return enabled_; }

  // Top-level JSON fields written before anything else (-J): version, start_time, args, env, nccl_version.
  void jsonPreamble(int argc, char** argv, int libraryVersion);
  void banner(const char* programName, int headersVersion, int libraryVersion, int nRanks, int nProcs);
  void devices(const std::vector<std::string>& lines);
  void note(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void tableHeader();
  void rowStart(size_t bytes, size_t count, const char* typeName, const char* opName, int root);
  void rowPlacement(double timeUsec, double algBw, double busBw, bool reportErrors, int64_t wrong, bool outOfPlace);
  void rowPerIter(const std::vector<double>& iterSec, bool outOfPlace);
  void rowEnd();
  // Footer through the final '#' line; returns nothing. minBw < 0 means NCCL_TESTS_MIN_BW is unset.
  void footer(const char* programName, int outOfBounds, double avgBusBw, double minBw, const std::string& memoryLine);
  void errors(const char* lastError);

 private:
  const Options& options_;
  bool enabled_;
  JsonWriter* json_;
};

}  // namespace cfx::perf
