// SPDX-License-Identifier: Apache-2.0
// perf harness: stdout table and JSON report (formats documented in reference/nccl_users.md section 2.4).
#include "report.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <ctime>

namespace cfx::perf {
namespace {

constexpr const char* kTestsVersion = "2.19.6";
constexpr const char* kTimeFormat = "%Y-%m-%d %H:%M:%S";

std::string now() {
  char buf[64];
  time_t t = time(nullptr);
  struct tm tmv;
  localtime_r(&t, &tmv);
  strftime(buf, sizeof(buf), kTimeFormat, &tmv);
  return buf;
}

struct IterStats {
  double min, max, avg, p50, p95, p99, stdev;
};

int percentileIndex(int n, int percentile) { return std::min(n - 1, (n * percentile + 99) / 100 - 1); }

IterStats iterStats(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  IterStats s{};
  const int n = static_cast<int>(t.size());
  s.min = t.front();
  s.max = t.back();
  s.p50 = t[n / 2];
  s.p95 = t[percentileIndex(n, 95)];
  s.p99 = t[percentileIndex(n, 99)];
  double sum = 0;
  for (double v : t) sum += v;
  s.avg = sum / n;
  double var = 0;
  for (double v : t) var += (v - s.avg) * (v - s.avg);
  s.stdev = std::sqrt(var / n);
  return s;
}

}  // namespace

// ---- JsonWriter ------------------------------------------------------------------------------------------

JsonWriter::~JsonWriter() { close(); }

bool JsonWriter::open(const std::string& path) {
  std::string tryPath = path;
  for (int attempt = 0;; ++attempt) {
    int fd = ::open(tryPath.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      fp_ = fdopen(fd, "w");
      break;
    }
    if (errno != EEXIST) {
      printf("# skipping json output; %s not accessible\n", tryPath.c_str());
      return false;
    }
    tryPath = path + "." + std::to_string(attempt);
  }
  printf("# Writing JSON output to %s\n", tryPath.c_str());
  return fp_ != nullptr;
}

void JsonWriter::close() {
  if (!fp_) return;
  while (!hasItems_.empty()) {
    // Unbalanced only after an error; close what is open so the file still parses. Objects and lists are
    // closed alike here because the writer no longer knows which is which; callers keep them balanced.
    hasItems_.pop_back();
    fputs("}", fp_);
  }
  fputs("\n", fp_);
  fclose(fp_);
  fp_ = nullptr;
}

void JsonWriter::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!hasItems_.empty()) {
    if (hasItems_.back()) fputs(",", fp_);
    hasItems_.back() = true;
  }
}

void JsonWriter::beginObject() {
  if (!fp_) return;
  separate();
  fputs("{", fp_);
  hasItems_.push_back(false);
}

void JsonWriter::endObject() {
  if (!fp_) return;
  fputs("}", fp_);
  hasItems_.pop_back();
}

void JsonWriter::beginList() {
  if (!fp_) return;
  separate();
  fputs("[", fp_);
  hasItems_.push_back(false);
}

void JsonWriter::endList() {
  if (!fp_) return;
  fputs("]", fp_);
  hasItems_.pop_back();
}

void JsonWriter::key(const char* name) {
  if (!fp_) return;
  separate();
  fprintf(fp_, "\"%s\":", name);
  afterKey_ = true;
}

void JsonWriter::str(const std::string& value) {
  if (!fp_) return;
  separate();
  fputc('"', fp_);
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      fputc('\\', fp_);
      fputc(c, fp_);
    } else if (c < 0x20) {
      fprintf(fp_, "\\u%04x", c);
    } else {
      fputc(c, fp_);
    }
  }
  fputc('"', fp_);
}

void JsonWriter::integer(int64_t value) {
  if (!fp_) return;
  separate();
  fprintf(fp_, "%lld", static_cast<long long>(value));
}

