/* SPDX-License-Identifier: Apache-2.0
 *
 * host_allreduce: an all-reduce over plain host memory, from C, with no GPU.
 *
 * Start it under any launcher that sets torchrun's variables (cfxrun, torchrun, mpirun, srun):
 *     cfxrun -n 2 ./host_allreduce
 * Each rank creates its rank of one communicator from the launcher's environment, then
 *   1. all-reduces with the NULL stream: on host memory the call returns when the op is complete;
 *   2. queues two all-reduces on a cfx host stream, which returns at once, and waits for both with
 *      cfxHostStreamSynchronize; the buffers must stay untouched until then.
 * Every rank checks every element and exits non-zero on a wrong one. docs/USER_GUIDE.md quotes this file. */
#include <conflux.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 4096

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                  \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

/* Counts the elements of buf that are not `want`. */
static int wrong(const float* buf, int count, float want) {
  int bad = 0;
  for (int i = 0; i < count; ++i) bad += buf[i] != want;
  return bad;
}

int main(void) {
  cfxLaunchInfo launch;
  CHECK(cfxGetLaunchInfo(&launch)); /* who we are, before anything is created */
  ncclComm_t comm;
  CHECK(cfxCommInitFromEnv(&comm));
  const int n = launch.nRanks;
  const float sum = n * (n + 1) / 2.0f; /* ranks contribute 1, 2, ..., n */

  static float a[COUNT], b[COUNT], c[COUNT];
  for (int i = 0; i < COUNT; ++i) a[i] = (float)(launch.rank + 1);

  /* 1. Blocking: host buffers and the NULL stream. */
  CHECK(ncclAllReduce(a, b, COUNT, ncclFloat32, ncclSum, comm, NULL));
  int bad = wrong(b, COUNT, sum);

  /* 2. Asynchronous: two ops queued on a host stream run in order; the first's output is the second's input. */
  cfxHostStream_t stream;
  CHECK(cfxHostStreamCreate(&stream));
  CHECK(ncclAllReduce(a, b, COUNT, ncclFloat32, ncclSum, comm, (cudaStream_t)stream));
  CHECK(ncclAllReduce(b, c, COUNT, ncclFloat32, ncclMax, comm, (cudaStream_t)stream));
  CHECK(cfxHostStreamSynchronize(stream));
  CHECK(cfxHostStreamDestroy(stream));
  bad += wrong(c, COUNT, sum);

  int release = 0;
  CHECK(cfxGetVersion(&release));
  printf("rank %d of %d (%s): all-reduce of %d floats %s; Conflux %d.%d.%d\n", launch.rank, n,
         launch.launcher[0] ? launch.launcher : "no launcher", COUNT, bad == 0 ? "correct" : "WRONG", release / 10000,
         release / 100 % 100, release % 100);
  CHECK(ncclCommDestroy(comm));
  return bad == 0 ? 0 : 1;
}
