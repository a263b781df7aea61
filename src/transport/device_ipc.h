// SPDX-License-Identifier: Apache-2.0
// The device-direct pieces a communicator keeps (transport layer): every rank's device scratch mapped into every rank
// of one host, the flag board of device-side barriers, and the zero-copy windows; over transport/cuda_ipc, which
// core/ does not include. The algorithms of collectives/ read the scratch, board and windows themselves
// (collectives/device_program.h); core/ only holds them and hands them on.
//
// Threading: open(), openBoard() and mapWindow() are collective and run where the communicator's collective setup
// runs; releaseBarriers() and barrierState() on any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/cuda_driver.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport {

namespace cuda_ipc {
class FlagBoard;
class IpcScratch;
class IpcWindow;
}  // namespace cuda_ipc

class DeviceIpc {
 public:
  // Collective: maps every rank's scratch of `scratchBytes`. Null (not an error) when any rank could not take part;
  // errors only when the bootstrap fails.
  static Result<std::unique_ptr<DeviceIpc>> open(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                                                 cuda::CUcontext ctx, size_t scratchBytes,
                                                 std::chrono::milliseconds timeout);
  ~DeviceIpc();
  DeviceIpc(const DeviceIpc&) = delete;
  DeviceIpc& operator=(const DeviceIpc&) = delete;

  const cuda_ipc::IpcScratch* scratch() const { return scratch_.get(); }
  size_t scratchBytes() const;
  // Whether two or more ranks run on one GPU; the same on every rank.
  bool ranksShareDevice() const;

  // Device-side barriers. Collective, all or nothing: afterwards board() is null on every rank where any rank could
  // not make the board; errors only when the bootstrap fails.
  Status openBoard(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers, int rank,
                   std::chrono::milliseconds timeout);
  cuda_ipc::FlagBoard* board() const { return board_.get(); }
  // Unmaps the board (where no stream may still poll it: cuda_ipc/flag_board.h).
  void closeBoard();
  // Lets this rank's stream past every barrier handed out so far. Any thread; nothing without a board.
  void releaseBarriers();
  // Where this rank's stream stands at the board's barriers: handed out, reached, passed (the board's counters).
  struct BarrierState {
    uint32_t issued = 0;
    uint32_t arrived = 0;
    uint32_t passed = 0;
  };
  BarrierState barrierState() const;
  // The last barrier peer p told this rank it reached.
  uint32_t barrierFromPeer(int p) const;

  // A zero-copy window: [base, base + bytes) on this rank, mapped on every rank where zeroCopy.
  struct Window {
    std::shared_ptr<const cuda_ipc::IpcWindow> mapping;  // unmapped when the last holder lets go
    bool zeroCopy = false;
    uintptr_t base = 0;
    size_t bytes = 0;
  };
  // Collective: maps every rank's [buff, buff + bytes). A window that cannot be shared comes back with zeroCopy
  // false on every rank; errors only when the bootstrap fails or `alive` reports one (a peer known dead).
  Result<Window> mapWindow(Bootstrap& bootstrap, int rank, int nRanks, const void* buff, size_t bytes,
                           std::chrono::milliseconds timeout, const std::function<Status()>& alive) const;

 private:
  explicit DeviceIpc(std::unique_ptr<cuda_ipc::IpcScratch> scratch, cuda::CUcontext ctx);
  std::unique_ptr<cuda_ipc::IpcScratch> scratch_;
  cuda::CUcontext ctx_;
  // board_ is set and cleared on the setup thread while releaseBarriers() may run on any (health, abort).
  std::mutex boardMutex_;
  std::unique_ptr<cuda_ipc::FlagBoard> board_;
};

}  // namespace cfx::transport
