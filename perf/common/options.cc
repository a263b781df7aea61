// SPDX-License-Identifier: Apache-2.0
// perf harness: command-line parsing. We use getopt_long because nccl-tests does: the flags are short options
// with values ("-b 8 -e 128M -f 2", "-r -1"), long names accept "--name value", "--name=value" and unique
// prefixes, and scripts written for nccl-tests rely on exactly those rules. A CLI library would change them.
// Where nccl-tests is lenient we are strict, so a typo cannot pass a CI gate: an unknown flag, a missing value, a
// stray argument, a number with trailing text and an unknown -d/-o name each exit 6 (InvalidUsage) with one line
// on stderr, printed by the job's rank 0 only (nccl-tests prints usage and exits 0, or falls back to a default).
#include "options.h"

#include <conflux.h>
#include <getopt.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "datatypes.h"

namespace cfx::perf {
namespace {

// The leading ':' makes getopt return ':' for a missing value (and '?' for an unknown flag) without printing.
constexpr const char* kOptString = ":t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:";

const struct option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    {"codec", required_argument, nullptr, kOptCodec},
    {"codec_mode", required_argument, nullptr, kOptCodecMode},
    {"exclusive", required_argument, nullptr, kOptExclusive},
    {"rows", required_argument, nullptr, kOptRows},
    {"cols", required_argument, nullptr, kOptCols},
    {"tokens", required_argument, nullptr, kOptTokens},
    {"hidden", required_argument, nullptr, kOptHidden},
    {"topk", required_argument, nullptr, kOptTopk},
    {"experts", required_argument, nullptr, kOptExperts},
    {"dtype", required_argument, nullptr, kOptDtype},
    {"routing", required_argument, nullptr, kOptRouting},
    {"mode", required_argument, nullptr, kOptMode},
    {nullptr, 0, nullptr, 0},
};

// "<number>[ ]<K|M|G>" with binary units, as nccl-tests reads -b/-e/-i ("1.5G" works). Negative on error.
double parseSize(const char* text) {
  double size = 0;
  char unit = 0;
  int n = sscanf(text, "%lf %c", &size, &unit);
  if (n < 1) return -1.0;
  if (n == 1) return size;
  switch (unit) {
    case 'G':
    case 'g':
      return size * 1024.0 * 1024.0 * 1024.0;
    case 'M':
    case 'm':
      return size * 1024.0 * 1024.0;
    case 'K':
    case 'k':
      return size * 1024.0;
    default:
      return -1.0;
  }
}

// Usage errors are the same on every rank, so only the job's rank 0 (or a process started without a launcher)
// prints them; the others exit with the same status in silence.
bool printsUsageErrors() {
  static const bool prints = [] {
    cfxLaunchInfo info;
    return cfxGetLaunchInfo(&info) != ncclSuccess || info.rank == 0;
  }();
  return prints;
}

[[gnu::format(printf, 1, 2)]] void usageError(const char* fmt, ...) {
  if (!printsUsageErrors()) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
}

// How the user spells a flag: "-n" for one with a letter, "--rows" for a long-only one.
std::string flagName(int flag) {
  if (flag < 256) return std::string("-") + static_cast<char>(flag);
  for (const option& o : kLongOptions) {
    if (o.name != nullptr && o.val == flag) return std::string("--") + o.name;
  }
  return "?";
}

// An integer in strtol's base-0 forms (12, 0x10, -1), with nothing after it.
bool readInt(const char* text, int flag, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX) {
    usageError("invalid value '%s' for %s: not an integer\n", text, flagName(flag).c_str());
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

void printUsage(const char* programName) {
  printf(
      "USAGE: %s \n\t"
      "[-t,--nthreads <num threads>] \n\t"
      "[-g,--ngpus <gpus per thread>] \n\t"
      "[-b,--minbytes <min size in bytes>] \n\t"
      "[-e,--maxbytes <max size in bytes>] \n\t"
      "[-i,--stepbytes <increment size>] \n\t"
      "[-f,--stepfactor <increment factor>] \n\t"
      "[-n,--iters <iteration count>] \n\t"
      "[-m,--agg_iters <aggregated iteration count>] \n\t"
      "[-w,--warmup_iters <warmup iteration count>] \n\t"
      "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
      "[-p,--parallel_init <0/1>] \n\t"
      "[-c,--check <check iteration count>] \n\t"
      "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
      "[-d,--datatype <nccltype/all>] \n\t"
      "[-r,--root <root>] \n\t"
      "[-z,--blocking <0/1/2/3> 1=barrier after each inner iter (-m), 2=no barrier, 3=wait and barrier after "
      "each outer iter (-n)] \n\t"
      "[-y,--stream_null <0/1>] \n\t"
      "[-T,--timeout <time in seconds>] \n\t"
      "[-G,--cudagraph <num graph launches>] \n\t"
      "[-C,--report_cputime <0/1>] \n\t"
      "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
      "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json "
      "supported presently.)] \n\t"
      "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
      "[-R,--local_register <0/1/2> enable local (1) or symmetric (2) buffer registration on send/recv buffers "
      "(default: disable (0))] \n\t"
      "[-x,--cta_policy <0/1/2> set CTA policy (NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1), "
      "NCCL_CTA_POLICY_ZERO (2)) (default: do not set)] \n\t"
      "[-D,--device_implementation <implementation number> enable device implementation (default: 0, use NCCL "
      "implementation; requires -R 2 if > 0)] \n\t"
      "[-V,--device_cta_count <number> set number of CTAs for device implementation (default: 16)] \n\t"
      "[-M,--memory <0/1> enable memory usage report (default: 0)] \n\t"
      "[-u,--unalign <index of first element> Misalign source and destination buffers (default: 0)] \n\t"
      "[-I,--per_iter_timing <0/1> per-iteration timing\n\t"
      "    (best with -z 0, -z 2, or -z 3; with -z 1 includes barrier wait;\n\t"
      "    i_p99 uses nearest-rank percentile and may equal i_max\n\t"
      "    with <100 samples) (default: 0)] \n\t"
      "[-K,--per_iter_skip <count> exclude leading samples from -I summary stats (default: 0)] \n\t"
      "[-h,--help]\n"
      "Conflux additions: [--codec <none|bf16|fp16|int8|mxint8|mxfp8|int4|fp8|topk:FRACTION[:values=int8|2bit|...]>\n\t"
      "    compressed all_reduce, reduce_scatter, all_gather and broadcast (conflux.h); each row is followed by\n\t"
      "    '# codec NAME wire_bytes_per_rank B rel_l2 E', and -c checks within the codec's error bound] \n\t"
      "[--codec_mode <auto|always|never> where to compress (default: always)] \n\t"
      "scan_perf: [--exclusive <0/1> cfxExScan instead of cfxScan (default: 0)] [-o affine with --rows <R> --cols <C>\n\t"
      "    the affine (decayed-state) op on groups of R decays and an R x C state (default: 128 x 128)]\n\t"
      "moe_perf: [--tokens <per rank; sets -b and -e>] [--hidden <H> (2048)] [--topk <K> (2)] [--experts <E> (8)]\n\t"
      "    [--dtype <bf16|fp16|fp32>] [--routing <uniform|zipf:S|hot:FRACTION>] [--mode <fused|unfused>]\n"
      "Conflux host-memory notes: ranks are threads (-t) and/or processes started by cfxrun, torchrun, mpirun\n"
      "or srun (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS, with\n"
      "MASTER_ADDR/MASTER_PORT or CFX_MASTER_ADDR/CFX_MASTER_PORT). -g must be 1; -G and -D need a GPU build.\n",
      programName);
}

// Reads one size flag; false (after printing nccl-tests' message) when it does not parse.
bool readSize(const char* text, const char* what, size_t* out) {
  double parsed = parseSize(text);
  if (parsed < 0) {
    usageError("invalid size specified for '%s'\n", what);
    return false;
  }
  *out = static_cast<size_t>(parsed);
  return true;
}

// Rejects combinations that cannot work, and warns and fixes those nccl-tests also fixes.
bool validate(Options* o, int* exitCode) {
  if (o->minBytes > o->maxBytes) {
    usageError("invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n",
               static_cast<unsigned long long>(o->minBytes), static_cast<unsigned long long>(o->maxBytes));
    *exitCode = -1;
    return false;
  }
  if (o->nGpus != 1) {
    usageError("-g (GPUs per thread) needs GPU support; use -t for several ranks per process\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->nThreads < 1) {
    usageError("-t (threads per process) must be at least 1, got %d\n", o->nThreads);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->cudaGraphLaunches > 0) {
    fprintf(stderr,
            "-G (CUDA graphs) needs a GPU build: this harness drives host-memory buffers on the NULL stream, which "
            "cannot be captured\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->deviceImpl > 0) {
    usageError("-D (device implementation) needs a GPU build; host-memory runs use the library's collectives\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->iters < 1 || o->aggIters < 1 || o->warmupIters < 0 || o->check < 0 || o->runCycles < 0) {
    usageError("invalid iteration counts: -n and -m must be >= 1; -w, -c and -N must be >= 0\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->average < 0 || o->average > 3) {
    usageError("-a (average) must be 0, 1, 2 or 3, got %d\n", o->average);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->blocking < 0 || o->blocking > 3) {
    usageError("-z (blocking) must be 0, 1, 2 or 3, got %d\n", o->blocking);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->unalign < 0) {
    usageError("-u (unalign) must be >= 0, got %d\n", o->unalign);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->perIterTiming != 0 && o->perIterTiming != 1) {
    usageError("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.\n");
    o->perIterTiming = 0;
  }
  if (o->perIterSkip < 0 || o->perIterSkip >= o->iters) {
    usageError("per-iteration skip (-K) must be between 0 and %d. Disabling.\n", o->iters - 1);
    o->perIterSkip = 0;
  }
  if (o->perIterSkip && !o->perIterTiming) {
    usageError("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.\n");
    o->perIterSkip = 0;
  }
  return true;
}

// The flags whose value is one int, and the member each sets.
constexpr std::pair<int, int Options::*> kIntFlags[] = {
    {'t', &Options::nThreads},
    {'g', &Options::nGpus},
    {'n', &Options::iters},
    {'m', &Options::aggIters},
    {'w', &Options::warmupIters},
    {'N', &Options::runCycles},
    {'c', &Options::check},
    {'p', &Options::parallelInit},
    {'r', &Options::root},
    {'z', &Options::blocking},
    {'y', &Options::streamNull},
    {'T', &Options::timeoutSec},
    {'G', &Options::cudaGraphLaunches},
    {'C', &Options::reportCpuTime},
    {'S', &Options::reportTimestamps},
    {'a', &Options::average},
    {'R', &Options::localRegister},
    {'M', &Options::memoryReport},
    {'I', &Options::perIterTiming},
    {'K', &Options::perIterSkip},
    {'x', &Options::ctaPolicy},
    {'D', &Options::deviceImpl},
    {'V', &Options::deviceCtaCount},
    {'u', &Options::unalign},
    {kOptExclusive, &Options::exclusive},
    {kOptRows, &Options::rows},
    {kOptCols, &Options::cols},
    {kOptHidden, &Options::hidden},
    {kOptTopk, &Options::topk},
    {kOptExperts, &Options::experts},
};

int* intFlag(Options* o, int flag) {
  for (const auto& [f, member] : kIntFlags) {
    if (f == flag) return &(o->*member);
  }
  return nullptr;
}

bool parseCommandLine(int argc, char** argv, const char* programName, Options* o, int* exitCode) {
  optind = 1;
  opterr = 0;  // getopt's own messages would come from every rank, in a different wording from ours
  auto invalid = [&] {
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  };
  for (;;) {
    int longIndex = 0;
    const int c = getopt_long(argc, argv, kOptString, kLongOptions, &longIndex);
    if (c == -1) break;
    if (int* value = intFlag(o, c)) {
      if (!readInt(optarg, c, value)) return invalid();
      continue;
    }
    switch (c) {
      case 'b':
        if (!readSize(optarg, "minbytes", &o->minBytes)) return *exitCode = -1, false;
        break;
      case 'e':
        if (!readSize(optarg, "maxbytes", &o->maxBytes)) return *exitCode = -1, false;
        break;
      case 'i':
        if (!readSize(optarg, "stepBytes", &o->stepBytes)) return *exitCode = -1, false;
        break;
      case 'f': {
        int factor = 0;
        if (!readInt(optarg, 'f', &factor)) return invalid();
        o->stepFactor = static_cast<size_t>(factor);
        break;
      }
      case 'o':
        o->op = parseOpName(optarg);
        if (o->op == kUnknownName) {
          usageError("invalid op '%s' for -o (sum prod max min avg mulsum all; affine for scan_perf)\n", optarg);
          return invalid();
        }
        break;
      case 'd':
        o->type = parseTypeName(optarg);
        if (o->type == kUnknownName) {
          usageError(
              "invalid datatype '%s' for -d (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 "
              "f8e4m3 f8e5m2 all)\n",
              optarg);
          return invalid();
        }
        break;
      case 'J':
        o->outputFile = optarg;
        break;
      case kOptCodec:
        o->codec = optarg;
        break;
      case kOptTokens:
        if (!readSize(optarg, "tokens", &o->tokens)) return invalid();
        break;
      case kOptDtype: {
        const std::string d = optarg;
        o->type = parseTypeName(d == "bf16" ? "bfloat16" : d == "fp16" ? "half" : d == "fp32" ? "float" : optarg);
        if (o->type == kUnknownName || o->type < 0) {
          usageError("invalid --dtype '%s': expected bf16, fp16 or fp32\n", optarg);
          return invalid();
        }
        break;
      }
      case kOptRouting:
        o->routing = optarg;
        break;
      case kOptMode:
        o->mode = optarg;
        if (o->mode != "fused" && o->mode != "unfused") {
          usageError("invalid --mode '%s': expected fused or unfused\n", optarg);
          return invalid();
        }
        break;
      case kOptCodecMode:
        o->codecMode = optarg;
        if (o->codecMode != "auto" && o->codecMode != "always" && o->codecMode != "never") {
          usageError("invalid --codec_mode '%s': expected auto, always or never\n", optarg);
          return invalid();
        }
        break;
      case 'h':
        printUsage(programName);
        *exitCode = 0;
        return false;
      case ':':
        usageError("%s: option '%s' needs a value (-h lists the flags)\n", programName, argv[optind - 1]);
        return invalid();
      default:  // '?': a flag nobody knows, or an ambiguous prefix of long ones
        if (optopt != 0) {
          usageError("%s: unknown option '-%c' (-h lists the flags)\n", programName, optopt);
        } else {
          usageError("%s: unknown or ambiguous option '%s' (-h lists the flags)\n", programName, argv[optind - 1]);
        }
        return invalid();
    }
  }
  if (optind < argc) {
    usageError("%s: unexpected argument '%s': every value follows its flag (-h lists the flags)\n", programName,
               argv[optind]);
    return invalid();
  }
  if (o->deviceCtaCount <= 0 || o->deviceCtaCount > 128) {
    usageError("device_cta_count (-V) must be positive and less than 128, got %d. Using default value 16.\n",
               o->deviceCtaCount);
    o->deviceCtaCount = 16;
  }
  if (o->tokens > 0 && o->type >= 0) {  // moe_perf: one size, the tokens' bytes
    o->minBytes = o->maxBytes = o->tokens * static_cast<size_t>(o->hidden) *
                                typeInfo(static_cast<ncclDataType_t>(o->type)).size;
  }
  return validate(o, exitCode);
}

}  // namespace

bool parseOptions(int argc, char** argv, const char* programName, Options* o, int* exitCode) {
  if (parseCommandLine(argc, argv, programName, o, exitCode)) return true;
  // A launcher that stops the job at its first failing rank (cfxrun, mpirun) would otherwise stop rank 0, the one
  // rank that prints the message, before it printed: the silent ranks fail a moment later.
  if (*exitCode != 0 && !printsUsageErrors()) std::this_thread::sleep_for(std::chrono::seconds(1));
  return false;
}

}  // namespace cfx::perf
