// SPDX-License-Identifier: Apache-2.0
// Zero-copy collectives on symmetric windows: ncclMemAlloc memory (exported as a file descriptor) registered with
// ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), which every rank maps, so the device-direct path reads peers'
// buffers where they lie instead of copying them through its scratch. Label gpu; every test skips with a reason where
// no CUDA device exists. On the emulator, its counters tell which path ran; on the HIP stand-in, which has no virtual
// memory management, ncclMemAlloc is plain device memory and the same ops must be right over the scratch.
#include <conflux.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/cuda_driver.h"
#include "gpu/device_test_util.h"
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

namespace cfx::itest {
namespace {

// A buffer from ncclMemAlloc, freed with ncclMemFree.
struct NcclBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit NcclBuf(size_t n) : bytes(n) {
    if (ncclMemAlloc(&p, n) != ncclSuccess) throw std::runtime_error("ncclMemAlloc failed");
  }
  ~NcclBuf() { ncclMemFree(p); }
  NcclBuf(const NcclBuf&) = delete;
  NcclBuf& operator=(const NcclBuf&) = delete;
  CUdeviceptr ptr(size_t byteOffset = 0) const { return reinterpret_cast<CUdeviceptr>(p) + byteOffset; }
  void* at(size_t byteOffset) const { return static_cast<char*>(p) + byteOffset; }
};

// The IPC path with failure detection in about a second (heartbeats of 200 ms, 5 missed), for the fault tests.
RunOptions ipcFaultOptions() {
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  opts.env.emplace_back("CFX_TIMEOUT_MS", "30000");
  opts.env.emplace_back("CFX_HEARTBEAT_MS", "200");
  opts.env.emplace_back("CFX_HEARTBEAT_MISSES", "5");
  opts.timeout = std::chrono::seconds(120);
  opts.failOnChildError = false;
  return opts;
}

// Whether this run's ncclMemAlloc gives memory peers map in place: the CUDA stand-in (or a GPU) has the virtual
// memory API, the HIP stand-in does not. Safe in the test process (it asks a throwaway child).
bool zeroCopyExpected() { return !deviceRuntimeIsHip(); }

// The emulator's counters across one op: which path it took.
struct PathCounts {
  long long peerCopies = 0;
  long long vmmCopies = 0;
  long long vmmKernelReads = 0;
  long long kernels = 0;
  static PathCounts now() {
    return {emulatorCount("peer_copies"), emulatorCount("vmm_peer_copies"), emulatorCount("vmm_peer_kernel_reads"),
            emulatorCount("kernel_launches")};
  }
  PathCounts since(const PathCounts& before) const {
    return {peerCopies - before.peerCopies, vmmCopies - before.vmmCopies, vmmKernelReads - before.vmmKernelReads,
            kernels - before.kernels};
  }
};

// Every collective with a zero-copy form, in and out of place where it has one, on int32 values whose sums are
// exact, over 2 and 3 processes with 1 MiB of scratch each (every op is several scratch windows on the other path).
// The windows are registered inside a group, as a program driving several ranks from one thread must. On the
// emulator, every copy through a peer went through its window (none through its scratch), and reductions read peers'
// windows from the kernel.
TEST(GpuCollectives, ZeroCopyCollectivesInSymmetricWindows) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3}) {
    RunOptions opts;
    opts.env = ipcInSmallWindows();
    runRanks(n, opts, [&](RankContext& ctx) {
      RankOnDevice self(ctx);
      const cuda::Driver& d = self.d;
      ncclComm_t comm = self.comm;
      cuda::CUstream stream = self.stream;
      const int r = ctx.rank();
      const size_t count = 300001;  // int32 per block: ~1.2 MB, more than the scratch
      const size_t total = count * static_cast<size_t>(n);
      auto in = [](int rank, size_t i) {
        return static_cast<int32_t>((i % 9973) * 5 + static_cast<size_t>(rank) * 11);
      };
      NcclBuf send(total * 4), recv(total * 4);
      ncclWindow_t sendWin = nullptr, recvWin = nullptr;
      // On rank 1 only, a hole in the heap that the next small allocation (the third window's record) reuses, so
      // that the window records lie in a different address order on different ranks.
      std::unique_ptr<char[]> hole(r == 1 ? new char[32] : nullptr);
      const long long importsBefore = emulatorCount("vmm_imports");
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclCommWindowRegister(comm, send.p, send.bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC));
      NCCL_OK(ncclCommWindowRegister(comm, recv.p, recv.bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC));
      NCCL_OK(ncclGroupEnd());
      ASSERT_NE(sendWin, nullptr);
      ASSERT_NE(recvWin, nullptr);
      if (importsBefore >= 0 && zeroCopyExpected()) {
        EXPECT_EQ(emulatorCount("vmm_imports") - importsBefore, 2 * (n - 1)) << "each window maps every peer's block";
      }
      // A second window over a block already mapped maps nothing more; the ops below find their buffers in two
      // overlapping windows, and every rank must pick the same one.
      ncclWindow_t half = nullptr;
      hole.reset();
      NCCL_OK(ncclCommWindowRegister(comm, send.at(count * 4), (total - count) * 4, &half, NCCL_WIN_COLL_SYMMETRIC));
      if (importsBefore >= 0 && zeroCopyExpected()) {
        EXPECT_EQ(emulatorCount("vmm_imports") - importsBefore, 2 * (n - 1)) << "a block was imported twice";
      }
      auto upload = [&](const NcclBuf& b, size_t elems, size_t offset) {
        std::vector<int32_t> h(elems);
        for (size_t i = 0; i < elems; ++i) h[i] = in(r, offset + i);
        CU_OK(d.memcpyHtoDAsync(b.ptr(), h.data(), elems * 4, stream));
      };
      auto check = [&](const NcclBuf& b, size_t elems, const std::function<int32_t(size_t)>& want,
                       const std::string& what) {
        std::vector<int32_t> h(elems);
        CU_OK(d.memcpyDtoHAsync(h.data(), b.ptr(), elems * 4, stream));
        CU_OK(d.streamSynchronize(stream));
        size_t bad = 0;
        for (size_t i = 0; i < elems; ++i) bad += h[i] != want(i);
        EXPECT_EQ(bad, 0u) << what << " on " << n << " ranks, rank " << r;
      };
      auto sumOver = [&](size_t i) {
        int32_t s = 0;
        for (int p = 0; p < n; ++p) s += in(p, i);
        return s;
      };
      // Runs `op` and checks on the emulator that it took the zero-copy form: one pass of `copies` copies from peers
      // (n - 1: each other rank's part once) and `kernels` reduce kernels (1: the whole reduction at once). The
      // scratch path, with 1 MiB of scratch, cuts these ops into two or more windows, each with its own copies and
      // kernel. A build without reduce kernels stages its reductions.
      auto run = [&](const std::string& what, long long copies, long long kernels, const std::function<void()>& op) {
        const PathCounts before = PathCounts::now();
        op();
        CU_OK(d.streamSynchronize(stream));
        if (before.peerCopies < 0) return;  // a real driver does not say
        const PathCounts did = PathCounts::now().since(before);
        if (!zeroCopyExpected()) {
          EXPECT_EQ(did.vmmCopies, 0) << what;
          return;
        }
        if (kernels > 0 && !reduceKernelsBuilt()) return;
        EXPECT_EQ(did.peerCopies, copies) << what << ": not one pass over peers' windows";
        EXPECT_EQ(did.kernels, kernels) << what << ": not one reduction over peers' windows";
        if (kernels > 0) {
          EXPECT_GT(did.vmmKernelReads, 0) << what << ": the reduce kernel read no peer's memory";
        }
      };
      const long long others = n - 1;

      upload(send, total, 0);
      // Fewer elements than ranks: some ranks own an empty slice of the reduction.
      for (size_t few : {size_t{1}, size_t{2}}) {
        NCCL_OK(ncclAllReduce(send.p, recv.p, few, ncclInt32, ncclSum, comm, stream));
        check(recv, few, sumOver, "all-reduce of " + std::to_string(few) + " element(s)");
      }
      run("all-reduce", others, 1,
          [&] { NCCL_OK(ncclAllReduce(send.p, recv.p, count, ncclInt32, ncclSum, comm, stream)); });
      check(recv, count, sumOver, "all-reduce");
      run("all-reduce of a buffer in two windows", others, 1,
          [&] { NCCL_OK(ncclAllReduce(send.at(count * 4), recv.p, count, ncclInt32, ncclSum, comm, stream)); });
      check(
          recv, count, [&](size_t i) { return sumOver(count + i); }, "all-reduce of a buffer in two windows");
      upload(recv, count, 0);
      run("all-reduce in place", others, 1,
          [&] { NCCL_OK(ncclAllReduce(recv.p, recv.p, count, ncclInt32, ncclSum, comm, stream)); });
      check(recv, count, sumOver, "all-reduce in place");
      run("reduce-scatter", 0, 1,
          [&] { NCCL_OK(ncclReduceScatter(send.p, recv.p, count, ncclInt32, ncclSum, comm, stream)); });
      check(
          recv, count, [&](size_t i) { return sumOver(static_cast<size_t>(r) * count + i); }, "reduce-scatter");
      run("all-gather", others, 0, [&] { NCCL_OK(ncclAllGather(send.p, recv.p, count, ncclInt32, comm, stream)); });
      check(
          recv, total, [&](size_t i) { return in(static_cast<int>(i / count), i % count); }, "all-gather");
      run("all-to-all", others, 0, [&] { NCCL_OK(ncclAlltoAll(send.p, recv.p, count, ncclInt32, comm, stream)); });
      check(
          recv, total,
          [&](size_t i) { return in(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count); },
          "all-to-all");
      // In place: this rank's block of the output is its input.
      upload(recv, count, 0);
      CU_OK(d.memcpyDtoDAsync(recv.ptr(static_cast<size_t>(r) * count * 4), recv.ptr(), count * 4, stream));
      run("all-gather in place", others, 0, [&] {
        NCCL_OK(ncclAllGather(recv.at(static_cast<size_t>(r) * count * 4), recv.p, count, ncclInt32, comm, stream));
      });
      check(
          recv, total, [&](size_t i) { return in(static_cast<int>(i / count), i % count); }, "all-gather in place");
      run("reduce-scatter in place", 0, 1, [&] {
        NCCL_OK(ncclReduceScatter(send.p, send.at(static_cast<size_t>(r) * count * 4), count, ncclInt32, ncclSum, comm,
                                  stream));
      });
      CU_OK(d.streamSynchronize(stream));
      std::vector<int32_t> h(count);
      CU_OK(d.memcpyDtoHAsync(h.data(), send.ptr(static_cast<size_t>(r) * count * 4), count * 4, stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += h[i] != sumOver(static_cast<size_t>(r) * count + i);
      EXPECT_EQ(bad, 0u) << "reduce-scatter in place on " << n << " ranks, rank " << r;
      if (emulatorCount("progress_thread_work") >= 0) {
        EXPECT_EQ(emulatorCount("progress_thread_work"), 0) << "device work was enqueued from the progress thread";
      }
      NCCL_OK(ncclCommWindowDeregister(comm, half));
      NCCL_OK(ncclCommWindowDeregister(comm, sendWin));
      NCCL_OK(ncclCommWindowDeregister(comm, recvWin));
    });
  }
}

