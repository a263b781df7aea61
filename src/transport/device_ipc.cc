// SPDX-License-Identifier: Apache-2.0
// The device-direct pieces a communicator keeps (transport layer), over transport/cuda_ipc.
#include "transport/device_ipc.h"

#include "transport/cuda_ipc/flag_board.h"
#include "transport/cuda_ipc/ipc_scratch.h"
#include "transport/cuda_ipc/ipc_window.h"

namespace cfx::transport {

DeviceIpc::DeviceIpc(std::unique_ptr<cuda_ipc::IpcScratch> scratch, cuda::CUcontext ctx)
    : scratch_(std::move(scratch)), ctx_(ctx) {}

DeviceIpc::~DeviceIpc() {
  board_.reset();
  scratch_.reset();
}

Result<std::unique_ptr<DeviceIpc>> DeviceIpc::open(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                                                   cuda::CUcontext ctx, size_t scratchBytes,
                                                   std::chrono::milliseconds timeout) {
  CFX_TRY_ASSIGN(std::unique_ptr<cuda_ipc::IpcScratch> scratch,
                 cuda_ipc::IpcScratch::create(bootstrap, peers, rank, ctx, scratchBytes, timeout));
  if (scratch == nullptr) return std::unique_ptr<DeviceIpc>();
  return std::unique_ptr<DeviceIpc>(new DeviceIpc(std::move(scratch), ctx));
}

size_t DeviceIpc::scratchBytes() const { return scratch_->bytes(); }

bool DeviceIpc::ranksShareDevice() const { return scratch_->ranksShareDevice(); }

Status DeviceIpc::openBoard(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                            std::chrono::milliseconds timeout) {
  CFX_TRY_ASSIGN(std::unique_ptr<cuda_ipc::FlagBoard> board,
                 cuda_ipc::FlagBoard::create(bootstrap, peers, rank, ctx_, timeout));
  std::lock_guard<std::mutex> lock(boardMutex_);
  board_ = std::move(board);
  return Status();
}

void DeviceIpc::closeBoard() {
  std::unique_ptr<cuda_ipc::FlagBoard> board;
  {
    std::lock_guard<std::mutex> lock(boardMutex_);
    board = std::move(board_);
  }
}

void DeviceIpc::releaseBarriers() {
  std::lock_guard<std::mutex> lock(boardMutex_);
  if (board_) board_->release();
}

DeviceIpc::BarrierState DeviceIpc::barrierState() const {
  // Read in this order: a barrier reached before it was passed, and passed before it was handed out, is never seen
  // the other way round.
  BarrierState at;
  at.arrived = board_->arrived();
  at.passed = board_->passed();
  at.issued = board_->issued();
  return at;
}

uint32_t DeviceIpc::barrierFromPeer(int p) const { return board_->fromPeer(p); }

Result<DeviceIpc::Window> DeviceIpc::mapWindow(Bootstrap& bootstrap, int rank, int nRanks, const void* buff,
                                               size_t bytes, std::chrono::milliseconds timeout,
                                               const std::function<Status()>& alive) const {
  CFX_TRY_ASSIGN(std::unique_ptr<cuda_ipc::IpcWindow> window,
                 cuda_ipc::IpcWindow::create(bootstrap, rank, nRanks, scratch_->context(), buff, bytes, timeout, alive));
  Window w;
  w.zeroCopy = window->zeroCopy();
  w.base = static_cast<uintptr_t>(window->base(rank));
  w.bytes = window->bytes(rank);
  w.mapping = std::move(window);
  return w;
}

}  // namespace cfx::transport
