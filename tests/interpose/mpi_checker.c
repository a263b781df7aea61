/* SPDX-License-Identifier: Apache-2.0
 * An ordinary MPI program that knows nothing about Conflux: it runs the collectives libconflux_mpi.so can serve
 * on doubles and ints at several sizes, in and out of place, on MPI_COMM_WORLD and on a split communicator,
 * and prints one checksum per case from rank 0. run_compare.sh runs it with and without LD_PRELOAD and requires
 * identical output. Data are small integers, so floating-point sums are exact in any order and the comparison
 * can be bitwise.
 *
 *   mpi_checker            built-in types and ops (the interposer routes the large cases)
 *   mpi_checker derived    derived datatypes and a user op (the interposer must pass them through) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gRank, gSize;

static uint64_t fnv(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Prints, on rank 0 of MPI_COMM_WORLD, the checksum of every world rank's n bytes at p (empty when absent). */
static void report(const char* name, MPI_Comm comm, size_t count, const void* p, size_t n) {
  uint64_t h = p != NULL ? fnv(p, n) : 0;
  uint64_t* all = (uint64_t*)malloc(sizeof(uint64_t) * gSize);
  (void)comm;
  MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (gRank == 0) {
    printf("%-28s count %-7zu", name, count);
    for (int r = 0; r < gSize; ++r) printf(" %016llx", (unsigned long long)all[r]);
    printf("\n");
  }
  free(all);
}

static void fillD(double* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (double)((rank + 1 + salt) * (int)((i * 7 + salt) % 13) % 5 + 1);
}
static void fillI(int* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (rank * 31 + (int)i * 17 + salt) % 1001 - 500;
}

/* Small values for scans, whose products and sums stay exact (and far from overflow) over a few ranks. */
static void fillSmallD(double* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (double)((rank + (int)i + salt) % 3 + 1);
}
static void fillSmallI(int* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (rank * 5 + (int)i + salt) % 7 - 3;
}

/* MPI_Scan and MPI_Exscan with every built-in op, and in place. Rank 0's exclusive result is undefined in MPI, so
 * it is not reported. */
static void scans(MPI_Comm comm, const char* tag, size_t count, double* sd, double* rd, int* si, int* ri) {
  int rank;
  char name[64];
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  const char* opNames[4] = {"sum", "prod", "max", "min"};
  int n = (int)count;
  MPI_Comm_rank(comm, &rank);
  for (int o = 0; o < 4; ++o) {
    fillSmallD(sd, count, rank, o);
    MPI_Scan(sd, rd, n, MPI_DOUBLE, ops[o], comm);
    snprintf(name, sizeof name, "%s scan d %s", tag, opNames[o]);
    report(name, comm, count, rd, count * sizeof(double));
    fillSmallI(si, count, rank, o);
    memset(ri, 0, count * sizeof(int));
    MPI_Exscan(si, ri, n, MPI_INT, ops[o], comm);
    snprintf(name, sizeof name, "%s exscan i %s", tag, opNames[o]);
    report(name, comm, count, rank == 0 ? NULL : ri, count * sizeof(int));
  }
  fillSmallD(rd, count, rank, 5);
  MPI_Scan(MPI_IN_PLACE, rd, n, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(name, sizeof name, "%s scan d inplace", tag);
  report(name, comm, count, rd, count * sizeof(double));
  fillSmallD(rd, count, rank, 6);
  MPI_Exscan(MPI_IN_PLACE, rd, n, MPI_DOUBLE, MPI_MAX, comm);
  snprintf(name, sizeof name, "%s exscan d inplace", tag);
  report(name, comm, count, rank == 0 ? NULL : rd, count * sizeof(double));
}

/* MPI_Alltoallv: a count per pair (some zero), blocks in reverse rank order with gaps between them, out of place and
 * in place (where what a rank sends a peer is the size of what it receives back). */
static int pairCount(int from, int to, size_t count, int symmetric) {
  int key = symmetric ? (from + to) * 3 : from * 7 + to * 3;
  return (int)((size_t)(key % 5) * count / 4);
}

static void alltoallv(MPI_Comm comm, const char* tag, size_t count) {
  int rank, size;
  char name[64];
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int* sc = (int*)malloc(sizeof(int) * size);
  int* sdp = (int*)malloc(sizeof(int) * size);
  int* rc = (int*)malloc(sizeof(int) * size);
  int* rdp = (int*)malloc(sizeof(int) * size);
  for (int symmetric = 0; symmetric < 2; ++symmetric) {
    int sendAt = 0, recvAt = 0;
    for (int p = size - 1; p >= 0; --p) {
      sc[p] = pairCount(rank, p, count, symmetric);
      sdp[p] = sendAt + 2;
      sendAt = sdp[p] + sc[p];
      rc[p] = pairCount(p, rank, count, symmetric);
      rdp[p] = recvAt + 2;
      recvAt = rdp[p] + rc[p];
    }
    double* s = (double*)malloc(sizeof(double) * (sendAt + 1));
    double* r = (double*)malloc(sizeof(double) * (recvAt + 1));
    fillD(s, (size_t)sendAt, rank, 30);
    fillD(r, (size_t)recvAt, rank, 31);
    if (symmetric) {
      MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, rc, rdp, MPI_DOUBLE, comm);
    } else {
      MPI_Alltoallv(s, sc, sdp, MPI_DOUBLE, r, rc, rdp, MPI_DOUBLE, comm);
    }
    snprintf(name, sizeof name, "%s alltoallv d%s", tag, symmetric ? " inplace" : "");
    report(name, comm, count, r, (size_t)recvAt * sizeof(double));
    free(s);
    free(r);
  }
  free(sc);
  free(sdp);
  free(rc);
  free(rdp);
}

