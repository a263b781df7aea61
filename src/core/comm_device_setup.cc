// SPDX-License-Identifier: Apache-2.0
// The device-direct (CUDA IPC) path of a communicator (core layer): whether it is on, its scratch and kernels, and
// its device-side barriers: the flag board's setup, its release, and the watchdog that bounds a barrier's wait
// (transport/device_ipc.h, collectives/device_program.h).
#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/log.h"
#include "common/param.h"
#include "core/communicator.h"
#include "primitives/device_kernels.h"
#include "transport/device_ipc.h"

namespace cfx::core {

CFX_PARAM(int, cudaIpcParam, "CFX_CUDA_IPC", -1,
          "Collectives and sends/receives on device buffers between the ranks of one host move directly through CUDA "
          "(HIP) IPC: copy engines and reduce kernels on device scratch every rank maps (and in place, in symmetric "
          "windows), no host staging; see CFX_CUDA_IPC_MIN_BYTES for the sizes it takes. -1 (default): on wherever "
          "every rank of the communicator is on one host with a device and every rank can map the others' memory, "
          "else every op stages through pinned host memory, with one INFO line saying why; 1: the same, with a WARN "
          "instead where it cannot be on; 0: always stage. Must be the same on every rank.",
          param::inRange(-1, 1));
CFX_PARAM(int64_t, cudaIpcBytesParam, "CFX_CUDA_IPC_BYTES", 64 << 20,
          "Device scratch per rank for the CUDA IPC path; operations larger than this run in windows of this size.",
          param::inRange<int64_t>(1 << 20, int64_t{1} << 34));
CFX_PARAM(int64_t, cudaIpcMinBytesParam, "CFX_CUDA_IPC_MIN_BYTES", -1,
          "On the CUDA IPC path (CFX_CUDA_IPC), ops moving fewer bytes than this (all-gather: its output) stage "
          "through host memory instead. -1 (auto): 8 MiB where ranks share a GPU (each of the path's waits for the "
          "GPU then costs a context switch between processes, ~0.5 ms on an H100 with 4), else 0.",
          param::atLeast<int64_t>(-1));
CFX_PARAM(int, deviceSyncParam, "CFX_CUDA_IPC_DEVICE_SYNC", -1,
          "Barriers of the CUDA IPC path on the device: every stream writes its arrival into host memory every rank "
          "maps and waits for its peers' there (cuStreamWriteValue32/cuStreamWaitValue32), with no host thread per "
          "step, and small all-reduces run as one kernel (IpcOneShot, see CFX_CUDA_IPC_ONESHOT_BYTES). -1 (default): "
          "where no two ranks share a GPU; 1: also where they do (not yet measured on a GPU); 0: barriers on the "
          "host only. Must be the same on every rank.",
          param::inRange(-1, 1));
CFX_PARAM(int64_t, oneShotBytesParam, "CFX_CUDA_IPC_ONESHOT_BYTES", 64 << 10,
          "With device-side barriers, all-reduces of at most this many bytes run as one kernel after one barrier "
          "(IpcOneShot); two slots of this size end each rank's IPC scratch. 0: never.",
          param::inRange<int64_t>(0, int64_t{16} << 20));

// The device-direct path (core/device_direct.h) maps every rank's device scratch into every other rank. It needs
// all ranks on one host, each with a device; the condition is computed from exchanged facts, so every rank takes the
// same branch into the collective setup. CFX_CUDA_IPC must be the same on every rank.
Status Communicator::setupDeviceDirect() {
  if (cudaIpcParam.get() == 0 || nRanks_ < 2 || cuda::driver() == nullptr) return Status();
  // Why the path cannot be on, from facts every rank has: one line, at INFO (WARN where CFX_CUDA_IPC=1 asked).
  auto off = [this](const std::string& why) {
    if (cudaIpcParam.get() == 1) {
      CFX_WARN("rank %d: CFX_CUDA_IPC=1 but the device-direct (CUDA IPC) path is off: %s; device buffers stage "
               "through host memory", rank_, why.c_str());
    } else {
      CFX_INFO(log::Sys::Init, "rank %d: device-direct (CUDA IPC) path off: %s; device buffers stage through host "
               "memory", rank_, why.c_str());
    }
    return Status();
  };
  int hosts = 0;
  std::unordered_set<uint64_t> seen;
  for (const transport::PeerInfo& p : peers_) hosts += seen.insert(p.hostHash).second ? 1 : 0;
  int noDevice = -1;
  for (int r = 0; r < nRanks_ && noDevice < 0; ++r) noDevice = peers_[static_cast<size_t>(r)].cudaDev < 0 ? r : -1;
  // A host-memory job on a machine with CUDA says nothing: none of its ranks made a device current.
  if (cudaDev_ < 0 && cudaIpcParam.get() != 1) return Status();
  if (hosts > 1) return off(strprintf("the ranks run on %d hosts, and CUDA IPC maps memory within one", hosts));
  if (noDevice >= 0) return off(strprintf("rank %d had no CUDA device current when it joined", noDevice));
  const cuda::CUcontext ctx = cuda::primaryContext(cudaDev_);
  // The reduce kernels are loaded here, by every rank, before the scratch's exchanges below (which no rank leaves
  // before every rank entered them): so no rank loads a module while a peer's stream already waits, inside an op,
  // for a flag only this rank's progress can release. Loading a module or function can need the GPU (CUDA's lazy
  // loading may synchronize the context), and ranks share it. Issue 35's hang (default size rule only, where the first
  // IPC op came after staged ones, and so after faster peers had entered it) is the one run where a load could meet
  // such a wait; see docs/gpu_proof.md. A rank that cannot load them turns the path off on every rank.
  if (prims::DeviceKernels::built()) {
    Result<const prims::DeviceKernels*> kernels = prims::DeviceKernels::get(ctx);
    std::vector<int32_t> loaded(static_cast<size_t>(nRanks_), 0);
    loaded[static_cast<size_t>(rank_)] = kernels.ok() ? 1 : 0;
    CFX_TRY(bootstrap_->allGather(loaded.data(), sizeof(int32_t)));
    for (int p = 0; p < nRanks_; ++p) {
      if (loaded[static_cast<size_t>(p)] != 0) continue;
      CFX_INFO(log::Sys::Init,
               "rank %d: device-direct (CUDA IPC) path off: rank %d could not load the reduce kernels%s%s", rank_, p,
               p == rank_ ? ": " : "", p == rank_ ? kernels.status().message().c_str() : "");
      return Status();
    }
  }
  CFX_TRY_ASSIGN(
      std::unique_ptr<transport::DeviceIpc> ipc,
      transport::DeviceIpc::open(*bootstrap_, peers_, rank_, ctx, static_cast<size_t>(cudaIpcBytesParam.get()),
                                 options_.timeout));
  {
    std::lock_guard<std::mutex> lock(ipcMutex_);  // the health thread may be releasing barriers already
    ipc_ = std::move(ipc);
  }
  // Measured on an H100 with 4 processes on it (docs/gpu_proof.md, run 6): the staged path beat this one up to
  // 4 MiB (all-reduce 1.4 ms against 1.9 ms) and lost from 16 MiB (6.9 ms against 2.0 ms).
  constexpr size_t kSharedGpuMinBytes = size_t{8} << 20;
  const int64_t minBytes = cudaIpcMinBytesParam.get();
  if (ipc_)
    ipcMinBytes_ = minBytes >= 0 ? static_cast<size_t>(minBytes) : ipc_->ranksShareDevice() ? kSharedGpuMinBytes : 0;
  return setupDeviceSync();
}

Status Communicator::setupDeviceSync() {
  const int mode = deviceSyncParam.get();
  if (mode == 0 || ipc_ == nullptr || (mode < 0 && ipc_->ranksShareDevice())) return Status();
  CFX_TRY(ipc_->openBoard(*bootstrap_, peers_, rank_, options_.timeout));
  if (ipc_->board() && prims::DeviceKernels::built()) {
    // Two slots at the end of the scratch, and at least half of it left to the windowed forms.
    oneShotBytes_ = std::min<size_t>(static_cast<size_t>(oneShotBytesParam.get()), ipc_->scratchBytes() / 4) / 256 * 256;
  }
  return Status();
}

void Communicator::releaseDeviceBarriers() {
  std::lock_guard<std::mutex> lock(ipcMutex_);
  if (ipc_) ipc_->releaseBarriers();
}

void Communicator::watchDeviceBarriers() {
  std::lock_guard<std::mutex> lock(boardWatchMutex_);
  if (!boardWatch_.joinable() && !boardWatchStop_) boardWatch_ = std::thread([this] { boardWatchLoop(); });
  boardWatchCv_.notify_all();
}

void Communicator::stopBoardWatch() {
  {
    std::lock_guard<std::mutex> lock(boardWatchMutex_);
    boardWatchStop_ = true;
  }
  boardWatchCv_.notify_all();
  if (boardWatch_.joinable()) boardWatch_.join();
}

// Every 50 ms while this rank's stream is inside a device-side barrier: once it has waited there CFX_TIMEOUT_MS (0:
// never) for peers that have not arrived, the op fails naming them, the error becomes the communicator's async error
// (as a staged op's timeout does), and the stream is released. The stream's own arrival word tells that it really
// waits there (and not in earlier work of the user's), so a peer is blamed only for its own absence.
void Communicator::boardWatchLoop() {
  char name[16];
  std::snprintf(name, sizeof(name), "cfx-barr-%u", static_cast<unsigned>(rank_) % 100000u);
  pthread_setname_np(pthread_self(), name);
  log::setThreadRank(rank_);
  const transport::DeviceIpc& board = *ipc_;
  uint32_t watched = board.barrierState().passed;
  auto since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(boardWatchMutex_);
  while (!boardWatchStop_) {
    const transport::DeviceIpc::BarrierState at = board.barrierState();
    const bool idle = at.passed == at.issued;
    boardWatchCv_.wait_for(lock, idle ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(50));
    if (boardWatchStop_) break;
    const transport::DeviceIpc::BarrierState now = board.barrierState();
    const uint32_t arrived = now.arrived;
    const uint32_t passed = now.passed;
    if (arrived == passed || arrived != watched) {  // not waiting, or at a barrier it just reached
      watched = arrived;
      since = std::chrono::steady_clock::now();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - since;
    if (options_.timeout.count() == 0 || waited < options_.timeout) continue;
    std::string missing;
    for (int p = 0; p < nRanks_; ++p) {
      if (p == rank_ || static_cast<int32_t>(board.barrierFromPeer(p) - arrived) >= 0) continue;
      missing += strprintf("%s%d", missing.empty() ? "" : ", ", p);
    }
    if (missing.empty()) continue;  // they arrived meanwhile
    const Status st = Status::error(
        Errc::Timeout,
        strprintf("rank %d: timeout after %lld ms at device-side barrier %u of a device op: rank(s) %s did not reach "
                  "it (a different call or host buffers there, or the rank stopped); the op's outputs are undefined "
                  "and its stream goes on",
                  rank_, static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
                  arrived, missing.c_str()));
    CFX_WARN("%s", st.message().c_str());
    setAsyncError(st);
    ipc_->releaseBarriers();
    watched = board.barrierState().issued;
  }
}

}  // namespace cfx::core
