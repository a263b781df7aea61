// SPDX-License-Identifier: Apache-2.0
// Which forms of a small copy are slow when several processes share one GPU (docs/gpu_proof.md, "Why small ops
// cost what they did"). N forked processes on GPU 0 each time 200 copies of one form, each optionally behind a
// cuStreamWaitValue32 on a host flag (as a staged collective's copies out are), and print the median.
// Not part of the build or the bundle; on a GPU machine:
//   nvcc -O2 -arch=sm_90 -o copy_engine_probe tests/gpu/copy_engine_probe.cu -lcuda && ./copy_engine_probe 4
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <string>
#include <algorithm>
#include <sys/mman.h>
static int* gReady; static int gProcs;

#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); _exit(3);} } while (0)

static double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int run(const char* variant, size_t bytes, int iters, bool wait) {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char* host; CK(cudaHostAlloc((void**)&host, 1 << 20, cudaHostAllocPortable | cudaHostAllocMapped));
  unsigned char* hostDev; CK(cudaHostGetDevicePointer((void**)&hostDev, host, 0));
  unsigned char* dev; CK(cudaMalloc((void**)&dev, 1 << 20));
  unsigned int* flag; CK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocMapped)); *flag = 0;
  CUdeviceptr flagDev; CK(cuMemHostGetDevicePointer(&flagDev, flag, 0));
  std::vector<double> t;
  CK(cudaStreamSynchronize(s));
  __atomic_add_fetch(gReady, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(gReady, __ATOMIC_ACQUIRE) < gProcs) usleep(100);
  for (int i = 1; i <= iters + 5; ++i) {
    double t0 = now();
    if (wait) CK(cuStreamWaitValue32((CUstream)s, flagDev, i, CU_STREAM_WAIT_VALUE_GEQ));
    if (!strcmp(variant, "htod")) CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
    else if (!strcmp(variant, "dtoh")) CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
    else if (!strcmp(variant, "2d")) CK(cudaMemcpy2DAsync(dev, bytes, host, bytes, bytes, 1, cudaMemcpyHostToDevice, s));
    else if (!strcmp(variant, "2d16")) CK(cudaMemcpy2DAsync(dev, bytes / 16, host, bytes / 16, bytes / 16, 16, cudaMemcpyHostToDevice, s));
    else if (!strcmp(variant, "mapped-dtod")) CK(cudaMemcpyAsync(dev, hostDev, bytes, cudaMemcpyDeviceToDevice, s));
    else if (!strcmp(variant, "drv-dtod")) CK(cuMemcpyDtoDAsync((CUdeviceptr)dev, (CUdeviceptr)hostDev, bytes, (CUstream)s));
    else if (!strcmp(variant, "dtod")) CK(cudaMemcpyAsync(dev, dev + 65536, bytes, cudaMemcpyDeviceToDevice, s));
    else if (!strncmp(variant, "2d:", 3)) {
      size_t w = 0, h = 0; sscanf(variant + 3, "%zu:%zu", &w, &h);
      CK(cudaMemcpy2DAsync(dev, w, host, w, w, h, cudaMemcpyHostToDevice, s));
    }
    else if (!strncmp(variant, "2dp:", 4)) {  // source pitch != dest pitch
      size_t w = 0, h = 0; sscanf(variant + 4, "%zu:%zu", &w, &h);
      CK(cudaMemcpy2DAsync(dev, w, host, w + 64, w, h, cudaMemcpyHostToDevice, s));
    }
    else if (!strcmp(variant, "none")) {}
    else { fprintf(stderr, "unknown %s\n", variant); return 2; }
    if (wait) { usleep(20); __atomic_store_n(flag, (unsigned)i, __ATOMIC_RELEASE); }
    CK(cudaStreamSynchronize(s));
    if (i > 5) t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  printf("pid %d %-12s %6zu B wait=%d: median %8.1f us  p10 %8.1f  p90 %8.1f\n", getpid(), variant, bytes, wait, t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  int procs = argc > 1 ? atoi(argv[1]) : 4;
  gProcs = procs;
  gReady = (int*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  struct V { std::string v; size_t b; bool wait; };
  std::vector<V> vs = {
    {"htod", 1024, true}, {"htod", 1025, true}, {"htod", 1100, true}, {"htod", 1536, true}, {"htod", 8, true},
    {"2d:512:2", 1024, true}, {"2d:256:4", 1024, true}, {"2d:128:8", 1024, true}, {"2d:4:2", 8, true},
    {"2d:3:2", 6, true}, {"2d:25:4", 100, true}, {"2d:125:8", 1000, true}, {"2d:1:7", 7, true},
    {"2dp:512:2", 1024, true}, {"2d:8:128", 1024, true},
    {"htod", 1024, false}, {"htod", 8, false}, {"2d:4:2", 8, false},
    {"dtoh", 1024, true}, {"dtoh", 2048, true}, {"mapped-dtod", 1024, true}, {"dtod", 1024, true},
    {"dtod", 1024, false}, {"2d", 1024, true}, {"2d16", 1024, true},
  };
  for (auto& x : vs) {
    *gReady = 0;
    std::vector<pid_t> kids;
    for (int p = 0; p < procs; ++p) {
      pid_t pid = fork();
      if (pid == 0) { CK(cudaSetDevice(0)); alarm(20); _exit(run(x.v.c_str(), x.b, 200, x.wait)); }
      kids.push_back(pid);
    }
    for (pid_t k : kids) { int st; waitpid(k, &st, 0); }
  }
  return 0;
}
