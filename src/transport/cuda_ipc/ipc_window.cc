// SPDX-License-Identifier: Apache-2.0
// A registered window mapped by every rank of one host (transport layer, cuda_ipc); see ipc_window.h.
#include "transport/cuda_ipc/ipc_window.h"

#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "transport/cuda_ipc/block_exchange.h"

namespace cfx::transport::cuda_ipc {

namespace {

struct Export {
  BlockOffer block;      // the ncclMemAlloc block the window lies in
  uint64_t address;      // the window's first byte, for peers in this process
  uint64_t bytes;        // the window's size
  uint64_t blockOffset;  // the window's offset in its block
};

}  // namespace

Result<std::unique_ptr<IpcWindow>> IpcWindow::create(Bootstrap& bootstrap, int rank, int nRanks, cuda::CUcontext ctx,
                                                     const void* buff, size_t bytes, std::chrono::milliseconds timeout,
                                                     const std::function<Status()>& alive) {
  const size_t n = static_cast<size_t>(nRanks);
  const size_t me = static_cast<size_t>(rank);
  std::unique_ptr<IpcWindow> w(new IpcWindow());
  w->ctx_ = ctx;
  w->bases_.assign(n, 0);
  w->sizes_.assign(n, 0);
  w->bases_[me] = reinterpret_cast<cuda::CUdeviceptr>(buff);
  std::vector<Export> exports(n);
  Export& mine = exports[me];
  std::memset(&mine, 0, sizeof(mine));
  mine.address = reinterpret_cast<uint64_t>(buff);
  mine.bytes = bytes;
  const std::optional<ShareableBlock> block = findShareable(buff, bytes);
  std::unique_ptr<FdServer> server;
  mine.block = offerBlock(ctx != nullptr && block && bytes > 0 ? &*block : nullptr, &server);
  if (mine.block.ok) mine.blockOffset = mine.address - block->base;
  CFX_TRY(bootstrap.allGather(exports.data(), sizeof(Export)));
  std::vector<BlockOffer> offers(n);
  for (size_t p = 0; p < n; ++p) {
    w->sizes_[p] = exports[p].bytes;
    offers[p] = exports[p].block;
    if (!offers[p].ok) {
      CFX_INFO(log::Sys::Init,
               "rank %d: window %p registered without zero-copy: rank %zu's buffer is not from "
               "ncclMemAlloc (or cannot be shared)",
               rank, buff, p);
      return w;
    }
  }
  std::vector<cuda::CUdeviceptr> blockBases;
  const Status local = mapPeerBlocks(rank, offers, *server, *block, ctx, std::chrono::steady_clock::now() + timeout,
                                     alive, &w->mapped_, &blockBases);
  server.reset();
  if (!local.ok()) {
    CFX_WARN("rank %d: cannot map the window of %s; the window is registered without zero-copy", rank,
             local.message().c_str());
  }
  CFX_TRY_ASSIGN(const int notMapped, firstRankNotOk(bootstrap, rank, nRanks, local.ok()));
  if (notMapped >= 0) {
    CFX_INFO(log::Sys::Init, "rank %d: window %p registered without zero-copy: rank %d could not map it", rank, buff,
             notMapped);
    w->mapped_.clear();
    return w;
  }
  for (size_t p = 0; p < n; ++p) w->bases_[p] = blockBases[p] + exports[p].blockOffset;
  w->zeroCopy_ = true;
  CFX_INFO(log::Sys::Init, "rank %d: window %p (%zu B) mapped by all %zu ranks: zero-copy", rank, buff, bytes, n);
  return w;
}

IpcWindow::~IpcWindow() {
  if (mapped_.empty()) return;
  cuda::ScopedContext scope(ctx_);
  mapped_.clear();
}

}  // namespace cfx::transport::cuda_ipc
