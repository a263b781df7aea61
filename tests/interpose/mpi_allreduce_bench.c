/* SPDX-License-Identifier: Apache-2.0
 * MPI_Allreduce of doubles, 1 KiB to MAX bytes (x4 steps): prints the median time per call over a few
 * repetitions. Not a test; it is how the CFX_MPI_ALLREDUCE_MIN_BYTES default was chosen. Run it with and
 * without LD_PRELOAD=libconflux_mpi.so (and CFX_MPI_ALLREDUCE_MIN_BYTES=0 to time Conflux at every size).
 *
 *   mpi_allreduce_bench [MAX_BYTES]    default 256 MiB */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmpD(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t maxBytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
  double* s = (double*)malloc(maxBytes);
  double* r = (double*)malloc(maxBytes);
  for (size_t i = 0; i < maxBytes / sizeof(double); ++i) s[i] = (double)(i % 7);
  if (rank == 0) printf("%12s %12s\n", "bytes", "us/call");
  for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    int count = (int)(bytes / sizeof(double));
    int iters = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 10 : 2;
    double t[5];
    MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* warm-up, and the mirror on first use */
    for (int rep = 0; rep < 5; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / iters, slowest;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t[rep] = slowest;
    }
    qsort(t, 5, sizeof t[0], cmpD);
    if (rank == 0) printf("%12zu %12.1f\n", bytes, t[2] * 1e6);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