static void builtins(MPI_Comm comm, const char* tag, size_t count) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t big = count * (size_t)size;
  double* sd = (double*)malloc(sizeof(double) * big);
  double* rd = (double*)malloc(sizeof(double) * big);
  int* si = (int*)malloc(sizeof(int) * big);
  int* ri = (int*)malloc(sizeof(int) * big);
  char name[64];
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  const char* opNames[4] = {"sum", "prod", "max", "min"};
  int n = (int)count;

  for (int o = 0; o < 4; ++o) {
    fillD(sd, count, rank, o);
    MPI_Allreduce(sd, rd, n, MPI_DOUBLE, ops[o], comm);
    snprintf(name, sizeof name, "%s allreduce d %s", tag, opNames[o]);
    report(name, comm, count, rd, count * sizeof(double));
  }
  fillD(rd, count, rank, 9);
  MPI_Allreduce(MPI_IN_PLACE, rd, n, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(name, sizeof name, "%s allreduce d inplace", tag);
  report(name, comm, count, rd, count * sizeof(double));
  fillI(si, count, rank, 1);
  MPI_Allreduce(si, ri, n, MPI_INT, MPI_MAX, comm);
  snprintf(name, sizeof name, "%s allreduce i max", tag);
  report(name, comm, count, ri, count * sizeof(int));

  for (int root = 0; root < size; root += size - 1 > 0 ? size - 1 : 1) {
    fillI(si, count, rank, root);
    memset(ri, 0, sizeof(int) * count);
    MPI_Reduce(si, ri, n, MPI_INT, MPI_SUM, root, comm);
    snprintf(name, sizeof name, "%s reduce i r%d", tag, root);
    report(name, comm, count, rank == root ? ri : NULL, count * sizeof(int));
    fillD(rd, count, rank, root);
    MPI_Reduce(rank == root ? MPI_IN_PLACE : rd, rank == root ? rd : NULL, n, MPI_DOUBLE, MPI_SUM, root, comm);
    snprintf(name, sizeof name, "%s reduce d inplace r%d", tag, root);
    report(name, comm, count, rank == root ? rd : NULL, count * sizeof(double));
    fillD(rd, count, rank, 3);
    MPI_Bcast(rd, n, MPI_DOUBLE, root, comm);
    snprintf(name, sizeof name, "%s bcast d r%d", tag, root);
    report(name, comm, count, rd, count * sizeof(double));
    fillI(si, count, rank, 4);
    MPI_Gather(si, n, MPI_INT, ri, n, MPI_INT, root, comm);
    snprintf(name, sizeof name, "%s gather i r%d", tag, root);
    report(name, comm, count, rank == root ? ri : NULL, big * sizeof(int));
    fillI(si, big, rank, 5);
    MPI_Scatter(si, n, MPI_INT, ri, n, MPI_INT, root, comm);
    snprintf(name, sizeof name, "%s scatter i r%d", tag, root);
    report(name, comm, count, ri, count * sizeof(int));
    if (size == 1) break;
  }

  fillD(sd, count, rank, 6);
  MPI_Allgather(sd, n, MPI_DOUBLE, rd, n, MPI_DOUBLE, comm);
  snprintf(name, sizeof name, "%s allgather d", tag);
  report(name, comm, count, rd, big * sizeof(double));
  fillI(ri, big, -1, 0);
  fillI(ri + count * rank, count, rank, 7);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, n, MPI_INT, comm);
  snprintf(name, sizeof name, "%s allgather i inplace", tag);
  report(name, comm, count, ri, big * sizeof(int));

  fillD(sd, big, rank, 8);
  MPI_Reduce_scatter_block(sd, rd, n, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(name, sizeof name, "%s rsblock d", tag);
  report(name, comm, count, rd, count * sizeof(double));
  fillI(ri, big, rank, 9);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, ri, n, MPI_INT, MPI_MIN, comm);
  snprintf(name, sizeof name, "%s rsblock i inplace", tag);
  report(name, comm, count, ri, count * sizeof(int));
  {
    int* counts = (int*)malloc(sizeof(int) * size);
    for (int r = 0; r < size; ++r) counts[r] = n;
    fillD(sd, big, rank, 10);
    MPI_Reduce_scatter(sd, rd, counts, MPI_DOUBLE, MPI_SUM, comm);
    snprintf(name, sizeof name, "%s rscatter d", tag);
    report(name, comm, count, rd, count * sizeof(double));
    free(counts);
  }

  fillI(si, big, rank, 11);
  MPI_Alltoall(si, n, MPI_INT, ri, n, MPI_INT, comm);
  snprintf(name, sizeof name, "%s alltoall i", tag);
  report(name, comm, count, ri, big * sizeof(int));
  fillD(rd, big, rank, 12);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rd, n, MPI_DOUBLE, comm);
  snprintf(name, sizeof name, "%s alltoall d inplace", tag);
  report(name, comm, count, rd, big * sizeof(double));

  scans(comm, tag, count, sd, rd, si, ri);
  alltoallv(comm, tag, count);

  MPI_Barrier(comm);
  free(sd);
  free(rd);
  free(si);
  free(ri);
}

