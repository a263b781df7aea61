/* SPDX-License-Identifier: Apache-2.0
 * An ordinary MPI program that knows nothing about Conflux: it starts the non-blocking collectives
 * libconflux_mpi.so can serve (MPI_Iallreduce ... MPI_Ibarrier) and completes them every way MPI offers
 * (MPI_Wait, MPI_Test loops, MPI_Waitall, MPI_Testall, MPI_Waitany, MPI_Waitsome, MPI_Request_free), mixed with
 * point-to-point requests and with blocking collectives on the same communicator while they are pending. Rank 0
 * prints one checksum per case, and the MPI_Status fields the completions return. run_compare.sh runs it with
 * and without LD_PRELOAD and requires identical output.
 *
 *   mpi_nonblocking_checker           MPI_Init_thread(MPI_THREAD_MULTIPLE): the interposer routes large cases
 *   mpi_nonblocking_checker single    MPI_Init: the interposer must pass every non-blocking call through */
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

/* Prints, on rank 0 of MPI_COMM_WORLD, the checksum of every world rank's n bytes at p (0 when absent). */
static void report(const char* name, size_t count, const void* p, size_t n) {
  uint64_t h = p != NULL ? fnv(p, n) : 0;
  uint64_t* all = (uint64_t*)malloc(sizeof(uint64_t) * gSize);
  MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (gRank == 0) {
    printf("%-34s count %-7zu", name, count);
    for (int r = 0; r < gSize; ++r) printf(" %016llx", (unsigned long long)all[r]);
    printf("\n");
  }
  free(all);
}

/* MPI_ERROR is printed only where MPI sets it (the multiple-completion calls): MPI_Wait and MPI_Test leave it. */
static void reportStatus(const char* name, const MPI_Status* st, int withError) {
  int bytes = -1, cancelled = -1;
  MPI_Get_count(st, MPI_BYTE, &bytes);
  MPI_Test_cancelled(st, &cancelled);
  if (gRank == 0) {
    printf("%-34s status source %d tag %d error %d bytes %d cancelled %d\n", name, st->MPI_SOURCE, st->MPI_TAG,
           withError ? st->MPI_ERROR : 0, bytes, cancelled);
  }
}

static void fillD(double* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (double)((rank + 1 + salt) * (int)((i * 7 + salt) % 13) % 5 + 1);
}
static void fillI(int* d, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; ++i) d[i] = (rank * 31 + (int)i * 17 + salt) % 1001 - 500;
}

/* Waits for req by polling MPI_Test, as a program overlapping computation would. */
static void testLoop(MPI_Request* req, MPI_Status* st) {
  int done = 0;
  while (!done) MPI_Test(req, &done, st);
}

