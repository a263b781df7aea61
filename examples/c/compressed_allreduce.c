/* SPDX-License-Identifier: Apache-2.0
 *
 * compressed_allreduce: an all-reduce that carries int8 blocks on the wire instead of fp32, from C.
 *
 *     cfxrun -n 4 ./compressed_allreduce [CODEC]        (CODEC as cfxCodecParse reads it; default int8)
 *
 * Each rank holds a gradient-like fp32 vector and
 *   1. all-reduces it with the codec, measuring the result's relative error against an exact (plain) all-reduce;
 *   2. checks that every rank received the same bits (quantise-once: one encoding per contribution, one per result),
 *      by all-gathering a checksum of its result;
 *   3. prints what the op did: the codec, the algorithm, buffer bytes against wire bytes, and the error.
 * With error feedback a second call would add what the first one dropped: see cfxCodec.feedback in conflux.h.
 * Exit status 0 when the ranks agree bit for bit and the error is within the codec's documented bound.
 * docs/USER_GUIDE.md quotes this file. */
#include <conflux.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT (1 << 20)

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                  \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

/* FNV-1a over the result's bytes: equal on every rank exactly when the results are bit-identical. */
static uint64_t checksum(const float* v, size_t n) {
  const unsigned char* p = (const unsigned char*)v;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  cfxLaunchInfo launch;
  CHECK(cfxGetLaunchInfo(&launch));
  ncclComm_t comm;
  CHECK(cfxCommInitFromEnv(&comm));

  float* grad = malloc(COUNT * sizeof(float));
  float* sum = malloc(COUNT * sizeof(float));
  float* exact = malloc(COUNT * sizeof(float));
  if (!grad || !sum || !exact) return 1;
  for (size_t i = 0; i < COUNT; ++i) grad[i] = sinf(0.001f * (float)i * (float)(launch.rank + 1)) / (1.0f + (float)(i % 97));

  /* 1. The codec: a name as CFX_CODEC and the perf tools take it. Always compress, even on shared memory, so the
   *    example shows the codec on one host (the default, cfxCompressAuto, compresses only on slow links). */
  cfxCodec codec = CFX_CODEC_INIT(cfxCodecInt8);
  CHECK(cfxCodecParse(argc > 1 ? argv[1] : "int8", &codec));
  codec.mode = cfxCompressAlways;
  codec.measureError = 1;
  CHECK(cfxAllReduceCompressed(grad, sum, COUNT, ncclFloat32, ncclSum, &codec, comm, NULL));
  cfxCompressStats stats;
  CHECK(cfxCommGetCompressStats(comm, &stats));
  CHECK(ncclAllReduce(grad, exact, COUNT, ncclFloat32, ncclSum, comm, NULL));

  /* 2. Every rank holds the same bits. */
  uint64_t mine = checksum(sum, COUNT);
  uint64_t* all = malloc((size_t)launch.nRanks * sizeof(uint64_t));
  if (!all) return 1;
  CHECK(ncclAllGather(&mine, all, 1, ncclUint64, comm, NULL));
  int agree = 1;
  for (int r = 0; r < launch.nRanks; ++r) agree &= all[r] == mine;

  /* 3. The worst error against the exact sum, per element, relative to the largest |sum|. */
  double worst = 0, scale = 0;
  for (size_t i = 0; i < COUNT; ++i) {
    worst = fmax(worst, fabs((double)sum[i] - (double)exact[i]));
    scale = fmax(scale, fabs((double)exact[i]));
  }
  /* int8's bound: half a step (absmax/127) per encoding; each contribution's absmax is at most 1, the result's scale. */
  const int within = worst <= 0.5 / 127.0 * (launch.nRanks + scale) * 1.0001;
  /* A plain ring all-reduce sends 2 (n - 1) / n of the buffer from every rank. */
  const double plain = 2.0 * (launch.nRanks - 1) / launch.nRanks * (double)stats.bufferBytes;
  printf("rank %d: %s via %s sent %llu bytes, %.2fx fewer than a plain all-reduce; rel L2 error %.2e, "
         "max |err| %.2e; ranks %s\n",
         launch.rank, stats.codec, stats.algorithm, stats.wireBytes, plain / (double)(stats.wireBytes ? stats.wireBytes : 1),
         stats.relL2Error, worst, agree ? "bit-identical" : "DIFFER");
  CHECK(ncclCommDestroy(comm));
  free(grad), free(sum), free(exact), free(all);
  return agree && (within || codec.format != cfxCodecInt8) ? 0 : 1;
}
