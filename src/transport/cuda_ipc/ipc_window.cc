// SPDX-License-Identifier: Apache-2.0
// A registered window mapped by every rank of one host (transport layer, cuda_ipc); see ipc_window.h.
#include "transport/cuda_ipc/ipc_window.h"

#include <unistd.h>

#include <cstring>

#include "common/log.h"

namespace cfx::transport::cuda_ipc {

namespace {

struct Export {
  uint64_t address;      // the window's first byte, for peers in this process
  uint64_t bytes;        // the window's size
  uint64_t blockOffset;  // the window's offset in its ncclMemAlloc block
  uint64_t blockBytes;   // the block's mapped size
  uint64_t blockId;      // checked when the descriptor arrives
  uint64_t token;        // the exporter's processToken(): with pid and blockId, names the block for the mapping cache
  int32_t pid;
  int32_t ok;
  char server[56];  // this rank's FdServer name, NUL-terminated
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
  std::vector<Export> exports(n);
  Export& mine = exports[me];
  std::memset(&mine, 0, sizeof(mine));
  mine.address = reinterpret_cast<uint64_t>(buff);
  mine.bytes = bytes;
  mine.pid = static_cast<int32_t>(::getpid());
  mine.token = processToken();
  const std::optional<ShareableBlock> block = findShareable(buff, bytes);
  std::unique_ptr<FdServer> server;
  if (ctx != nullptr && block && bytes > 0) {
    Result<std::unique_ptr<FdServer>> listening = FdServer::listen();
    if (listening.ok()) {
      server = std::move(listening.value());
      mine.ok = 1;
      mine.blockOffset = mine.address - block->base;
      mine.blockBytes = block->bytes;
      mine.blockId = block->id;
      std::strncpy(mine.server, server->name().c_str(), sizeof(mine.server) - 1);
    } else {
      CFX_INFO(log::Sys::Init, "rank %d: window %p not shared: %s", rank, buff, listening.status().message().c_str());
    }
  }
  CFX_TRY(bootstrap.allGather(exports.data(), sizeof(Export)));
  for (size_t p = 0; p < n; ++p) {
    w->sizes_[p] = exports[p].bytes;
    if (!exports[p].ok) {
      CFX_INFO(log::Sys::Init,
               "rank %d: window %p registered without zero-copy: rank %zu's buffer is not from "
               "ncclMemAlloc (or cannot be shared)",
               rank, buff, p);
      w->bases_[me] = mine.address;
      return w;
    }
  }

  // Every rank connects to every peer process first, then serves its own, then reads: connections land in the
  // listeners' backlogs, so no rank waits for one that is itself waiting.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status local;
  std::vector<std::unique_ptr<FdClient>> clients(n);
  int servedClients = 0;
  for (size_t p = 0; p < n; ++p) {
    if (p == me || exports[p].pid == mine.pid) continue;
    ++servedClients;
    if (!local.ok()) continue;
    Result<std::unique_ptr<FdClient>> c = FdClient::connect(exports[p].server);
    if (c.ok()) {
      clients[p] = std::move(c.value());
    } else {
      local = Status::error(c.status().code(), strprintf("rank %zu: %s", p, c.status().message().c_str()));
    }
  }
  // Served even after a failed connect, so the peers waiting on this rank are not left to time out.
  const Status served = server->serve(servedClients, block->fd, block->id, deadline, alive);
  if (local.ok()) local = served;
  w->mapped_.resize(n);
  for (size_t p = 0; p < n && local.ok(); ++p) {
    if (p == me) {
      w->bases_[p] = mine.address;
    } else if (exports[p].pid == mine.pid) {
      w->bases_[p] = exports[p].address;
    } else {
      Result<int> fd = clients[p]->receive(exports[p].blockId, deadline, alive);
      if (!fd.ok()) {
        local = Status::error(fd.status().code(), strprintf("rank %zu: %s", p, fd.status().message().c_str()));
        break;
      }
      cuda::ScopedContext scope(ctx);
      Result<std::shared_ptr<PeerBlock>> m =
          mapPeerBlockOnce(exports[p].pid, exports[p].token, exports[p].blockId, fd.value(), exports[p].blockBytes);
      ::close(fd.value());
      if (!m.ok()) {
        local = Status::error(m.status().code(), strprintf("rank %zu: %s", p, m.status().message().c_str()));
        break;
      }
      w->mapped_[p] = std::move(m.value());
      w->bases_[p] = w->mapped_[p]->base() + exports[p].blockOffset;
    }
  }
  clients.clear();
  server.reset();
  if (!local.ok()) {
    CFX_WARN("rank %d: cannot map the window of %s; the window is registered without zero-copy", rank,
             local.message().c_str());
  }
  std::vector<int32_t> all(n);
  all[me] = local.ok() ? 1 : 0;
  CFX_TRY(bootstrap.allGather(all.data(), sizeof(int32_t)));
  for (size_t p = 0; p < n; ++p) {
    if (!all[p]) {
      CFX_INFO(log::Sys::Init, "rank %d: window %p registered without zero-copy: rank %zu could not map it", rank, buff,
               p);
      w->mapped_.clear();
      w->bases_.assign(n, 0);
      w->bases_[me] = mine.address;
      return w;
    }
  }
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