// A zero-copy op reads peers' buffers in place, so it must hold every rank at both ends: no peer reads a rank's input
// before that rank's stream reached the op, and no rank's stream goes on (to overwrite its input) while a peer still
// reads it. Rank 0's stream is held before it writes its input, and its copies are slow (the emulator's
// CFX_EMU_COPY_DELAY_US); rank 1 writes its input, runs the all-gather and at once overwrites its input on its
// stream. Both must still gather the inputs as they were at the op.
TEST(GpuCollectives, ZeroCopyOpsWaitForEveryRanksStreamAtBothEnds) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    const int r = ctx.rank();
    const size_t count = 1 << 20;
    NcclBuf send(count);
    DevBuf recv(d, 2 * count);
    ncclWindow_t win = nullptr;
    NCCL_OK(ncclCommWindowRegister(self.comm, send.p, count, &win, NCCL_WIN_COLL_SYMMETRIC));
    CU_OK(d.memsetD8Async(send.ptr(), 0x11, count, self.stream));  // stale: no peer may read this
    CU_OK(d.streamSynchronize(self.stream));
    const StreamHold hold(d);
    if (r == 0) {
      CU_OK(hold.hold(self.stream));
      setenv("CFX_EMU_COPY_DELAY_US", "100000", 1);
    }
    CU_OK(d.memsetD8Async(send.ptr(), static_cast<unsigned char>(0xA0 + r), count, self.stream));
    NCCL_OK(ncclAllGather(send.p, recv.p(), count, ncclUint8, self.comm, self.stream));
    CU_OK(d.memsetD8Async(send.ptr(), 0xEE, count, self.stream));  // the user reuses its input at once
    std::thread release;
    if (r == 0) release = hold.releaseAfter(std::chrono::milliseconds(300));
    std::vector<uint8_t> out(2 * count);
    CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, out.size(), self.stream));
    CU_OK(d.streamSynchronize(self.stream));
    if (release.joinable()) release.join();
    size_t stale = 0, overwritten = 0, bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      stale += out[i] == 0x11;
      overwritten += out[i] == 0xEE;
      bad += out[i] != static_cast<uint8_t>(0xA0 + i / count);
    }
    EXPECT_EQ(stale, 0u) << "rank " << r << " read a peer's input before the peer's stream reached the op";
    EXPECT_EQ(overwritten, 0u) << "rank " << r << " read a peer's input after the peer's stream went past the op";
    EXPECT_EQ(bad, 0u) << "rank " << r;
    NCCL_OK(ncclCommWindowDeregister(self.comm, win));
  });
}

