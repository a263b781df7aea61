/* SPDX-License-Identifier: Apache-2.0
 * Times one or more MPI collectives over 1 KiB to MAX bytes (x4 steps) and prints, per collective and size, the
 * median time per call (slowest rank, microseconds). Not a test; it is how the CFX_MPI_<COLL>_* routing
 * defaults were chosen (tests/interpose/run_bench.sh runs it with and without libconflux_mpi.so).
 *
 * "bytes" is what the interposer's knobs compare: count x type size for allreduce, reduce, bcast, scan and exscan,
 * the whole receive buffer for allgather, alltoall and alltoallv (equal blocks here), the whole input for
 * reduce_scatter_block, the root's whole buffer for gather and scatter. Large sizes run few iterations so a sweep
 * stays short on a loaded machine.
 *
 *   mpi_coll_bench [MAX_BYTES [COLL,COLL,...]]   default 256 MiB, every collective
 *   COLL: allreduce reduce bcast allgather reduce_scatter_block alltoall gather scatter scan exscan alltoallv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  kAllreduce, kReduce, kBcast, kAllgather, kReduceScatterBlock, kAlltoall, kGather, kScatter, kScan, kExscan,
  kAlltoallv, kNumColls
};
static const char* const kNames[kNumColls] = {"allreduce", "reduce",   "bcast",   "allgather",
                                              "reduce_scatter_block", "alltoall", "gather", "scatter",
                                              "scan",      "exscan",   "alltoallv"};
static int* gCounts; /* alltoallv: one equal block per rank */
static int* gDispls;

static int cmpD(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* One call of coll moving `bytes` (as defined above) in doubles on n ranks. */
static void runOnce(int coll, size_t bytes, int n, double* s, double* r) {
  const int all = (int)(bytes / sizeof(double)), part = all / n;
  switch (coll) {
    case kAllreduce: MPI_Allreduce(s, r, all, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case kReduce: MPI_Reduce(s, r, all, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case kBcast: MPI_Bcast(s, all, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case kAllgather: MPI_Allgather(s, part, MPI_DOUBLE, r, part, MPI_DOUBLE, MPI_COMM_WORLD); break;
    case kReduceScatterBlock: MPI_Reduce_scatter_block(s, r, part, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case kAlltoall: MPI_Alltoall(s, part, MPI_DOUBLE, r, part, MPI_DOUBLE, MPI_COMM_WORLD); break;
    case kGather: MPI_Gather(s, part, MPI_DOUBLE, r, part, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case kScatter: MPI_Scatter(s, part, MPI_DOUBLE, r, part, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case kScan: MPI_Scan(s, r, all, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case kExscan: MPI_Exscan(s, r, all, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case kAlltoallv:
      for (int p = 0; p < n; ++p) {
        gCounts[p] = part;
        gDispls[p] = p * part;
      }
      MPI_Alltoallv(s, gCounts, gDispls, MPI_DOUBLE, r, gCounts, gDispls, MPI_DOUBLE, MPI_COMM_WORLD);
      break;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t maxBytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
  int want[kNumColls];
  for (int c = 0; c < kNumColls; ++c) want[c] = argc <= 2;
  if (argc > 2) {
    char* list = strdup(argv[2]);
    for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
      int c = 0;
      while (c < kNumColls && strcmp(tok, kNames[c]) != 0) ++c;
      if (c == kNumColls) {
        if (rank == 0) fprintf(stderr, "mpi_coll_bench: unknown collective '%s'\n", tok);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      want[c] = 1;
    }
    free(list);
  }
  gCounts = (int*)malloc(sizeof(int) * (size_t)n);
  gDispls = (int*)malloc(sizeof(int) * (size_t)n);
  double* s = (double*)malloc(maxBytes);
  double* r = (double*)malloc(maxBytes);
  if (s == NULL || r == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
  for (size_t i = 0; i < maxBytes / sizeof(double); ++i) s[i] = (double)(i % 7);
  memset(r, 0, maxBytes);
  if (rank == 0) printf("%-22s %12s %12s\n", "coll", "bytes", "us/call");
  for (int c = 0; c < kNumColls; ++c) {
    if (!want[c]) continue;
    for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
      int iters = bytes <= (64 << 10) ? 50 : bytes <= (1 << 20) ? 20 : bytes <= (16 << 20) ? 3 : 1;
      int reps = bytes <= (16 << 20) ? 5 : 3;
      double t[5];
      runOnce(c, bytes, n, s, r); /* warm-up, and the mirror on first use */
      for (int rep = 0; rep < reps; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) runOnce(c, bytes, n, s, r);
        double mine = (MPI_Wtime() - t0) / iters, slowest;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[rep] = slowest;
      }
      qsort(t, reps, sizeof t[0], cmpD);
      if (rank == 0) printf("%-22s %12zu %12.1f\n", kNames[c], bytes, t[reps / 2] * 1e6);
      fflush(stdout);
    }
  }
  free(s);
  free(r);
  free(gCounts);
  free(gDispls);
  MPI_Finalize();
  return 0;
}
