/* SPDX-License-Identifier: Apache-2.0
 * A plain C program compiled against NVIDIA's own nccl.h (not ours) and linked with our libnccl.so.2: the
 * drop-in promise. It forks ranks, shares the unique id through a pipe, and checks several collectives and
 * point-to-point calls on host buffers. Exit 0 on success; the failing rank prints what went wrong. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    ncclResult_t r_ = (call);                                                                            \
    if (r_ != ncclSuccess) {                                                                             \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                          \
    }                                                                                                    \
  } while (0)

enum { kRanks = 3, kCount = 100003 };

static int runRank(int rank, ncclUniqueId id) {
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  int version = 0, n = 0, me = -1, i, bad = 0;
  float *a = malloc(sizeof(float) * kCount * kRanks), *b = malloc(sizeof(float) * kCount * kRanks);
  CHECK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "rank %d: library version %d, header %d\n", rank, version, NCCL_VERSION_CODE);
    return 1;
  }
  CHECK(ncclCommInitRankConfig(&comm, kRanks, id, rank, &config));
  CHECK(ncclCommCount(comm, &n));
  CHECK(ncclCommUserRank(comm, &me));
  if (n != kRanks || me != rank) return 1;

  for (i = 0; i < kCount; i++) a[i] = (float)(rank + 1);
  CHECK(ncclAllReduce(a, b, kCount, ncclFloat, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++) bad += b[i] != 6.0f;

  for (i = 0; i < kCount; i++) a[i] = rank == 1 ? (float)i : -1.0f;
  CHECK(ncclBroadcast(a, a, kCount, ncclFloat, 1, comm, NULL));
  for (i = 0; i < kCount; i++) bad += a[i] != (float)i;

  for (i = 0; i < kCount; i++) a[i] = (float)(rank * 10);
  CHECK(ncclAllGather(a, b, kCount, ncclFloat, comm, NULL));
  for (i = 0; i < kCount * kRanks; i++) bad += b[i] != (float)((i / kCount) * 10);

  for (i = 0; i < kCount * kRanks; i++) a[i] = (float)(i / kCount);
  CHECK(ncclReduceScatter(a, b, kCount, ncclFloat, ncclMax, comm, NULL));
  for (i = 0; i < kCount; i++) bad += b[i] != (float)rank;

  for (i = 0; i < kCount; i++) a[i] = (float)(rank * 1000 + i % 7);
  CHECK(ncclGroupStart());
  CHECK(ncclSend(a, kCount, ncclFloat, (rank + 1) % kRanks, comm, NULL));
  CHECK(ncclRecv(b, kCount, ncclFloat, (rank + kRanks - 1) % kRanks, comm, NULL));
  CHECK(ncclGroupEnd());
  for (i = 0; i < kCount; i++) bad += b[i] != (float)(((rank + kRanks - 1) % kRanks) * 1000 + i % 7);

  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  free(a);
  free(b);
  if (bad) fprintf(stderr, "rank %d: %d wrong elements\n", rank, bad);
  return bad != 0;
}

int main(void) {
  int rank = 0, status = 0, failed = 0;
  pid_t pids[kRanks];
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (rank = 0; rank < kRanks; rank++) {
    pids[rank] = fork();
    if (pids[rank] == 0) _exit(runRank(rank, id));
  }
  for (rank = 0; rank < kRanks; rank++) {
    if (waitpid(pids[rank], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status 0x%x)\n", rank, status);
      failed = 1;
    }
  }
  printf("%s: %d ranks, NVIDIA header %d, library %s\n", failed ? "FAILED" : "OK", kRanks, NCCL_VERSION_CODE,
         "libnccl.so.2 (Conflux)");
  return failed;
}