static void cases(MPI_Comm comm, const char* tag, size_t count) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t big = count * (size_t)size;
  double* sd = (double*)malloc(sizeof(double) * big);
  double* rd = (double*)malloc(sizeof(double) * big);
  double* rd2 = (double*)malloc(sizeof(double) * big);
  int* si = (int*)malloc(sizeof(int) * big);
  int* ri = (int*)malloc(sizeof(int) * big);
  int* ri2 = (int*)malloc(sizeof(int) * big);
  char name[96];
  int n = (int)count;
  MPI_Request req[4];
  MPI_Status st[4];
  const int root = size - 1;

  /* A blocking call first: the interposer mirrors a communicator only in a blocking collective (a non-blocking
   * one must not wait for the other ranks), so this is what lets the calls below be routed. */
  fillD(rd, count, rank, 0);
  MPI_Allreduce(MPI_IN_PLACE, rd, n, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(name, sizeof name, "%s allreduce d sum", tag);
  report(name, count, rd, count * sizeof(double));

  /* MPI_Wait, with the status it returns. */
  fillD(sd, count, rank, 1);
  MPI_Iallreduce(sd, rd, n, MPI_DOUBLE, MPI_SUM, comm, &req[0]);
  MPI_Wait(&req[0], &st[0]);
  snprintf(name, sizeof name, "%s iallreduce d sum", tag);
  report(name, count, rd, count * sizeof(double));
  reportStatus(name, &st[0], 0);

  /* MPI_Test loop, in place. */
  fillI(ri, count, rank, 2);
  MPI_Iallreduce(MPI_IN_PLACE, ri, n, MPI_INT, MPI_MAX, comm, &req[0]);
  testLoop(&req[0], &st[0]);
  snprintf(name, sizeof name, "%s iallreduce i max inplace", tag);
  report(name, count, ri, count * sizeof(int));
  reportStatus(name, &st[0], 0);

  /* Two outstanding collectives plus a point-to-point exchange, completed together by MPI_Waitall (in reverse
   * order of issue), and a blocking allreduce on the same communicator while they are pending. */
  fillD(sd, count, rank, 3);
  fillI(si, count, rank, 3);
  MPI_Ireduce(sd, rank == root ? rd : NULL, n, MPI_DOUBLE, MPI_SUM, root, comm, &req[0]);
  MPI_Ibcast(si, n, MPI_INT, 0, comm, &req[1]);
  int token = rank * 100 + 7, got = -1;
  MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 5, comm, &req[2]);
  MPI_Isend(&token, 1, MPI_INT, (rank + 1) % size, 5, comm, &req[3]);
  fillD(rd2, count, rank, 4);
  MPI_Allreduce(MPI_IN_PLACE, rd2, n, MPI_DOUBLE, MPI_MIN, comm);
  MPI_Request rev[4] = {req[3], req[2], req[1], req[0]};
  MPI_Waitall(4, rev, st);
  snprintf(name, sizeof name, "%s ireduce d r%d", tag, root);
  report(name, count, rank == root ? rd : NULL, count * sizeof(double));
  snprintf(name, sizeof name, "%s ibcast i r0", tag);
  report(name, count, si, count * sizeof(int));
  snprintf(name, sizeof name, "%s allreduce d min while pending", tag);
  report(name, count, rd2, count * sizeof(double));
  snprintf(name, sizeof name, "%s p2p beside collectives", tag);
  report(name, 1, &got, sizeof got);
  snprintf(name, sizeof name, "%s waitall ibcast", tag);
  reportStatus(name, &st[2], 1);

  /* MPI_Waitany over gather, scatter and allgather, in place where MPI allows it. */
  fillI(si, count, rank, 5);
  fillI(ri2, big, rank, 6);
  fillD(rd, big, -1, 0);
  fillD(rd + count * rank, count, rank, 7);
  MPI_Igather(si, n, MPI_INT, rank == root ? ri : NULL, n, MPI_INT, root, comm, &req[0]);
  MPI_Iscatter(ri2, n, MPI_INT, rank == 0 ? MPI_IN_PLACE : ri2 + count * rank, n, MPI_INT, 0, comm, &req[1]);
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rd, n, MPI_DOUBLE, comm, &req[2]);
  for (int left = 3; left > 0; --left) {
    int index = -1;
    MPI_Waitany(3, req, &index, &st[0]);
  }
  snprintf(name, sizeof name, "%s igather i r%d", tag, root);
  report(name, count, rank == root ? ri : NULL, big * sizeof(int));
  snprintf(name, sizeof name, "%s iscatter i r0 inplace", tag);
  report(name, count, ri2 + count * rank, count * sizeof(int));
  snprintf(name, sizeof name, "%s iallgather d inplace", tag);
  report(name, count, rd, big * sizeof(double));

  /* MPI_Waitsome over the reduce-scatters and all-to-alls; MPI_Testall for the last one. */
  fillD(sd, big, rank, 8);
  fillI(ri, big, rank, 9);
  fillI(si, big, rank, 10);
  fillD(rd2, big, rank, 11);
  MPI_Ireduce_scatter_block(sd, rd, n, MPI_DOUBLE, MPI_SUM, comm, &req[0]);
  MPI_Ireduce_scatter_block(MPI_IN_PLACE, ri, n, MPI_INT, MPI_MIN, comm, &req[1]);
  MPI_Ialltoall(si, n, MPI_INT, ri2, n, MPI_INT, comm, &req[2]);
  MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rd2, n, MPI_DOUBLE, comm, &req[3]);
  for (int left = 4; left > 0;) {
    int outcount = 0, indices[4];
    MPI_Waitsome(4, req, &outcount, indices, st);
    if (outcount == MPI_UNDEFINED) break;
    left -= outcount;
  }
  snprintf(name, sizeof name, "%s ireduce_scatter_block d", tag);
  report(name, count, rd, count * sizeof(double));
  snprintf(name, sizeof name, "%s ireduce_scatter_block i inplace", tag);
  report(name, count, ri, count * sizeof(int));
  snprintf(name, sizeof name, "%s ialltoall i", tag);
  report(name, count, ri2, big * sizeof(int));
  snprintf(name, sizeof name, "%s ialltoall d inplace", tag);
  report(name, count, rd2, big * sizeof(double));

  {
    int* counts = (int*)malloc(sizeof(int) * size);
    for (int r = 0; r < size; ++r) counts[r] = n;
    fillD(rd, big, rank, 12);
    MPI_Ireduce_scatter(MPI_IN_PLACE, rd, counts, MPI_DOUBLE, MPI_SUM, comm, &req[0]);
    int done = 0;
    while (!done) MPI_Testall(1, req, &done, st);
    snprintf(name, sizeof name, "%s ireduce_scatter d inplace", tag);
    report(name, count, rd, count * sizeof(double));
    free(counts);
  }

  /* MPI_Request_get_status polls without freeing; MPI_Request_free then releases the completed request (Open
   * MPI refuses to free an active non-blocking collective's request). */
  MPI_Ibarrier(comm, &req[0]);
  for (int done = 0; !done;) MPI_Request_get_status(req[0], &done, &st[0]);
  MPI_Request_free(&req[0]);
  snprintf(name, sizeof name, "%s ibarrier get_status", tag);
  reportStatus(name, &st[0], 0);
  MPI_Ibarrier(comm, &req[0]);
  MPI_Wait(&req[0], &st[0]);
  snprintf(name, sizeof name, "%s ibarrier", tag);
  reportStatus(name, &st[0], 0);
  MPI_Barrier(comm);

  free(sd);
  free(rd);
  free(rd2);
  free(si);
  free(ri);
  free(ri2);
}

