// SPDX-License-Identifier: Apache-2.0
// Device-side barrier words in shared host memory (transport layer, cuda_ipc); see flag_board.h.
#include "transport/cuda_ipc/flag_board.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/cuda_ipc/block_exchange.h"
#include "transport/cuda_ipc/vmm_memory.h"

namespace cfx::transport::cuda_ipc {

namespace {

// What each rank says in the exchange: rank 0 where its segment is; every rank which process it is.
struct BoardOffer {
  uint64_t token;  // processToken()
  int32_t pid;
  int32_t fd;      // rank 0: the segment's descriptor in its process (for ranks of that process)
  int32_t ok;      // rank 0: the segment exists and is offered
  char server[56];
};

constexpr uint64_t kBoardTag = 0xb0a4d0f1a65ull;  // the payload rank 0's server sends with the descriptor

// Maps `fd` and registers the mapping for `ctx`'s device; on failure nothing is left mapped or registered.
Status mapAndRegister(int fd, size_t bytes, cuda::CUcontext ctx, void** host, cuda::CUdeviceptr* dev) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return Status::error(Errc::SystemError, strprintf("mmap of the flag board: %s", strerror(errno)));
  }
  const cuda::Driver* d = cuda::driver();
  cuda::ScopedContext scope(ctx);
  Status st = cuda::check(d->memHostRegister(p, bytes, cuda::kHostRegisterPortable | cuda::kHostRegisterDeviceMap),
                          "cuMemHostRegister (flag board)");
  if (st.ok()) {
    st = cuda::check(d->memHostGetDevicePointer(dev, p, 0), "cuMemHostGetDevicePointer (flag board)");
    if (!st.ok()) d->memHostUnregister(p);
  }
  if (!st.ok()) {
    ::munmap(p, bytes);
    return st;
  }
  *host = p;
  return Status();
}

}  // namespace