static void userSum(void* in, void* inout, int* len, MPI_Datatype* dt) {
  (void)dt;
  for (int i = 0; i < *len; ++i) ((double*)inout)[i] += ((double*)in)[i];
}

static void derived(size_t count) {
  size_t n4 = count / 4;
  double* sd = (double*)malloc(sizeof(double) * count * 2 * gSize);
  double* rd = (double*)malloc(sizeof(double) * count * 2 * gSize);
  MPI_Datatype quad, strided;
  MPI_Type_contiguous(4, MPI_DOUBLE, &quad);
  MPI_Type_commit(&quad);
  MPI_Type_vector((int)count, 1, 2, MPI_DOUBLE, &strided);
  MPI_Type_commit(&strided);
  MPI_Op mySum;
  MPI_Op_create(userSum, 1, &mySum);

  fillD(sd, count, gRank, 1);
  MPI_Allreduce(sd, rd, (int)count, MPI_DOUBLE, mySum, MPI_COMM_WORLD);
  report("userop allreduce d", MPI_COMM_WORLD, count, rd, count * sizeof(double));
  fillD(sd, count, gRank, 2);
  MPI_Allreduce(sd, rd, (int)n4, quad, mySum, MPI_COMM_WORLD);
  report("contig+userop allreduce d", MPI_COMM_WORLD, count, rd, n4 * 4 * sizeof(double));
  fillD(sd, count * 2, gRank, 3);
  MPI_Bcast(sd, 1, strided, 0, MPI_COMM_WORLD);
  report("vector bcast d", MPI_COMM_WORLD, count, sd, count * 2 * sizeof(double));
  fillD(sd, count, gRank, 4);
  MPI_Bcast(sd, (int)n4, quad, gSize - 1, MPI_COMM_WORLD);
  report("contig bcast d", MPI_COMM_WORLD, count, sd, count * sizeof(double));
  fillD(sd, count, gRank, 5);
  MPI_Allgather(sd, (int)n4, quad, rd, (int)n4, quad, MPI_COMM_WORLD);
  report("contig allgather d", MPI_COMM_WORLD, count, rd, n4 * 4 * gSize * sizeof(double));
  fillD(sd, count, gRank, 6);
  MPI_Allreduce(sd, rd, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  report("builtin max allreduce d", MPI_COMM_WORLD, count, rd, count * sizeof(double));
  {
    /* A derived (contiguous) type: MPI_Alltoallv passes through. */
    int* c = (int*)malloc(sizeof(int) * gSize);
    int* d = (int*)malloc(sizeof(int) * gSize);
    for (int p = 0; p < gSize; ++p) {
      c[p] = (int)(n4 / (size_t)gSize);
      d[p] = p * c[p];
    }
    fillD(sd, count, gRank, 7);
    MPI_Alltoallv(sd, c, d, quad, rd, c, d, quad, MPI_COMM_WORLD);
    report("contig alltoallv d", MPI_COMM_WORLD, count, rd, (size_t)c[0] * gSize * 4 * sizeof(double));
    free(c);
    free(d);
  }

  MPI_Op_free(&mySum);
  MPI_Type_free(&quad);
  MPI_Type_free(&strided);
  free(sd);
  free(rd);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  if (argc > 1 && strcmp(argv[1], "derived") == 0) {
    derived(40000);
  } else {
    size_t counts[] = {1, 1000, 16411, 100000};
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, gRank % 2, gSize - gRank, &half);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
      builtins(MPI_COMM_WORLD, "world", counts[i]);
      builtins(half, gRank % 2 ? "odd" : "even", counts[i]);
    }
    MPI_Comm_free(&half);
  }
  MPI_Finalize();
  return 0;
}