// Registering a symmetric window is a collective step that waits for every rank. A rank that dies during it fails
// the survivors' registration within the failure-detection time, naming it on every survivor (the bootstrap alone
// blamed whichever neighbour closed first), instead of leaving them waiting: killed before its call, or (on the
// emulator, which can stop it there) after it handed its own block's descriptor to its peers, while mapping theirs,
// when the survivors may have mapped its block and sent it theirs into a closed socket.
void expectAPeerDyingInRegistrationNamed(bool afterHandingOut) {
  constexpr int kVictim = 2;
  RunOptions opts = ipcFaultOptions();
  const auto started = std::chrono::steady_clock::now();
  const RunResult result = runRanks(3, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    NcclBuf buf(1 << 20);
    ASSERT_TRUE(ctx.barrier());
    if (ctx.rank() == kVictim) {
      if (!afterHandingOut) ctx.killSelf(SIGKILL);
      ::setenv("CFX_EMU_DIE_AT_IMPORT", "1", 1);
    }
    ncclWindow_t win = nullptr;
    const ncclResult_t rc = ncclCommWindowRegister(self.comm, buf.p, buf.bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    EXPECT_NE(rc, ncclSuccess);
    const std::string text = ncclGetLastError(self.comm);
    EXPECT_TRUE(namesRank(text, kVictim)) << text;
    EXPECT_EQ(ncclCommAbort(self.comm), ncclSuccess);
    self.comm = nullptr;
  });
  for (int r = 0; r < 3; ++r) {
    if (r != kVictim) {
      EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r].describe();
    }
  }
  EXPECT_EQ(result.ranks[kVictim].termSignal, SIGKILL)
      << "the victim did not die where meant: " << result.ranks[kVictim].describe();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "the survivors waited too long";
}