Result<std::unique_ptr<FlagBoard>> FlagBoard::create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                     int rank, cuda::CUcontext ctx, std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(peers.size());
  std::unique_ptr<FlagBoard> b(new FlagBoard());
  b->rank_ = rank;
  b->n_ = n;
  b->ctx_ = ctx;
  const size_t words = static_cast<size_t>(n) * static_cast<size_t>(n + 2) * sizeof(uint32_t);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  b->bytes_ = (words + page - 1) / page * page;
  const cuda::Driver* d = cuda::driver();
  const bool usable =
      d != nullptr && d->memHostRegister != nullptr && d->memHostUnregister != nullptr && ctx != nullptr;

  BoardOffer mine;
  std::memset(&mine, 0, sizeof(mine));
  mine.pid = static_cast<int32_t>(::getpid());
  mine.token = processToken();
  mine.fd = -1;
  mine.ok = usable ? 1 : 0;  // every rank says whether it can take part, before any descriptor moves
  int segment = -1;          // rank 0's memfd, open until every rank has mapped it
  std::unique_ptr<FdServer> server;
  if (rank == 0 && usable) {
    segment = ::memfd_create("cfx-flag-board", MFD_CLOEXEC);
    Result<std::unique_ptr<FdServer>> listening = FdServer::listen();
    if (segment >= 0 && ::ftruncate(segment, static_cast<off_t>(b->bytes_)) == 0 && listening.ok()) {
      server = std::move(listening.value());
      mine.fd = segment;
      std::strncpy(mine.server, server->name().c_str(), sizeof(mine.server) - 1);
    } else {
      CFX_INFO(log::Sys::Init, "rank 0: no flag board segment: %s",
               listening.ok() ? strerror(errno) : listening.status().message().c_str());
      mine.ok = 0;
    }
  }
  std::vector<BoardOffer> offers(static_cast<size_t>(n));
  offers[static_cast<size_t>(rank)] = mine;
  Status exchanged = bootstrap.allGather(offers.data(), sizeof(BoardOffer));
  for (int p = 0; p < n && exchanged.ok(); ++p) {
    if (offers[static_cast<size_t>(p)].ok != 0) continue;
    if (segment >= 0) ::close(segment);
    CFX_INFO(log::Sys::Init, "rank %d: no device-side barriers: rank %d cannot register host memory for its device",
             rank, p);
    return std::unique_ptr<FlagBoard>();
  }
  if (!exchanged.ok()) {
    if (segment >= 0) ::close(segment);
    return exchanged;
  }
  const BoardOffer& root = offers[0];
  auto sameAsRoot = [&root](const BoardOffer& o) { return o.pid == root.pid && o.token == root.token; };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::function<Status()> alive = [] { return Status(); };
  Status local;
  int fd = -1;
  if (rank == 0) {
    int clients = 0;
    for (const BoardOffer& o : offers) clients += sameAsRoot(o) ? 0 : 1;
    local = server->serve(clients, segment, kBoardTag, deadline, alive);
    fd = segment;
  } else if (sameAsRoot(mine)) {
    fd = ::dup(root.fd);  // rank 0 keeps it open until every rank agreed below
    if (fd < 0) local = Status::error(Errc::SystemError, strprintf("dup of the flag board: %s", strerror(errno)));
  } else {
    Result<std::unique_ptr<FdClient>> client = FdClient::connect(root.server);
    Result<int> received =
        client.ok() ? client.value()->receive(kBoardTag, deadline, alive) : Result<int>(client.status());
    if (received.ok()) {
      fd = received.value();
    } else {
      local = received.status();
    }
  }
  if (local.ok()) local = mapAndRegister(fd, b->bytes_, ctx, &b->host_, &b->dev_);
  if (fd >= 0 && fd != segment) ::close(fd);
  if (local.ok()) {
    b->owner_ = true;
    b->registered_ = true;
  } else {
    CFX_INFO(log::Sys::Init, "rank %d: no device-side barriers: %s", rank, local.message().c_str());
  }
  Result<int> notOk = firstRankNotOk(bootstrap, rank, n, local.ok());
  if (segment >= 0) ::close(segment);
  CFX_TRY(notOk.status());
  if (notOk.value() >= 0) {
    if (local.ok() && notOk.value() != rank) {
      CFX_INFO(log::Sys::Init, "rank %d: no device-side barriers: rank %d could not map the flag board", rank,
               notOk.value());
    }
    return std::unique_ptr<FlagBoard>();  // the destructor unregisters and unmaps: no stream ever used it
  }
  CFX_INFO(log::Sys::Init, "rank %d: device-side barriers on: a flag board of %zu B in host memory every rank maps",
           rank, b->bytes_);
  return b;
}

FlagBoard::~FlagBoard() {
  if (host_ == nullptr) return;
  // A stream still behind its last barrier may poll the row: then the pages stay (see flag_board.h).
  if (passed() != issued()) return;
  if (registered_) {
    cuda::ScopedContext scope(ctx_);
    cuda::driver()->memHostUnregister(host_);
  }
  if (owner_) ::munmap(host_, bytes_);
}

uint32_t FlagBoard::fromPeer(int p) const {
  return std::atomic_ref<uint32_t>(*word(rank_, p)).load(std::memory_order_acquire);
}

uint32_t FlagBoard::arrived() const {
  return std::atomic_ref<uint32_t>(*word(rank_, n_)).load(std::memory_order_acquire);
}

uint32_t FlagBoard::passed() const {
  return std::atomic_ref<uint32_t>(*word(rank_, n_ + 1)).load(std::memory_order_acquire);
}

void FlagBoard::release() {
  const uint32_t to = issued();
  // Release stores: the GPU reads them over PCIe once visible; nothing else of this rank's is published by them.
  for (int p = 0; p < n_; ++p) std::atomic_ref<uint32_t>(*word(rank_, p)).store(to, std::memory_order_release);
}

}  // namespace cfx::transport::cuda_ipc
