// SPDX-License-Identifier: Apache-2.0
// Shared-memory FIFO ends: the SPSC protocol described in shm_fifo.h (transport layer, shm transport).
#include "transport/shm/shm_fifo.h"

#include "common/log.h"
#include "common/tsan.h"
#include "transport/shm/shm_export.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace cfx::transport::shm {

namespace {

// What a shm sender says in DirectRegion::detail: the exported block holding the bytes (shm_export.h) and its
// process's nonce; block id 0 when the bytes are in no exported block. Laid out as fd, id, base, bytes, nonce.
struct BlockDetail {
  ExportedBlock block;
  uint64_t nonce = 0;
};
constexpr size_t kDetailBytes = sizeof(int32_t) + 4 * sizeof(uint64_t);
static_assert(kDetailBytes <= sizeof(DirectRegion::detail));

void putBlockDetail(const ExportedBlock& block, uint64_t nonce, DirectRegion* region) {
  const auto fd = static_cast<int32_t>(block.fd);
  const auto base = static_cast<uint64_t>(block.base);
  unsigned char* d = region->detail;
  std::memcpy(d, &fd, sizeof(fd));
  std::memcpy(d + 4, &block.id, 8);
  std::memcpy(d + 12, &base, 8);
  std::memcpy(d + 20, &block.bytes, 8);
  std::memcpy(d + 28, &nonce, 8);
}

BlockDetail blockDetail(const DirectRegion& region) {
  const unsigned char* d = region.detail;
  int32_t fd = 0;
  uint64_t base = 0;
  BlockDetail out;
  std::memcpy(&fd, d, sizeof(fd));
  std::memcpy(&out.block.id, d + 4, 8);
  std::memcpy(&base, d + 12, 8);
  std::memcpy(&out.block.bytes, d + 20, 8);
  std::memcpy(&out.nonce, d + 28, 8);
  out.block.fd = fd;
  out.block.base = static_cast<uintptr_t>(base);
  return out;
}

}  // namespace

ShmSendEnd::ShmSendEnd(FifoView fifo, const FifoGeometry& geometry, std::shared_ptr<const ShmPeer> receiver,
                       size_t directThreshold, bool anyBuffer)
    : fifo_(fifo),
      slotBytes_(geometry.slotBytes),
      nSlots_(geometry.nSlots),
      receiver_(std::move(receiver)),
      directThreshold_(directThreshold),
      anyBuffer_(anyBuffer) {
  // Relaxed: the FIFO is fresh (both counters 0) and the bootstrap exchange that published it ordered its
  // initialisation before this constructor runs.
  head_ = fifo_.control->head.load(std::memory_order_relaxed);
  cachedTail_ = fifo_.control->tail.load(std::memory_order_relaxed);
}

void* ShmSendEnd::tryAcquire() {
  const uint64_t slots = static_cast<uint64_t>(nSlots_);
  if (head_ - cachedTail_ >= slots) {
    // Acquire pairs with the receiver's release store of tail in ShmRecvEnd::release(): its reads of the slot we
    // are about to overwrite happened before.
    cachedTail_ = fifo_.control->tail.load(std::memory_order_acquire);
    if (head_ - cachedTail_ >= slots) return nullptr;
  }
  acquired_ = true;
  return fifo_.slots + (head_ % slots) * slotBytes_;
}

void ShmSendEnd::post(size_t bytes, uint64_t tag) {
  assert(acquired_ && "post() without a successful tryAcquire()");
  assert(bytes <= slotBytes_);
  acquired_ = false;
  SlotDescriptor& desc = fifo_.descriptors[head_ % static_cast<uint64_t>(nSlots_)];
  desc.bytes = bytes;
  desc.tag = tag;
  ++head_;
  // Release pairs with the receiver's acquire load of head in ShmRecvEnd::tryPeek(): the slot data and the
  // descriptor written above are visible once it sees the new head.
  fifo_.control->head.store(head_, std::memory_order_release);
  // Ordered after the store by ring()'s own release increment and seq_cst fence (common/doorbell.cc).
  receiver_->header().doorbell.ring();
}

bool ShmSendEnd::drained() {
  // Acquire pairs with the receiver's release store of tail: its reads of every released slot, and of the
  // memory a released DirectRegion names, happened before.
  cachedTail_ = fifo_.control->tail.load(std::memory_order_acquire);
  return cachedTail_ == head_;
}

bool ShmSendEnd::describeDirect(const void* p, size_t bytes, DirectRegion* region) {
  const std::optional<ExportedBlock> block = findExported(p, bytes);
  if (!block && !anyBuffer_) return false;
  SendEnd::describeDirect(p, bytes, region);
  if (block) putBlockDetail(*block, processNonce(), region);
  return true;
}

ShmRecvEnd::ShmRecvEnd(FifoView fifo, const FifoGeometry& geometry, std::shared_ptr<ShmSegment> own,
                       std::shared_ptr<const ShmPeer> sender, bool direct, bool sameProcess)
    : fifo_(fifo),
      slotBytes_(geometry.slotBytes),
      nSlots_(geometry.nSlots),
      own_(std::move(own)),
      sender_(std::move(sender)),
      direct_(direct),
      sameProcess_(sameProcess) {
  // Relaxed: as in ShmSendEnd's constructor, the FIFO is fresh and was published through the bootstrap.
  tail_ = fifo_.control->tail.load(std::memory_order_relaxed);
  cachedHead_ = fifo_.control->head.load(std::memory_order_relaxed);
}

