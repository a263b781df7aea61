// SPDX-License-Identifier: Apache-2.0
// perf harness: command-line parsing. We use getopt_long because nccl-tests does: the flags are short options
// with values ("-b 8 -e 128M -f 2", "-r -1"), long names accept "--name value", "--name=value" and unique
// prefixes, and scripts written for nccl-tests rely on exactly those rules. A CLI library would change them.
#include "options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "datatypes.h"

namespace cfx::perf {
namespace {

constexpr const char* kOptString = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:";

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

int toInt(const char* text) { return static_cast<int>(strtol(text, nullptr, 0)); }

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
      "    the affine (decayed-state) op on groups of R decays and an R x C state (default: 128 x 128)]\n"
      "Conflux host-memory notes: ranks are threads (-t) and/or processes started by cfxrun, torchrun, mpirun\n"
      "or srun (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS, with\n"
      "MASTER_ADDR/MASTER_PORT or CFX_MASTER_ADDR/CFX_MASTER_PORT). -g must be 1; -G and -D need a GPU build.\n",
      programName);
}

// Reads one size flag; false (after printing nccl-tests' message) when it does not parse.
bool readSize(const char* text, const char* what, size_t* out) {
  double parsed = parseSize(text);
  if (parsed < 0) {
    fprintf(stderr, "invalid size specified for '%s'\n", what);
    return false;
  }
  *out = static_cast<size_t>(parsed);
  return true;
}

// Rejects combinations that cannot work, and warns and fixes those nccl-tests also fixes.
bool validate(Options* o, int* exitCode) {
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n",
            static_cast<unsigned long long>(o->minBytes), static_cast<unsigned long long>(o->maxBytes));
    *exitCode = -1;
    return false;
  }
  if (o->nGpus != 1) {
    fprintf(stderr, "-g (GPUs per thread) needs GPU support; use -t for several ranks per process\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->nThreads < 1) {
    fprintf(stderr, "-t (threads per process) must be at least 1, got %d\n", o->nThreads);
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
    fprintf(stderr, "-D (device implementation) needs a GPU build; host-memory runs use the library's collectives\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->iters < 1 || o->aggIters < 1 || o->warmupIters < 0 || o->check < 0 || o->runCycles < 0) {
    fprintf(stderr, "invalid iteration counts: -n and -m must be >= 1; -w, -c and -N must be >= 0\n");
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->average < 0 || o->average > 3) {
    fprintf(stderr, "-a (average) must be 0, 1, 2 or 3, got %d\n", o->average);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->blocking < 0 || o->blocking > 3) {
    fprintf(stderr, "-z (blocking) must be 0, 1, 2 or 3, got %d\n", o->blocking);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->unalign < 0) {
    fprintf(stderr, "-u (unalign) must be >= 0, got %d\n", o->unalign);
    *exitCode = static_cast<int>(TestResult::InvalidUsage);
    return false;
  }
  if (o->perIterTiming != 0 && o->perIterTiming != 1) {
    fprintf(stderr, "per-iteration timing (-I) only supports 0=off or 1=on. Disabling.\n");
    o->perIterTiming = 0;
  }
  if (o->perIterSkip < 0 || o->perIterSkip >= o->iters) {
    fprintf(stderr, "per-iteration skip (-K) must be between 0 and %d. Disabling.\n", o->iters - 1);
    o->perIterSkip = 0;
  }
  if (o->perIterSkip && !o->perIterTiming) {
    fprintf(stderr, "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.\n");
    o->perIterSkip = 0;
  }
  return true;
}

}  // namespace

bool parseOptions(int argc, char** argv, const char* programName, Options* o, int* exitCode) {
  optind = 1;
  for (;;) {
    int longIndex = 0;
    int c = getopt_long(argc, argv, kOptString, kLongOptions, &longIndex);
    if (c == -1) break;
    switch (c) {
      case 't':
        o->nThreads = toInt(optarg);
        break;
      case 'g':
        o->nGpus = toInt(optarg);
        break;
      case 'b':
        if (!readSize(optarg, "minbytes", &o->minBytes)) return *exitCode = -1, false;
        break;
      case 'e':
        if (!readSize(optarg, "maxbytes", &o->maxBytes)) return *exitCode = -1, false;
        break;
      case 'i':
        if (!readSize(optarg, "stepBytes", &o->stepBytes)) return *exitCode = -1, false;
        break;
      case 'f':
        o->stepFactor = static_cast<size_t>(strtol(optarg, nullptr, 0));
        break;
      case 'n':
        o->iters = toInt(optarg);
        break;
      case 'm':
        o->aggIters = toInt(optarg);
        break;
      case 'w':
        o->warmupIters = toInt(optarg);
        break;
      case 'N':
        o->runCycles = toInt(optarg);
        break;
      case 'c':
        o->check = toInt(optarg);
        break;
      case 'p':
        o->parallelInit = toInt(optarg);
        break;
      case 'o':
        o->op = parseOpName(optarg);
        break;
      case 'd':
        o->type = parseTypeName(optarg);
        break;
      case 'r':
        o->root = toInt(optarg);
        break;
      case 'z':
        o->blocking = toInt(optarg);
        break;
      case 'y':
        o->streamNull = toInt(optarg);
        break;
      case 'T':
        o->timeoutSec = toInt(optarg);
        break;
      case 'G':
        o->cudaGraphLaunches = toInt(optarg);
        break;
      case 'C':
        o->reportCpuTime = toInt(optarg);
        break;
      case 'J':
        o->outputFile = optarg;
        break;
      case 'S':
        o->reportTimestamps = toInt(optarg);
        break;
      case 'a':
        o->average = toInt(optarg);
        break;
      case 'R':
        o->localRegister = toInt(optarg);
        break;
      case 'M':
        o->memoryReport = toInt(optarg);
        break;
      case 'I':
        o->perIterTiming = toInt(optarg);
        break;
      case 'K':
        o->perIterSkip = toInt(optarg);
        break;
      case 'x':
        o->ctaPolicy = toInt(optarg);
        break;
      case 'D':
        o->deviceImpl = toInt(optarg);
        break;
      case 'V':
        o->deviceCtaCount = toInt(optarg);
        if (o->deviceCtaCount <= 0 || o->deviceCtaCount > 128) {
          fprintf(stderr, "device_cta_count (-V) must be positive and less than 128, got %d. Using default value 16.\n",
                  o->deviceCtaCount);
          o->deviceCtaCount = 16;
        }
        break;
      case 'u':
        o->unalign = toInt(optarg);
        break;
      case kOptCodec:
        o->codec = optarg;
        break;
      case kOptExclusive:
        o->exclusive = toInt(optarg);
        break;
      case kOptRows:
        o->rows = toInt(optarg);
        break;
      case kOptCols:
        o->cols = toInt(optarg);
        break;
      case kOptCodecMode:
        o->codecMode = optarg;
        if (o->codecMode != "auto" && o->codecMode != "always" && o->codecMode != "never") {
          printf("invalid --codec_mode '%s': expected auto, always or never\n", optarg);
          *exitCode = -1;
          return false;
        }
        break;
      case 'h':
      default:
        if (c != 'h') printf("invalid option '%c'\n", c);
        printUsage(programName);
        *exitCode = 0;
        return false;
    }
  }
  return validate(o, exitCode);
}

}  // namespace cfx::perf