TEST(GpuCollectives, APeerKilledBeforeRegisteringFailsTheRegistrationNamingIt) {
  SKIP_WITHOUT_GPU();
  expectAPeerDyingInRegistrationNamed(false);
}

TEST(GpuCollectives, APeerDyingWhileMappingItsPeersBlocksFailsTheRegistrationNamingIt) {
  SKIP_WITHOUT_GPU();
  if (!onEmulator()) GTEST_SKIP() << "a real driver cannot be made to die inside an import";
  if (!zeroCopyExpected()) GTEST_SKIP() << "no block exchange without CUDA's virtual memory management";
  expectAPeerDyingInRegistrationNamed(true);
}

// Ranks 0..n-1 of this process on one GPU, each with `count` int32 in bufs[r] and room for n times that in
// gathered[r]: rank r uploads (i % 1000) * (r + 1), then one group of in-place all-reduces and one of all-gathers
// into gathered[r] run on a stream per rank, and every element is checked. `endGroup` ends each group.
void allReduceThenAllGather(const cuda::Driver& d, const ncclComm_t* comms, int n,
                            const std::vector<std::unique_ptr<NcclBuf>>& bufs,
                            const std::vector<std::unique_ptr<NcclBuf>>& gathered, size_t count,
                            const std::function<void()>& endGroup) {
  std::vector<cuda::CUstream> streams(n);
  for (int r = 0; r < n; ++r) {
    CU_OK(d.streamCreate(&streams[r], cuda::kStreamNonBlocking));
    std::vector<int32_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1000) * (r + 1);
    CU_OK(d.memcpyHtoDAsync(bufs[r]->ptr(), in.data(), count * 4, streams[r]));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    NCCL_OK(ncclAllReduce(bufs[r]->p, bufs[r]->p, count, ncclInt32, ncclSum, comms[r], streams[r]));
  }
  endGroup();
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    NCCL_OK(ncclAllGather(bufs[r]->p, gathered[r]->p, count, ncclInt32, comms[r], streams[r]));
  }
  endGroup();
  const int32_t ranksSum = n * (n + 1) / 2;
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> out(count * n);
    CU_OK(d.memcpyDtoHAsync(out.data(), gathered[r]->ptr(), out.size() * 4, streams[r]));
    CU_OK(d.streamSynchronize(streams[r]));
    size_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) bad += out[i] != static_cast<int32_t>((i % count) % 1000) * ranksSum;
    EXPECT_EQ(bad, 0u) << "rank " << r;
    d.streamDestroy(streams[r]);
  }
}

