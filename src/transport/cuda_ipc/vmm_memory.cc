// SPDX-License-Identifier: Apache-2.0
// Device memory that same-host peers map in place (transport layer, cuda_ipc); see vmm_memory.h.
#include "transport/cuda_ipc/vmm_memory.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "common/log.h"

namespace cfx::transport::cuda_ipc {
namespace {

std::mutex gBlocksMutex;
uint64_t gNextId = 1;
// By base address. Leaked on purpose: ncclMemFree may run during static destruction.
std::map<cuda::CUdeviceptr, ShareableBlock>& blocks() {
  static auto* m = new std::map<cuda::CUdeviceptr, ShareableBlock>();
  return *m;
}

Result<int> currentDevice(const cuda::Driver& d) {
  cuda::CUdevice dev = 0;
  CFX_TRY(cuda::check(d.ctxGetDevice(&dev), "cuCtxGetDevice"));
  return static_cast<int>(dev);
}

cuda::MemAccessDesc readWrite(int device) {
  cuda::MemAccessDesc access;
  access.location.type = cuda::kMemLocationTypeDevice;
  access.location.id = device;
  access.flags = cuda::kMemAccessReadWrite;
  return access;
}

// Reserves `bytes` of address space, maps `handle` there readable and writable by `device`: the address, or an
// error with everything undone (the handle stays the caller's).
Result<cuda::CUdeviceptr> mapHandle(const cuda::Driver& d, cuda::CUmemGenericAllocationHandle handle, size_t bytes,
                                    int device, const char* what) {
  cuda::CUdeviceptr va = 0;
  CFX_TRY(cuda::check(d.memAddressReserve(&va, bytes, 0, 0, 0), strprintf("cuMemAddressReserve (%s)", what).c_str()));
  Status st = cuda::check(d.memMap(va, bytes, 0, handle, 0), strprintf("cuMemMap (%s)", what).c_str());
  if (st.ok()) {
    const cuda::MemAccessDesc access = readWrite(device);
    st = cuda::check(d.memSetAccess(va, bytes, &access, 1), strprintf("cuMemSetAccess (%s)", what).c_str());
    if (!st.ok()) d.memUnmap(va, bytes);
  }
  if (!st.ok()) {
    d.memAddressFree(va, bytes);
    return st;
  }
  return va;
}

void unmapAndFree(const cuda::Driver& d, cuda::CUdeviceptr va, size_t bytes) {
  d.memUnmap(va, bytes);
  d.memAddressFree(va, bytes);
}

// Waits until `fd` is ready for `events`; a timeout or poll failure as a Status naming `what`, or `alive`'s error.
Status waitFor(int fd, short events, std::chrono::steady_clock::time_point deadline, const std::string& what,
               const std::function<Status()>& alive) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return Status::error(Errc::Timeout, "timed out " + what);
    if (alive) {
      if (Status st = alive(); !st.ok()) return Status::error(st.code(), what + ": " + st.message());
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (rc > 0) return Status();
    if (rc < 0 && errno != EINTR) return Status::error(Errc::SystemError, what + ": poll: " + strerror(errno));
  }
}

sockaddr_un abstractAddress(const std::string& name, socklen_t* len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);  // sun_path[0] == 0: the abstract namespace, no file to clean up
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

// A message of one 8-byte word with room for one descriptor beside it (SCM_RIGHTS), for sendmsg and recvmsg.
struct FdMessage {
  uint64_t word = 0;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&word, sizeof(word)};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

}  // namespace