int main(int argc, char** argv) {
  const int single = argc > 1 && strcmp(argv[1], "single") == 0;
  int provided = MPI_THREAD_SINGLE;
  if (single) {
    MPI_Init(&argc, &argv);
  } else {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  if (!single && provided != MPI_THREAD_MULTIPLE && gRank == 0) printf("MPI_THREAD_MULTIPLE not provided\n");
  size_t counts[] = {1000, 100000};
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, gRank % 2, gSize - gRank, &half);
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
    cases(MPI_COMM_WORLD, "world", counts[i]);
    cases(half, gRank % 2 ? "odd" : "even", counts[i]);
  }
  /* A fresh communicator: its first call is non-blocking and stays with MPI (no mirror yet). */
  {
    MPI_Comm dup;
    MPI_Request req;
    double* buf = (double*)malloc(sizeof(double) * 100000);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    fillD(buf, 100000, gRank, 14);
    MPI_Iallreduce(MPI_IN_PLACE, buf, 100000, MPI_DOUBLE, MPI_SUM, dup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    report("fresh dup iallreduce", 100000, buf, 100000 * sizeof(double));
    MPI_Comm_free(&dup);
    free(buf);
  }
  /* A communicator of its own, freed right after its last request completed (Open MPI 4.1's own non-blocking
   * collectives crash when their communicator is freed before the wait, so that case cannot be compared). */
  {
    MPI_Comm dup;
    MPI_Request req;
    double* buf = (double*)malloc(sizeof(double) * 100000);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    fillD(buf, 100000, gRank, 13);
    MPI_Allreduce(MPI_IN_PLACE, buf, 100000, MPI_DOUBLE, MPI_MAX, dup);
    MPI_Iallreduce(MPI_IN_PLACE, buf, 100000, MPI_DOUBLE, MPI_SUM, dup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_free(&dup);
    report("dup iallreduce", 100000, buf, 100000 * sizeof(double));
    free(buf);
  }
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