// Three ranks of one process on one GPU, driven from one thread: their windows are registered in one group (each
// communicator's registrations run in order, the communicators side by side) and map nothing (a peer in the same
// process is read at its own address); a group of in-place all-reduces and then all-gathers is right.
TEST(GpuCollectives, ZeroCopyWindowsOfRanksInOneProcess) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(1, opts, [&](RankContext&) {
    const cuda::Driver& d = useDevice0();
    constexpr int n = 3;
    ncclComm_t comms[n];
    int devs[n] = {0, 0, 0};
    NCCL_OK(ncclCommInitAll(comms, n, devs));
    const size_t count = 200003;
    std::vector<std::unique_ptr<NcclBuf>> bufs, gathered;
    std::vector<ncclWindow_t> wins(2 * n);
    const long long importsBefore = emulatorCount("vmm_imports");
    for (int r = 0; r < n; ++r) {
      bufs.push_back(std::make_unique<NcclBuf>(count * 4));
      gathered.push_back(std::make_unique<NcclBuf>(count * 4 * n));
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      NCCL_OK(ncclCommWindowRegister(comms[r], bufs[r]->p, count * 4, &wins[2 * r], NCCL_WIN_COLL_SYMMETRIC));
      NCCL_OK(
          ncclCommWindowRegister(comms[r], gathered[r]->p, count * 4 * n, &wins[2 * r + 1], NCCL_WIN_COLL_SYMMETRIC));
    }
    NCCL_OK(ncclGroupEnd());
    if (importsBefore >= 0) {
      EXPECT_EQ(emulatorCount("vmm_imports"), importsBefore) << "ranks of one process imported each other's memory";
    }
    allReduceThenAllGather(d, comms, n, bufs, gathered, count, [] { NCCL_OK(ncclGroupEnd()); });
    for (int r = 0; r < n; ++r) {
      NCCL_OK(ncclCommWindowDeregister(comms[r], wins[2 * r]));
      NCCL_OK(ncclCommWindowDeregister(comms[r], wins[2 * r + 1]));
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  });
}

// `n` non-blocking communicators (config.blocking = 0, as PyTorch's TORCH_NCCL_USE_COMM_NONBLOCKING makes) of one
// clique, all ranks in this process, created from this thread and polled until ready.
void initNonBlocking(ncclComm_t* comms, int n) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  for (int r = 0; r < n; ++r) {
    const ncclResult_t rc = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
  }
  for (int r = 0; r < n; ++r) ASSERT_EQ(waitWhileInProgress(comms[r]), ncclSuccess) << "init of rank " << r;
}

// Non-blocking communicators (config.blocking = 0) of three ranks in one process, driven from one thread: each
// registration returns ncclInProgress and completes in the background as NCCL's does, so registering on each
// communicator in turn works (a blocking registration would wait for peers this thread has not reached yet). While
// one is pending, ncclCommGetAsyncError says ncclInProgress and operations, deregistration and finalize are refused
// by name; two registrations on each communicator inside one group end in ncclInProgress from ncclGroupEnd; then
// in-place all-reduces and all-gathers in the windows are right.
TEST(GpuCollectives, NonBlockingWindowRegistrationFromOneThread) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  opts.env.emplace_back("CFX_TIMEOUT_MS", "20000");  // a registration that blocks fails, rather than hangs
  runRanks(1, opts, [&](RankContext&) {
    const cuda::Driver& d = useDevice0();
    constexpr int n = 3;
    ncclComm_t comms[n] = {};
    ASSERT_NO_FATAL_FAILURE(initNonBlocking(comms, n));
    const size_t count = 200003;
    std::vector<std::unique_ptr<NcclBuf>> bufs, gathered;
    for (int r = 0; r < n; ++r) {
      bufs.push_back(std::make_unique<NcclBuf>(count * 4));
      gathered.push_back(std::make_unique<NcclBuf>(count * 4 * n));
    }
    std::vector<ncclWindow_t> wins(3 * n);
    // Rank 0 first, alone: its registration cannot finish before the others join.
    ASSERT_EQ(ncclCommWindowRegister(comms[0], bufs[0]->p, count * 4, &wins[0], NCCL_WIN_COLL_SYMMETRIC),
              ncclInProgress);
    ncclResult_t state = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
    EXPECT_EQ(state, ncclInProgress);
    EXPECT_EQ(ncclAllReduce(bufs[0]->p, bufs[0]->p, count, ncclInt32, ncclSum, comms[0], nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("ncclCommWindowRegister is still in progress"),
              std::string::npos)
        << ncclGetLastError(comms[0]);
    EXPECT_EQ(ncclCommWindowDeregister(comms[0], wins[0]), ncclInvalidUsage);
    EXPECT_EQ(ncclCommFinalize(comms[0]), ncclInvalidUsage);
    for (int r = 1; r < n; ++r) {
      const ncclResult_t rc =
          ncclCommWindowRegister(comms[r], bufs[r]->p, count * 4, &wins[r], NCCL_WIN_COLL_SYMMETRIC);
      EXPECT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
    }
    for (int r = 0; r < n; ++r) ASSERT_EQ(waitWhileInProgress(comms[r]), ncclSuccess) << "first window, rank " << r;
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      NCCL_OK(ncclCommWindowRegister(comms[r], gathered[r]->p, count * 4 * n, &wins[n + r], NCCL_WIN_COLL_SYMMETRIC));
      NCCL_OK(ncclCommWindowRegister(comms[r], bufs[r]->p, count * 2, &wins[2 * n + r], NCCL_WIN_COLL_SYMMETRIC));
    }
    EXPECT_EQ(ncclGroupEnd(), ncclInProgress);
    for (int r = 0; r < n; ++r) ASSERT_EQ(waitWhileInProgress(comms[r]), ncclSuccess) << "grouped windows, rank " << r;
    // A non-blocking communicator's group may report ncclInProgress while it is enqueued.
    allReduceThenAllGather(d, comms, n, bufs, gathered, count, [&] {
      const ncclResult_t rc = ncclGroupEnd();
      ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
      for (int r = 0; r < n; ++r) ASSERT_EQ(waitWhileInProgress(comms[r]), ncclSuccess);
    });
    for (int r = 0; r < n; ++r) {
      for (int w = 0; w < 3; ++w) NCCL_OK(ncclCommWindowDeregister(comms[r], wins[w * n + r]));
    }
    for (int r = 0; r < n; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  });
}

