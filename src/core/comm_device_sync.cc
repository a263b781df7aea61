// SPDX-License-Identifier: Apache-2.0
// Device-side barriers of a communicator (core layer): the flag board's setup, its release, and the watchdog that
// bounds a barrier's wait (transport/cuda_ipc/flag_board.h, collectives/device_program.h).
#include <algorithm>
#include <chrono>
#include <string>

#include "common/log.h"
#include "common/param.h"
#include "core/communicator.h"
#include "primitives/device_kernels.h"
#include "transport/cuda_ipc/flag_board.h"
#include "transport/cuda_ipc/ipc_scratch.h"

namespace cfx::core {

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

Status Communicator::setupDeviceSync(cuda::CUcontext ctx) {
  const int mode = deviceSyncParam.get();
  if (mode == 0 || ipc_ == nullptr || (mode < 0 && ipc_->ranksShareDevice())) return Status();
  CFX_TRY_ASSIGN(board_, transport::cuda_ipc::FlagBoard::create(*bootstrap_, peers_, rank_, ctx, options_.timeout));
  if (board_ && prims::DeviceKernels::built()) {
    // Two slots at the end of the scratch, and at least half of it left to the windowed forms.
    oneShotBytes_ = std::min<size_t>(static_cast<size_t>(oneShotBytesParam.get()), ipc_->bytes() / 4) / 256 * 256;
  }
  return Status();
}

void Communicator::releaseDeviceBarriers() {
  if (board_) board_->release();
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
  const transport::cuda_ipc::FlagBoard& board = *board_;
  uint32_t watched = board.passed();
  auto since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(boardWatchMutex_);
  while (!boardWatchStop_) {
    const bool idle = board.passed() == board.issued();
    boardWatchCv_.wait_for(lock, idle ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(50));
    if (boardWatchStop_) break;
    const uint32_t arrived = board.arrived();
    const uint32_t passed = board.passed();
    if (arrived == passed || arrived != watched) {  // not waiting, or at a barrier it just reached
      watched = arrived;
      since = std::chrono::steady_clock::now();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - since;
    if (options_.timeout.count() == 0 || waited < options_.timeout) continue;
    std::string missing;
    for (int p = 0; p < nRanks_; ++p) {
      if (p == rank_ || static_cast<int32_t>(board.fromPeer(p) - arrived) >= 0) continue;
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
    board_->release();
    watched = board.issued();
  }
}

}  // namespace cfx::core
