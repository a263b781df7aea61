// SPDX-License-Identifier: Apache-2.0
// Mapping every peer's exported block (transport layer, cuda_ipc); see block_exchange.h.
#include "transport/cuda_ipc/block_exchange.h"

#include <unistd.h>

#include <cstring>

#include "common/log.h"

namespace cfx::transport::cuda_ipc {

BlockOffer offerBlock(const ShareableBlock* block, std::unique_ptr<FdServer>* server) {
  BlockOffer offer;
  std::memset(&offer, 0, sizeof(offer));
  offer.pid = static_cast<int32_t>(::getpid());
  offer.token = processToken();
  if (block == nullptr) return offer;
  Result<std::unique_ptr<FdServer>> listening = FdServer::listen();
  if (!listening.ok()) {
    CFX_INFO(log::Sys::Init, "device memory not shared: %s", listening.status().message().c_str());
    return offer;
  }
  *server = std::move(listening.value());
  offer.ok = 1;
  offer.address = block->base;
  offer.blockBytes = block->bytes;
  offer.blockId = block->id;
  std::strncpy(offer.server, (*server)->name().c_str(), sizeof(offer.server) - 1);
  return offer;
}

Status mapPeerBlocks(int rank, const std::vector<BlockOffer>& offers, FdServer& server, const ShareableBlock& mine,
                     cuda::CUcontext ctx, std::chrono::steady_clock::time_point deadline,
                     const std::function<Status()>& alive, std::vector<std::shared_ptr<PeerBlock>>* mapped,
                     std::vector<cuda::CUdeviceptr>* bases) {
  const size_t n = offers.size();
  const size_t me = static_cast<size_t>(rank);
  mapped->assign(n, nullptr);
  bases->assign(n, 0);
  Status local;
  std::vector<std::unique_ptr<FdClient>> clients(n);
  int servedClients = 0;
  for (size_t p = 0; p < n; ++p) {
    if (p == me || sameProcess(offers[p], offers[me])) continue;
    ++servedClients;
    if (!local.ok()) continue;
    Result<std::unique_ptr<FdClient>> c = FdClient::connect(offers[p].server);
    if (c.ok()) {
      clients[p] = std::move(c.value());
    } else {
      local = Status::error(c.status().code(), strprintf("rank %zu: %s", p, c.status().message().c_str()));
    }
  }
  // Served even after a failed connect, so the peers waiting on this rank are not left to time out.
  const Status served = server.serve(servedClients, mine.fd, mine.id, deadline, alive);
  if (local.ok()) local = served;
  for (size_t p = 0; p < n && local.ok(); ++p) {
    if (p == me || sameProcess(offers[p], offers[me])) {
      (*bases)[p] = offers[p].address;
      continue;
    }
    Result<int> fd = clients[p]->receive(offers[p].blockId, deadline, alive);
    if (!fd.ok()) {
      local = Status::error(fd.status().code(), strprintf("rank %zu: %s", p, fd.status().message().c_str()));
      break;
    }
    cuda::ScopedContext scope(ctx);
    Result<std::shared_ptr<PeerBlock>> m =
        mapPeerBlockOnce(offers[p].pid, offers[p].token, offers[p].blockId, fd.value(), offers[p].blockBytes);
    ::close(fd.value());
    if (!m.ok()) {
      local = Status::error(m.status().code(), strprintf("rank %zu: %s", p, m.status().message().c_str()));
      break;
    }
    (*mapped)[p] = std::move(m.value());
    (*bases)[p] = (*mapped)[p]->base();
  }
  if (!local.ok()) mapped->assign(n, nullptr);
  return local;
}

Result<int> firstRankNotOk(Bootstrap& bootstrap, int rank, int nRanks, bool ok) {
  std::vector<int32_t> all(static_cast<size_t>(nRanks));
  all[static_cast<size_t>(rank)] = ok ? 1 : 0;
  CFX_TRY(bootstrap.allGather(all.data(), sizeof(int32_t)));
  for (int p = 0; p < nRanks; ++p) {
    if (!all[static_cast<size_t>(p)]) return p;
  }
  return -1;
}

}  // namespace cfx::transport::cuda_ipc
