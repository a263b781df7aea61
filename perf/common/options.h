// SPDX-License-Identifier: Apache-2.0
// perf harness: the nccl-tests command line (same short and long flags, same defaults) and what each flag means
// when the buffers live in host memory.
#pragma once

#include <cstddef>
#include <string>

#include "status.h"

namespace cfx::perf {

// Index into the -o table: ncclSum..ncclAvg, then kMulSum for ncclRedOpCreatePreMulSum, then kAffine (scan_perf:
// cfxRedOpCreateAffine with --rows and --cols).
inline constexpr int kMulSum = 5;
inline constexpr int kAffine = 6;
inline constexpr int kNumTestOps = 6;  // what "-o all" runs; kAffine only by name
inline constexpr int kAll = -1;  // "-d all" / "-o all" / "-r -1"

struct Options {
  int nThreads = 1;                    // -t: ranks (threads) per process
  int nGpus = 1;                       // -g: only 1 is meaningful on host memory
  size_t minBytes = 32 * 1024 * 1024;  // -b
  size_t maxBytes = 32 * 1024 * 1024;  // -e
  size_t stepBytes = 1 * 1024 * 1024;  // -i, used when stepFactor <= 1
  size_t stepFactor = 1;               // -f
  int iters = 20;                      // -n
  int aggIters = 1;                    // -m
  int warmupIters = 1;                 // -w
  int runCycles = 1;                   // -N, 0 = forever
  int parallelInit = 0;                // -p
  int check = 1;                       // -c: check iterations per size and placement
  int op = 0;                          // -o: index into the op table, or kAll
  int type = 7;                        // -d: ncclDataType_t value, or kAll (default float)
  int root = 0;                        // -r: root rank, or kAll
  int blocking = 0;                    // -z: 0..3
  int streamNull = 0;                  // -y: accepted; the NULL stream is the only host stream here
  int timeoutSec = 0;                  // -T: 0 = off
  int cudaGraphLaunches = 0;           // -G: needs a GPU build
  int reportCpuTime = 0;               // -C
  int reportTimestamps = 0;            // -S
  std::string outputFile;              // -J: JSON report
  int average = 1;                     // -a: 0 rank 0, 1 mean, 2 min, 3 max
  int localRegister = 0;               // -R: 1 ncclCommRegister, 2 ncclCommWindowRegister
  int ctaPolicy = -1;                  // -x: -1 leaves config.CTAPolicy unset
  int deviceImpl = 0;                  // -D: device kernels, need a GPU build
  int deviceCtaCount = 16;             // -V
  int memoryReport = 0;                // -M
  int unalign = 0;                     // -u: elements
  int perIterTiming = 0;               // -I
  int perIterSkip = 0;                 // -K
  // Conflux only, long options (conflux.h codecs; all_reduce, reduce_scatter, all_gather and broadcast):
  std::string codec;                   // --codec NAME: none, bf16, int8, mxint8, mxfp8, int4, fp8, topk:F, ...
  std::string codecMode = "always";    // --codec_mode auto|always|never (cfxCompressMode)
  int exclusive = 0;                   // --exclusive 0|1: scan_perf's cfxExScan
  int rows = 128;                      // --rows: scan_perf's affine state rows (and decays per group)
  int cols = 128;                      // --cols: its columns
  // moe_perf (perf/moe.cc): tokens per rank (0: from -b/-e, whose sizes are then tokens x hidden x element bytes),
  // hidden size, experts per token, experts, routing and mode. --dtype sets -d from bf16, fp16 or fp32.
  size_t tokens = 0;                   // --tokens
  int hidden = 2048;                   // --hidden
  int topk = 2;                        // --topk
  int experts = 8;                     // --experts
  std::string routing = "uniform";     // --routing uniform|zipf:S|hot:FRACTION
  std::string mode = "fused";          // --mode fused|unfused
};

// Long options without a short letter (Conflux additions): getopt_long returns these values for them.
inline constexpr int kOptCodec = 1000;
inline constexpr int kOptCodecMode = 1001;
inline constexpr int kOptExclusive = 1002;
inline constexpr int kOptRows = 1003;
inline constexpr int kOptCols = 1004;
inline constexpr int kOptTokens = 1005;
inline constexpr int kOptHidden = 1006;
inline constexpr int kOptTopk = 1007;
inline constexpr int kOptExperts = 1008;
inline constexpr int kOptDtype = 1009;
inline constexpr int kOptRouting = 1010;
inline constexpr int kOptMode = 1011;

// Parses argv like nccl-tests (getopt_long, optstring
// "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:"). Returns true with *exitCode unset when the run
// should go on; false with *exitCode set when main should return it right away (after -h, or after a usage error that
// was printed).
bool parseOptions(int argc, char** argv, const char* programName, Options* options, int* exitCode);

}  // namespace cfx::perf