void JsonWriter::number(double value) {
  if (!fp_) return;
  separate();
  if (std::isnan(value)) {
    fputs("\"nan\"", fp_);
  } else {
    fprintf(fp_, "%lf", value);
  }
}

void JsonWriter::boolean(bool value) {
  if (!fp_) return;
  separate();
  fputs(value ? "true" : "false", fp_);
}

void JsonWriter::null() {
  if (!fp_) return;
  separate();
  fputs("null", fp_);
}

// ---- formatting ------------------------------------------------------------------------------------------

std::string floatField(double value, int width) {
  char buf[64];
  if (snprintf(buf, sizeof(buf), "%*.2f", width, value) <= width) return buf;
  if (snprintf(buf, sizeof(buf), "%*.1f", width, value) <= width) return buf;
  if (snprintf(buf, sizeof(buf), "%*.0f", width, value) <= width) return buf;
  snprintf(buf, sizeof(buf), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  buf[width] = '\0';  // nccl-tests' snprintf(width+1) truncates the same way
  return buf;
}

std::string deviceLine(int rank, int group, int pid, const std::string& host, int device, const std::string& name) {
  char buf[1024];
  snprintf(buf, sizeof(buf), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s", rank, group, pid,
           host.c_str(), device, 0, 0, 0, name.c_str());
  return buf;
}

// ---- Report ----------------------------------------------------------------------------------------------

void Report::jsonPreamble(int argc, char** argv, int libraryVersion) {
  if (!enabled_ || !json_->active()) return;
  json_->beginObject();  // closed by errors()
  json_->key("version"), json_->integer(3);
  json_->key("start_time"), json_->str(now());
  json_->key("args");
  json_->beginList();
  for (int i = 0; i < argc; ++i) json_->str(argv[i]);
  json_->endList();
  json_->key("env");
  json_->beginList();
  for (char** e = environ; e && *e; ++e) json_->str(*e);
  json_->endList();
  json_->key("nccl_version"), json_->integer(libraryVersion);
}

void Report::banner(const char* programName, int headersVersion, int libraryVersion, int nRanks, int nProcs) {
  if (!enabled_) return;
  const Options& o = options_;
  printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", kTestsVersion, headersVersion, libraryVersion);
  printf("# Collective test starting: %s\n", programName);
  printf(
      "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d unalign: %d\n",
      o.nThreads, o.nGpus, static_cast<long>(o.minBytes), static_cast<long>(o.maxBytes),
      static_cast<long>(o.stepFactor > 1 ? o.stepFactor : o.stepBytes), o.stepFactor > 1 ? "factor" : "bytes",
      o.warmupIters, o.iters, o.aggIters, o.check, o.cudaGraphLaunches, o.unalign);
  if (o.blocking == 1) printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
  if (o.blocking == 2) printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  if (o.blocking == 3) {
    printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
  }
  if (o.perIterTiming) {
    printf("# Per-Iteration Report: host wall-clock timing; i_* uses max over ranks");
    if (o.perIterSkip) printf("; summary skips first %d iterations", o.perIterSkip);
    printf(" \n");
  }
  if (o.parallelInit) printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  printf("# Conflux perf: host memory, NULL stream, %d ranks (%d processes x %d threads)\n", nRanks, nProcs,
         o.nThreads);
  printf("#\n");

  json_->key("config");
  json_->beginObject();
  json_->key("nthreads"), json_->integer(o.nThreads);
  json_->key("ngpus"), json_->integer(o.nGpus);
  json_->key("minimum_bytes"), json_->integer(static_cast<int64_t>(o.minBytes));
  json_->key("maximum_bytes"), json_->integer(static_cast<int64_t>(o.maxBytes));
  if (o.stepFactor > 1) {
    json_->key("step_factor"), json_->integer(static_cast<int64_t>(o.stepFactor));
  } else {
    json_->key("step_bytes"), json_->integer(static_cast<int64_t>(o.stepBytes));
  }
  json_->key("warmup_iters"), json_->integer(o.warmupIters);
  json_->key("iterations"), json_->integer(o.iters);
  json_->key("aggregated_iterations"), json_->integer(o.aggIters);
  json_->key("validation"), json_->integer(o.check);
  json_->key("graph"), json_->integer(o.cudaGraphLaunches);
  json_->key("blocking_collectives"), json_->boolean(o.blocking != 0);
  json_->key("per_iter_timing"), json_->boolean(o.perIterTiming != 0);
  json_->key("per_iter_skip"), json_->integer(o.perIterSkip);
  json_->key("parallel_init"), json_->boolean(o.parallelInit != 0);
}

void Report::devices(const std::vector<std::string>& lines) {
  if (!enabled_) return;
  printf("# Using devices\n");
  for (const std::string& l : lines) printf("%s\n", l.c_str());
  json_->key("devices");
  json_->beginList();
  for (const std::string& l : lines) {
    int rank = 0, group = 0, pid = 0, device = 0;
    char host[256] = "", hex[128] = "", info[512] = "";
    sscanf(l.c_str(), "#  Rank %d Group %d Pid %d on %255s device %d [%127[^]]] %511[^\n]", &rank, &group, &pid, host,
           &device, hex, info);
    json_->beginObject();
    json_->key("rank"), json_->integer(rank);
    json_->key("group"), json_->integer(group);
    json_->key("pid"), json_->integer(pid);
    json_->key("hostname"), json_->str(host);
    json_->key("device"), json_->integer(device);
    json_->key("device_hex"), json_->str(hex);
    json_->key("device_info"), json_->str(info);
    json_->endObject();
  }
  json_->endList();
  json_->endObject();  // config
}

void Report::note(const char* fmt, ...) {
  if (!enabled_) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

void Report::tableHeader() {
  if (!enabled_) return;
  const bool ts = options_.reportTimestamps != 0;
  const char* tsLbl = ts ? "timestamp" : "";
  const int tsPad = ts ? 19 : 0;
  const char* tsFmt = ts ? kTimeFormat : "";
  const char* timeStr = options_.reportCpuTime ? "cputime" : "time";
  printf("#\n");
  if (options_.perIterTiming) {
    printf(
        "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                "
        "in-place (+ per-iteration)\n",
        "", "", "", "", "");
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  "
        "%7s %*s\n",
        "size", "count", "type", "redop", "root", timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
        "i_cv%", timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsPad, tsLbl);
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  "
        "%7s %*s\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)",
        "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsPad, tsFmt);
  } else {
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "",
           "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
           "redop", "root", timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", tsPad, tsLbl);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
  }
  json_->key("results");
  json_->beginList();
}

void Report::rowStart(size_t bytes, size_t count, const char* typeName, const char* opName, int root) {
  if (!enabled_) return;
  char rootName[32];
  snprintf(rootName, sizeof(rootName), "%6i", root);
  printf("%12li  %12li  %8s  %6s  %6s", static_cast<long>(bytes), static_cast<long>(count), typeName, opName, rootName);
  json_->beginObject();
  json_->key("size"), json_->integer(static_cast<int64_t>(bytes));
  json_->key("count"), json_->integer(static_cast<int64_t>(count));
  json_->key("type"), json_->str(typeName);
  json_->key("redop"), json_->str(opName);
  json_->key("root"), json_->str(rootName);
}

void Report::rowPlacement(double timeUsec, double algBw, double busBw, bool reportErrors, int64_t wrong,
                          bool outOfPlace) {
  if (!enabled_) return;
  std::string t = floatField(timeUsec, 7), a = floatField(algBw, 6), b = floatField(busBw, 6);
  if (reportErrors) {
    printf("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(), static_cast<double>(wrong));
  } else {
    printf("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  }
  if (!outOfPlace && options_.reportTimestamps && !options_.perIterTiming) printf("%21s", now().c_str());
  json_->key(outOfPlace ? "out_of_place" : "in_place");
  json_->beginObject();
  json_->key(options_.reportCpuTime ? "cpu_time" : "time"), json_->number(timeUsec);
  json_->key("alg_bw"), json_->number(algBw);
  json_->key("bus_bw"), json_->number(busBw);
  json_->key("nwrong");
  if (reportErrors) {
    json_->number(static_cast<double>(wrong));
  } else {
    json_->null();
  }
  json_->endObject();
}

void Report::rowPerIter(const std::vector<double>& iterSec, bool outOfPlace) {
  if (!enabled_ || iterSec.empty()) return;
  std::vector<double> summary(iterSec.begin() + options_.perIterSkip, iterSec.end());
  IterStats s = iterStats(summary);
  double cvPct = s.avg > 0 ? (s.stdev / s.avg) * 100.0 : 0.0;
  printf("  %7s  %7s  %7s  %7s", floatField(s.min * 1e6, 7).c_str(), floatField(s.max * 1e6, 7).c_str(),
         floatField(s.p99 * 1e6, 7).c_str(), floatField(cvPct, 7).c_str());
  if (!outOfPlace && options_.reportTimestamps) printf("%21s", now().c_str());
  json_->key(outOfPlace ? "out_of_place_per_iter" : "in_place_per_iter");
  json_->beginObject();
  json_->key("skipped_iterations"), json_->integer(options_.perIterSkip);
  json_->key("min_us"), json_->number(s.min * 1e6);
  json_->key("max_us"), json_->number(s.max * 1e6);
  json_->key("avg_us"), json_->number(s.avg * 1e6);
  json_->key("p50_us"), json_->number(s.p50 * 1e6);
  json_->key("p95_us"), json_->number(s.p95 * 1e6);
  json_->key("p99_us"), json_->number(s.p99 * 1e6);
  json_->key("stdev_us"), json_->number(s.stdev * 1e6);
  json_->key("cv_pct"), json_->number(cvPct);
  json_->key("times_us");
  json_->beginList();
  for (double v : iterSec) json_->number(v * 1e6);
  json_->endList();
  json_->endObject();
}

void Report::rowEnd() {
  if (!enabled_) return;
  printf("\n");
  json_->key("actual_iterations"), json_->integer(options_.iters);
  json_->key("experiment_name"), json_->str("");
  json_->endObject();
}

void Report::footer(const char* programName, int outOfBounds, double avgBusBw, double minBw,
                    const std::string& memoryLine) {
  if (!enabled_) return;
  json_->endList();  // results
  printf("# %-20s : %d %s\n", "Out of bounds values", outOfBounds, outOfBounds ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw,
         minBw < 0 ? "" : (avgBusBw < minBw * 0.9 ? "FAILED" : "OK"));
  printf("#\n");
  printf("# Collective test concluded: %s\n", programName);
  if (!memoryLine.empty()) printf("# %-20s : %s\n", "Host memory usage", memoryLine.c_str());
  printf("#\n");
  json_->key("out_of_bounds");
  json_->beginObject();
  json_->key("count"), json_->integer(outOfBounds);
  json_->key("okay"), json_->boolean(outOfBounds == 0);
  json_->endObject();
  json_->key("average_bus_bandwidth");
  json_->beginObject();
  json_->key("bandwidth"), json_->number(avgBusBw);
  json_->key("okay");
  if (minBw < 0) {
    json_->str("unchecked");
  } else {
    json_->boolean(avgBusBw >= minBw * 0.9);
  }
  json_->endObject();
}

void Report::errors(const char* lastError) {
  if (!enabled_) return;
  if (lastError && lastError[0]) {
    printf("# error: %s\n", lastError);
  } else {
    printf("\n");
  }
  json_->key("errors");
  json_->beginList();
  if (lastError && lastError[0]) json_->str(lastError);
  json_->endList();
  json_->key("end_time"), json_->str(now());
  json_->endObject();  // top level
  json_->close();
}

}  // namespace cfx::perf