Result<void*> allocShareable(size_t bytes) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr || d->memCreate == nullptr) {
    return Status::error(Errc::InvalidUsage, "this GPU runtime has no virtual memory management");
  }
  CFX_TRY_ASSIGN(const int device, currentDevice(*d));
  int vmm = 0;
  int posixFd = 0;
  d->deviceGetAttribute(&vmm, cuda::kDeviceAttrVirtualMemoryManagement, device);
  d->deviceGetAttribute(&posixFd, cuda::kDeviceAttrHandleTypePosixFd, device);
  if (!vmm || !posixFd) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("device %d has no virtual memory management with descriptor export", device));
  }
  cuda::MemAllocationProp prop;
  prop.type = cuda::kMemAllocationTypePinned;
  prop.requestedHandleTypes = cuda::kMemHandleTypePosixFd;
  prop.location.type = cuda::kMemLocationTypeDevice;
  prop.location.id = device;
  size_t granularity = 0;
  CFX_TRY(cuda::check(d->memGetAllocationGranularity(&granularity, &prop, cuda::kMemAllocGranularityRecommended),
                      "cuMemGetAllocationGranularity"));
  if (granularity == 0) granularity = 1;
  const size_t mapped = (bytes + granularity - 1) / granularity * granularity;
  cuda::CUmemGenericAllocationHandle handle = 0;
  CFX_TRY(cuda::check(d->memCreate(&handle, mapped, &prop, 0), strprintf("cuMemCreate(%zu bytes)", mapped).c_str()));
  Result<cuda::CUdeviceptr> va = mapHandle(*d, handle, mapped, device, "ncclMemAlloc");
  int fd = -1;
  Status st = va.status();
  if (st.ok()) {
    st = cuda::check(d->memExportToShareableHandle(&fd, handle, cuda::kMemHandleTypePosixFd, 0),
                     "cuMemExportToShareableHandle");
    if (!st.ok()) unmapAndFree(*d, va.value(), mapped);
  }
  d->memRelease(handle);  // the mapping and the descriptor hold the memory from here on
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(gBlocksMutex);
  blocks()[va.value()] = ShareableBlock{gNextId++, va.value(), mapped, fd};
  return reinterpret_cast<void*>(va.value());
}

Result<bool> freeShareable(void* p) {
  ShareableBlock b;
  {
    std::lock_guard<std::mutex> lock(gBlocksMutex);
    auto it = blocks().find(reinterpret_cast<cuda::CUdeviceptr>(p));
    if (it == blocks().end()) return false;
    b = it->second;
    blocks().erase(it);
  }
  ::close(b.fd);
  const cuda::Driver* d = cuda::driver();
  CFX_TRY(cuda::check(d->memUnmap(b.base, b.bytes), "ncclMemFree: cuMemUnmap"));
  CFX_TRY(cuda::check(d->memAddressFree(b.base, b.bytes), "ncclMemFree: cuMemAddressFree"));
  return true;
}

std::optional<ShareableBlock> findShareable(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<cuda::CUdeviceptr>(p);
  std::lock_guard<std::mutex> lock(gBlocksMutex);
  auto it = blocks().upper_bound(a);
  if (it == blocks().begin()) return std::nullopt;
  --it;
  if (a < it->second.base || a + bytes > it->second.base + it->second.bytes) return std::nullopt;
  return it->second;
}

Result<std::unique_ptr<PeerBlock>> PeerBlock::map(int fd, size_t bytes) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr || d->memImportFromShareableHandle == nullptr) {
    return Status::error(Errc::InvalidUsage, "this GPU runtime has no virtual memory management");
  }
  CFX_TRY_ASSIGN(const int device, currentDevice(*d));
  cuda::CUmemGenericAllocationHandle handle = 0;
  CFX_TRY(cuda::check(d->memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                      cuda::kMemHandleTypePosixFd),
                      "cuMemImportFromShareableHandle"));
  Result<cuda::CUdeviceptr> va = mapHandle(*d, handle, bytes, device, "a peer's ncclMemAlloc block");
  d->memRelease(handle);
  CFX_TRY(va.status());
  std::unique_ptr<PeerBlock> b(new PeerBlock());
  b->base_ = va.value();
  b->bytes_ = bytes;
  return b;
}

PeerBlock::~PeerBlock() {
  if (const cuda::Driver* d = cuda::driver(); d != nullptr && base_ != 0) unmapAndFree(*d, base_, bytes_);
}

uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return token;
}

Result<std::shared_ptr<PeerBlock>> mapPeerBlockOnce(int pid, uint64_t token, uint64_t blockId, int fd, size_t bytes) {
  const cuda::Driver* d = cuda::driver();
  if (d == nullptr) return Status::error(Errc::InvalidUsage, "no GPU runtime");
  CFX_TRY_ASSIGN(const int device, currentDevice(*d));
  struct Key {
    int pid;
    uint64_t token;
    uint64_t blockId;
    int device;
    auto operator<=>(const Key&) const = default;
  };
  // Leaked on purpose, as blocks() is; the weak entries of unmapped blocks are dropped on the next miss.
  static auto* cache = new std::map<Key, std::weak_ptr<PeerBlock>>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const Key key{pid, token, blockId, device};
  if (auto it = cache->find(key); it != cache->end()) {
    if (std::shared_ptr<PeerBlock> live = it->second.lock()) return live;
  }
  std::erase_if(*cache, [](const auto& entry) { return entry.second.expired(); });
  CFX_TRY_ASSIGN(std::unique_ptr<PeerBlock> mapped, PeerBlock::map(fd, bytes));
  std::shared_ptr<PeerBlock> shared = std::move(mapped);
  (*cache)[key] = shared;
  return shared;
}