// A window registered on a non-blocking communicator whose init has not finished (its peer has not joined yet) is
// refused by name, not silently left unmapped on this rank while the peers wait for it.
TEST(GpuCollectives, AWindowOnACommunicatorStillInitializingIsRefused) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(1, opts, [&](RankContext&) {
    useDevice0();
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comms[2] = {};
    const ncclResult_t rc = ncclCommInitRankConfig(&comms[0], 2, id, 0, &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << resultName(rc);
    NcclBuf buf(1 << 20);
    ncclWindow_t win = nullptr;
    EXPECT_EQ(ncclCommWindowRegister(comms[0], buf.p, buf.bytes, &win, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("still initializing"), std::string::npos)
        << ncclGetLastError(comms[0]);
    const ncclResult_t rc1 = ncclCommInitRankConfig(&comms[1], 2, id, 1, &config);
    ASSERT_TRUE(rc1 == ncclSuccess || rc1 == ncclInProgress) << resultName(rc1);
    for (ncclComm_t c : comms) ASSERT_EQ(waitWhileInProgress(c), ncclSuccess);
    for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
  });
}

// ncclCommAbort never hangs, also while a non-blocking registration waits for a peer that never registers: the
// registration ends at once and the communicator goes, long before the registration's own timeout.
TEST(GpuCollectives, AbortEndsAPendingNonBlockingRegistration) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  opts.env.emplace_back("CFX_TIMEOUT_MS", "600000");
  runRanks(1, opts, [&](RankContext&) {
    useDevice0();
    constexpr int n = 2;
    ncclComm_t comms[n] = {};
    ASSERT_NO_FATAL_FAILURE(initNonBlocking(comms, n));
    NcclBuf buf(1 << 20);
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommWindowRegister(comms[0], buf.p, buf.bytes, &win, NCCL_WIN_COLL_SYMMETRIC), ncclInProgress);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ncclResult_t state = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
    EXPECT_EQ(state, ncclInProgress) << "rank 1 never registered";
    const auto started = std::chrono::steady_clock::now();
    NCCL_OK(ncclCommAbort(comms[0]));
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "abort waited on the peer";
    NCCL_OK(ncclCommAbort(comms[1]));
  });
}

// One rank of RanksInPidNamespacesOfTheirOwnWorkTogether, `pid` in a pid namespace of its own: rank 0 makes the id
// and hands it to the others through `idPipe`. After a few heartbeats, an all-reduce in symmetric windows
// (zero-copy) and one in plain device memory (through the scratch), checked. The exit status: 0 when right, else
// which step failed.
int rankInOwnPidNamespace(int rank, int nRanks, pid_t pid, const int idPipe[2]) {
  if (::getpid() != pid) return 2;
  ncclUniqueId id;
  if (!shareUniqueIdThroughPipe(rank, nRanks, idPipe, &id)) return 3;
  const cuda::Driver& d = useDevice0();
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nRanks, id, rank) != ncclSuccess) return 4;
  cuda::CUstream stream = nullptr;
  if (d.streamCreate(&stream, cuda::kStreamNonBlocking) != cuda::kSuccess) return 5;
  const size_t count = 300001;  // more than the 1 MiB scratch: several windows on that path
  NcclBuf inWindow(count * 4);
  DevBuf plain(d, count * 4);
  ncclWindow_t win = nullptr;
  if (ncclCommWindowRegister(comm, inWindow.p, inWindow.bytes, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) return 6;
  // On the stand-in: every peer's scratch and window block were imported, none taken for this process's.
  if (const long long imports = emulatorCount("vmm_imports"); imports >= 0 && imports != 2 * (nRanks - 1)) {
    std::fprintf(stderr, "rank %d: %lld peer blocks imported, expected %d\n", rank, imports, 2 * (nRanks - 1));
    return 11;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // heartbeats of 100 ms: time to misjudge a peer
  int failed = 0;
  for (void* buf : {inWindow.p, plain.p()}) {
    std::vector<int32_t> h(count);
    for (size_t i = 0; i < count; ++i) h[i] = static_cast<int32_t>(i % 1009) * (rank + 1);
    const auto dp = reinterpret_cast<CUdeviceptr>(buf);
    if (d.memcpyHtoDAsync(dp, h.data(), count * 4, stream) != cuda::kSuccess) return 7;
    if (ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, stream) != ncclSuccess) {
      std::fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
      return 8;
    }
    if (d.memcpyDtoHAsync(h.data(), dp, count * 4, stream) != cuda::kSuccess ||
        d.streamSynchronize(stream) != cuda::kSuccess) {
      return 9;
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || state != ncclSuccess) {
      std::fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
      return 12;
    }
    size_t bad = 0;
    const int32_t ranksSum = nRanks * (nRanks + 1) / 2;
    for (size_t i = 0; i < count; ++i) bad += h[i] != static_cast<int32_t>(i % 1009) * ranksSum;
    if (bad != 0) {
      std::fprintf(stderr, "rank %d: %zu of %zu elements wrong (%s)\n", rank, bad, count,
                   buf == inWindow.p ? "zero-copy window" : "scratch");
      failed = 10;
    }
  }
  ncclCommWindowDeregister(comm, win);
  ncclCommDestroy(comm);
  d.streamDestroy(stream);
  return failed;
}