const void* ShmRecvEnd::tryPeek(size_t* bytes, uint64_t* tag) {
  if (tail_ == cachedHead_) {
    // Acquire pairs with the sender's release store of head in ShmSendEnd::post(): the descriptor and slot data
    // of every slot below the loaded head are visible.
    cachedHead_ = fifo_.control->head.load(std::memory_order_acquire);
    if (tail_ == cachedHead_) return nullptr;
  }
  const uint64_t index = tail_ % static_cast<uint64_t>(nSlots_);
  const SlotDescriptor& desc = fifo_.descriptors[index];
  uint64_t n = desc.bytes;
  if (n > slotBytes_) {
    // Only a buggy or corrupted sender gets here. Never hand out more than the slot; check() reports it.
    if (badBytes_ == 0) badBytes_ = n;
    n = slotBytes_;
  }
  *bytes = static_cast<size_t>(n);
  *tag = desc.tag;
  peeked_ = true;
  return fifo_.slots + index * slotBytes_;
}

void ShmRecvEnd::release() {
  assert(peeked_ && "release() without a successful tryPeek()");
  peeked_ = false;
  ++tail_;
  // Release pairs with the sender's acquire load of tail in ShmSendEnd::tryAcquire(): our reads of the slot
  // complete before the sender may reuse it.
  fifo_.control->tail.store(tail_, std::memory_order_release);
  // Ordered after the store by ring()'s own release increment and seq_cst fence (common/doorbell.cc).
  sender_->header().doorbell.ring();
}

Status ShmRecvEnd::check() {
  if (badBytes_ != 0) {
    return Status::error(Errc::RemoteError,
                         strprintf("peer rank %d (host %s, pid %d) published a %llu-byte slot into a %zu-byte shared-"
                                   "memory FIFO: its memory is corrupt or it runs a different Conflux build",
                                   sender_->rank(), sender_->hostName().c_str(), static_cast<int>(sender_->pid()),
                                   static_cast<unsigned long long>(badBytes_), slotBytes_));
  }
  return sender_->check();
}

std::string ShmRecvEnd::who() const {
  return strprintf("peer rank %d (host %s, pid %d)", sender_->rank(), sender_->hostName().c_str(),
                   static_cast<int>(sender_->pid()));
}

Status ShmRecvEnd::checkRegion(const DirectRegion& region, size_t offset, size_t bytes) const {
  if (!direct_) {
    return Status::error(Errc::RemoteError,
                         strprintf("%s posted a direct (single-copy) slot on a connection where direct transfers are "
                                   "off: it runs a different Conflux build or its memory is corrupt",
                                   who().c_str()));
  }
  const BlockDetail d = blockDetail(region);
  const bool inBlock = d.block.id == 0 ||
                       (region.address >= d.block.base && region.address - d.block.base <= d.block.bytes &&
                        region.bytes <= d.block.bytes - (region.address - d.block.base) && d.block.fd >= 0);
  if (region.magic != kDirectMagic || region.pid != sender_->pid() || offset > region.bytes ||
      bytes > region.bytes - offset || region.address + region.bytes < region.address || !inBlock) {
    return Status::error(Errc::RemoteError,
                         strprintf("%s posted a corrupt direct region (pid %d, %llu bytes, reading %zu at %zu)",
                                   who().c_str(), static_cast<int>(region.pid),
                                   static_cast<unsigned long long>(region.bytes), bytes, offset));
  }
  return Status();
}

Result<const char*> ShmRecvEnd::mapDirect(const DirectRegion& region) {
  CFX_TRY(checkRegion(region, 0, 0));
  if (sameProcess_) return reinterpret_cast<const char*>(static_cast<uintptr_t>(region.address));
  const BlockDetail d = blockDetail(region);
  if (d.block.id == 0) return static_cast<const char*>(nullptr);
  auto base = mapPeerBlock(sender_->pid(), d.nonce, d.block);
  if (!base.ok()) {
    // process_vm_readv may still work (the probe at init proved it did); say once why this pair is slower.
    if (!mapFailureLogged_) {
      mapFailureLogged_ = true;
      CFX_INFO(log::Sys::Shm, "shm: cannot map a buffer of %s (%s); reading it with process_vm_readv instead",
               who().c_str(), base.status().message().c_str());
    }
    return static_cast<const char*>(nullptr);
  }
  return *base + (region.address - d.block.base);
}

void ShmRecvEnd::unmapDirect(const DirectRegion& region) {
  if (sameProcess_) return;
  const BlockDetail d = blockDetail(region);
  if (d.block.id == 0) return;
  unpinPeerBlock(sender_->pid(), d.nonce, d.block.id);
}

Status ShmRecvEnd::readDirect(const DirectRegion& region, size_t offset, void* dst, size_t bytes) {
  CFX_TRY(checkRegion(region, offset, bytes));
  if (bytes == 0) return Status();
  const uint64_t from = region.address + offset;
  if (sameProcess_) {
    const void* base = reinterpret_cast<const void*>(static_cast<uintptr_t>(region.address));
    tsanAcquire(base);  // pairs with the sender's tsanRelease before it posted the region
    std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(from)), bytes);
    tsanRelease(base);  // pairs with the sender's tsanAcquire once the slot is drained
    return Status();
  }
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(dst) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(from + done)), bytes - done};
    const ssize_t n = process_vm_readv(sender_->pid(), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      return Status::error(Errc::RemoteError,
                           strprintf("cannot read %zu bytes of %s's memory with process_vm_readv: %s%s", bytes - done,
                                     who().c_str(), std::strerror(err),
                                     err == ESRCH ? " (the process exited)" : ""));
    }
    done += static_cast<size_t>(n);
  }
  return Status();
}

}  // namespace cfx::transport::shm