Result<std::unique_ptr<FdServer>> FdServer::listen() {
  std::unique_ptr<FdServer> s(new FdServer());
  std::random_device rd;
  s->name_ = strprintf("cfx-vmm-%d-%08x%08x", static_cast<int>(::getpid()), rd(), rd());
  s->sock_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->sock_ < 0) return Status::error(Errc::SystemError, strprintf("socket(AF_UNIX): %s", strerror(errno)));
  socklen_t len = 0;
  const sockaddr_un addr = abstractAddress(s->name_, &len);
  if (::bind(s->sock_, reinterpret_cast<const sockaddr*>(&addr), len) != 0 || ::listen(s->sock_, 1024) != 0) {
    return Status::error(Errc::SystemError, strprintf("bind/listen(@%s): %s", s->name_.c_str(), strerror(errno)));
  }
  return s;
}

FdServer::~FdServer() {
  if (sock_ >= 0) ::close(sock_);
}

Status FdServer::serve(int clients, int fd, uint64_t tag, std::chrono::steady_clock::time_point deadline,
                       const std::function<Status()>& alive) {
  for (int served = 0; served < clients;) {
    CFX_TRY(waitFor(sock_, POLLIN, deadline,
                    strprintf("waiting for %d peer(s) to fetch this rank's ncclMemAlloc block", clients - served),
                    alive));
    const int c = ::accept4(sock_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      return Status::error(Errc::SystemError, strprintf("accept(@%s): %s", name_.c_str(), strerror(errno)));
    }
    // Only a process of this user may take the memory, as with /proc/<pid>/fd and CUDA's own IPC.
    ucred cred{};
    socklen_t credLen = sizeof(cred);
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &credLen) != 0 || cred.uid != ::geteuid()) {
      CFX_WARN("a process of uid %u asked for a device memory descriptor (@%s): refused", cred.uid, name_.c_str());
      ::close(c);
      continue;
    }
    FdMessage m;
    m.word = tag;
    cmsghdr* cm = CMSG_FIRSTHDR(&m.msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    const ssize_t sent = ::sendmsg(c, &m.msg, MSG_NOSIGNAL);
    const int err = errno;
    ::close(c);
    if (sent != static_cast<ssize_t>(sizeof(tag))) {
      return Status::error(Errc::SystemError, strprintf("sendmsg(SCM_RIGHTS) to a peer: %s", strerror(err)));
    }
    ++served;
  }
  return Status();
}

Result<std::unique_ptr<FdClient>> FdClient::connect(const std::string& name) {
  std::unique_ptr<FdClient> c(new FdClient());
  c->sock_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->sock_ < 0) return Status::error(Errc::SystemError, strprintf("socket(AF_UNIX): %s", strerror(errno)));
  socklen_t len = 0;
  const sockaddr_un addr = abstractAddress(name, &len);
  // A Unix socket's connect completes into the listener's backlog without waiting for accept.
  if (::connect(c->sock_, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return Status::error(Errc::SystemError, strprintf("connect(@%s): %s", name.c_str(), strerror(errno)));
  }
  return c;
}

FdClient::~FdClient() {
  if (sock_ >= 0) ::close(sock_);
}

Result<int> FdClient::receive(uint64_t tag, std::chrono::steady_clock::time_point deadline,
                              const std::function<Status()>& alive) {
  CFX_TRY(waitFor(sock_, POLLIN, deadline, "waiting for a peer's ncclMemAlloc block descriptor", alive));
  FdMessage m;
  const ssize_t n = ::recvmsg(sock_, &m.msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  const uint64_t got = m.word;
  int fd = -1;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&m.msg); cm != nullptr; cm = CMSG_NXTHDR(&m.msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  }
  if (n != static_cast<ssize_t>(sizeof(got)) || fd < 0 || got != tag) {
    if (fd >= 0) ::close(fd);
    return Status::error(Errc::SystemError,
                         strprintf("a peer's block descriptor: got %zd bytes, tag %llx (expected %llx)%s", n,
                                   static_cast<unsigned long long>(got), static_cast<unsigned long long>(tag),
                                   fd < 0 ? ", no descriptor" : ""));
  }
  return fd;
}

}  // namespace cfx::transport::cuda_ipc