// Ranks that each have a pid namespace of their own, as one container per GPU on a host gives them (sharing its
// network, /dev/shm and GPU): ranks 0 and 1 are both pid 1, rank 2 is pid 2. A pid does not name a process then.
// Taking a peer of the same pid for a rank of this process would read its addresses as this process's (both
// all-reduces wrong); watching a peer's pid here would watch another process or none (a healthy peer declared gone).
// Every rank must map every peer's memory and the all-reduces be right with no async error. Needs CAP_SYS_ADMIN for
// the namespaces; skipped without.
TEST(GpuCollectives, RanksInPidNamespacesOfTheirOwnWorkTogether) {
  SKIP_WITHOUT_GPU();
  if (!zeroCopyExpected()) GTEST_SKIP() << "the HIP stand-in's legacy handles name a process by its pid";
  SKIP_UNDER_TSAN_FORK_CHAINS();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  opts.env.emplace_back("CFX_HEARTBEAT_MS", "100");
  opts.env.emplace_back("CFX_BOOTSTRAP_TIMEOUT_MS", "20000");  // a rank that never came fails the others, not hangs
  runRanks(1, opts, [&](RankContext&) {
    constexpr int n = 3;
    const pid_t pids[n] = {1, 1, 2};
    int idPipe[2];
    ASSERT_EQ(::pipe(idPipe), 0);
    pid_t children[n];
    for (int r = 0; r < n; ++r) {
      children[r] = startInNewPidNamespace(pids[r], [&] { return rankInOwnPidNamespace(r, n, pids[r], idPipe); });
    }
    int codes[n];
    for (int r = 0; r < n; ++r) codes[r] = waitForPidNamespace(children[r]);
    if (std::count(codes, codes + n, kNoPidNamespace) > 0) GTEST_SKIP() << "no permission to make pid namespaces";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(codes[r], 0) << "rank " << r
                             << " (8 or 12: the op or the communicator failed; 10: wrong results; 11: a peer's memory "
                                "was not imported)";
    }
  });
}

