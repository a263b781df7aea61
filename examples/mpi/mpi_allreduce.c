/* SPDX-License-Identifier: Apache-2.0
 *
 * mpi_allreduce: an ordinary MPI program that knows nothing about Conflux. Run under libconflux_mpi.so,
 *     mpirun -np 2 -x LD_PRELOAD=<prefix>/lib/conflux/libconflux_mpi.so -x CFX_MPI_STATS=1 ./mpi_allreduce
 * its large MPI_Allreduce calls are served by Conflux and its small ones stay with MPI (CFX_MPI_*_MIN_BYTES);
 * CFX_MPI_STATS=1 prints which. The results must be the same either way: it checks every element. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bad = 0;
  const int counts[] = {16, 1 << 20}; /* 64 B stays with MPI; 4 MiB goes to Conflux */
  for (int c = 0; c < 2; ++c) {
    const int n = counts[c];
    int* buf = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; ++i) buf[i] = rank + i % 7;
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) bad += buf[i] != size * (size - 1) / 2 + size * (i % 7);
    free(buf);
  }
  int allBad = 0;
  MPI_Allreduce(&bad, &allBad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_allreduce on %d ranks: %s\n", size, allBad == 0 ? "correct" : "WRONG");
  MPI_Finalize();
  return allBad == 0 ? 0 : 1;
}