// Windows that cannot be zero-copy stay on the scratch path, on every rank alike, with right results: a symmetric
// window over plain cuMemAlloc memory on one rank, and default (not symmetric) windows over ncclMemAlloc memory on
// all. Freeing a buffer before the peers deregister is allowed (a peer's mapping keeps the pages).
TEST(GpuCollectives, WindowsThatCannotBeZeroCopyStayOnTheScratchPath) {
  SKIP_WITHOUT_GPU();
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const int r = ctx.rank();
    const size_t count = (size_t{3} << 19) + 3;  // 1.5 MiB and a bit: two windows of scratch
    std::vector<uint8_t> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<uint8_t>(i * 13 + static_cast<size_t>(r) * 7);
    // All-gathers `in` from `sendbuff` and checks every byte.
    auto gatherAndCheck = [&](void* sendbuff, const std::string& what) {
      DevBuf recv(d, 2 * count);
      CU_OK(d.memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(sendbuff), in.data(), count, stream));
      NCCL_OK(ncclAllGather(sendbuff, recv.p(), count, ncclUint8, comm, stream));
      std::vector<uint8_t> out(2 * count);
      CU_OK(d.memcpyDtoHAsync(out.data(), recv.ptr, out.size(), stream));
      CU_OK(d.streamSynchronize(stream));
      size_t bad = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        bad += out[i] != static_cast<uint8_t>((i % count) * 13 + (i / count) * 7);
      }
      EXPECT_EQ(bad, 0u) << what << ", rank " << r;
    };
    // The same, and on the emulator it went through peers' scratch (1 MiB: two windows of the block, so two copies
    // from the peer), not in one pass over its window (one copy).
    auto allGather = [&](void* sendbuff, const std::string& what) {
      const long long before = emulatorCount("peer_copies");
      gatherAndCheck(sendbuff, what);
      if (before < 0) return;
      EXPECT_EQ(emulatorCount("peer_copies") - before, 2) << what << ": not the scratch path";
    };
    {
      // Rank 1's buffer is cuMemAlloc memory, which no peer can map: no rank uses the window.
      NcclBuf shareable(count);
      DevBuf plain(d, count);
      void* mine = r == 0 ? shareable.p : plain.p();
      ncclWindow_t win = nullptr;
      NCCL_OK(ncclCommWindowRegister(comm, mine, count, &win, NCCL_WIN_COLL_SYMMETRIC));
      allGather(mine, "a symmetric window of plain device memory on rank 1");
      NCCL_OK(ncclCommWindowDeregister(comm, win));
    }
    {
      NcclBuf buf(count);
      const long long importsBefore = emulatorCount("vmm_imports");
      ncclWindow_t win = nullptr;
      NCCL_OK(ncclCommWindowRegister(comm, buf.p, count, &win, NCCL_WIN_DEFAULT));
      allGather(buf.p, "a default window");
      if (importsBefore >= 0) {
        EXPECT_EQ(emulatorCount("vmm_imports"), importsBefore) << "a default window was mapped";
      }
      NCCL_OK(ncclCommWindowDeregister(comm, win));
    }
    {
      // Rank 0 frees its buffer at once after the op; rank 1 deregisters a moment later. Then both register anew.
      auto buf = std::make_unique<NcclBuf>(count);
      ncclWindow_t win = nullptr;
      NCCL_OK(ncclCommWindowRegister(comm, buf->p, count, &win, NCCL_WIN_COLL_SYMMETRIC));
      gatherAndCheck(buf->p, "all-gather in a symmetric window");
      if (r == 0) {
        NCCL_OK(ncclMemFree(buf->p));
        buf->p = nullptr;  // ncclMemFree(NULL) in its destructor is a no-op
        NCCL_OK(ncclCommWindowDeregister(comm, win));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        NCCL_OK(ncclCommWindowDeregister(comm, win));
      }
      NcclBuf again(count);
      NCCL_OK(ncclCommWindowRegister(comm, again.p, count, &win, NCCL_WIN_COLL_SYMMETRIC));
      gatherAndCheck(again.p, "all-gather in a window registered after a peer freed its last one");
      NCCL_OK(ncclCommWindowDeregister(comm, win));
    }
  });
}

// One all-gather whose buffers break the symmetric promise on rank 1 (see the test below).
void expectAsymmetricBuffersNamed(bool outside) {
  RunOptions opts;
  opts.env = ipcInSmallWindows();
  opts.failOnChildError = false;
  const RunResult result = runRanks(2, opts, [&](RankContext& ctx) {
    RankOnDevice self(ctx);
    const cuda::Driver& d = self.d;
    ncclComm_t comm = self.comm;
    cuda::CUstream stream = self.stream;
    const size_t count = 65536;
    NcclBuf buf(count + 4096);
    ncclWindow_t win = nullptr;
    NCCL_OK(ncclCommWindowRegister(comm, buf.p, buf.bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    DevBuf recv(d, 2 * count);
    DevBuf elsewhere(d, count);
    void* send = ctx.rank() == 0 ? buf.at(0) : outside ? elsewhere.p() : buf.at(4096);
    NCCL_OK(ncclAllGather(send, recv.p(), count, ncclUint8, comm, stream));
    EXPECT_EQ(waitForAsyncError(comm, std::chrono::seconds(60)), ncclInvalidUsage);
    const std::string text = ncclGetLastError(comm);
    EXPECT_NE(text.find("same offsets"), std::string::npos) << text;
    CU_OK(d.streamSynchronize(stream));  // released, not left waiting
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    self.comm = nullptr;
  });
  for (const RankOutcome& r : result.ranks) EXPECT_TRUE(r.ok()) << r.describe();
}

// NCCL_WIN_COLL_SYMMETRIC promises a collective's buffers sit at the same offset of every rank's window. Ranks that
// break it get a named error on every rank instead of each other's wrong bytes, and their streams go on: rank 1's
// buffer one page further in, or outside every window (so rank 1 takes the scratch form, rank 0 the zero-copy one).
TEST(GpuCollectives, BuffersAtDifferentWindowOffsetsFailNamingTheCause) {
  SKIP_WITHOUT_GPU();
  if (!zeroCopyExpected()) GTEST_SKIP() << "no zero-copy windows without CUDA's virtual memory management";
  for (const bool outside : {false, true}) {
    SCOPED_TRACE(outside ? "rank 1's buffer outside every window" : "rank 1's buffer a page further in");
    expectAsymmetricBuffersNamed(outside);
  }
}

}  // namespace
}  // namespace cfx::itest
