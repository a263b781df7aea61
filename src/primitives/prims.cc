// SPDX-License-Identifier: Apache-2.0
// Verbs over FIFO slices (primitives layer).
#include "primitives/prims.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/tsan.h"
#include "primitives/copy.h"
#include "primitives/executor.h"
#include "primitives/ordered_combine.h"
#include "primitives/reduce.h"

namespace cfx::prims {

namespace {

// Reading a DirectRegion: pieces read straight into their destination by one call, and how much one progress()
// call reads before it returns so the executor can move the other Works of this rank.
constexpr size_t kDirectPiece = size_t{1} << 20;
constexpr size_t kDirectBudget = size_t{4} << 20;
// Pieces read into scratch and reduced from there: small enough to still be in cache when reduced.
constexpr size_t kScratchPiece = size_t{256} << 10;

// This thread's scratch buffer of at least `bytes` bytes, 64-byte aligned. Used only within one progress() call.
char* scratch(size_t bytes) {
  struct Buffer {
    char* p = nullptr;
    size_t n = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer b;
  if (b.n < bytes) {
    std::free(b.p);
    b.n = (bytes + 63) / 64 * 64;
    b.p = static_cast<char*>(std::aligned_alloc(64, b.n));
    if (b.p == nullptr) b.n = 0;
  }
  return b.p;
}
}  // namespace

Status Transfer::mismatch(uint64_t inTag, size_t inMessageBytes, size_t inSlotBytes, size_t expectSlot) const {
  // When the tags differ only in their low bits, the sender's size is only what its tag says under this rank's
  // parameters (op_stamp.h).
  const std::string detail =
      strprintf("expecting %zu bytes in slices of %zu B; its %s holds %zu B for a message of %zu B", bytes, expectSlot,
                (inTag & transport::kDirectTagFlag) ? "direct slot" : "slice", inSlotBytes, inMessageBytes);
  return Status::error(Errc::InvalidUsage, describeMismatch(recvPeer, inTag, tag, naming, detail));
}

void Transfer::combineOrdered(char* out, const char* in, size_t n) {
  const size_t elt = dataTypeSize(op->type);
  const size_t at = offset / elt;
  prims::combineOrdered(*op, out, in, local + offset, n / elt, firstElem + at, local - firstElem * elt);
}

void Transfer::applyRows(const char* in, char* out, size_t n) {
  if (localRows != nullptr) {  // Send: gather the rows straight into the slot
    localRows->forSpans(offset, n, [&out](const char* p, size_t len) {
      if (p != nullptr) {
        std::memcpy(out, p, len);
      } else {
        std::memset(out, 0, len);
      }
      out += len;
    });
    return;
  }
  if (dstRows != nullptr) {  // Recv, RecvCopySend: scatter the slot into the rows, forward it as it is
    if (out) std::memcpy(out, in, n);
    dstRows->forSpans(offset, n, [&in](char* p, size_t len) {
      if (p != nullptr) std::memcpy(p, in, len);
      in += len;
    });
    return;
  }
  // RecvFoldRows: the slice's pieces of rows, each folded into its token's sums.
  const size_t rowBytes = fold->rowBytes();
  const size_t elt = dataTypeSize(fold->valueType);
  size_t row = offset / rowBytes;
  size_t at = offset % rowBytes;
  while (n > 0) {
    const size_t len = std::min(n, rowBytes - at);
    fold->foldPiece(row, at / elt, len / elt, in);
    in += len;
    n -= len;
    at = 0;
    ++row;
  }
}

void Transfer::apply(const char* in, char* out, size_t n) {
  if (localRows != nullptr || dstRows != nullptr || fold != nullptr) [[unlikely]] {
    applyRows(in, out, n);
    return;
  }
  const size_t count = op ? n / dataTypeSize(op->type) : n;
  const bool ordered = op != nullptr && op->ordered();
  switch (kind) {
    case Kind::Send: std::memcpy(out, local + offset, n); break;
    case Kind::SendPre: prepareLocal(*op, out, local + offset, count, false); break;
    case Kind::Recv: copyPiece(dst + offset, in, n, streamBytes); break;
    case Kind::RecvReduceSend:
      if (ordered) combineOrdered(out, in, n);
      else reduceLocal(*op, out, in, local + offset, count, false);
      break;
    case Kind::RecvReduceCopy:
      if (ordered) combineOrdered(dst + offset, in, n);
      else reduceLocal(*op, dst + offset, in, local + offset, count, post);
      break;
    case Kind::RecvReduceCopySend:
      if (ordered) combineOrdered(dst + offset, in, n);
      else reduceLocal(*op, dst + offset, in, local + offset, count, post);
      if (out) std::memcpy(out, dst + offset, n);
      break;
    case Kind::RecvCopySend:
      if (dst) copyPiece(dst + offset, in, n, streamBytes);
      if (out) std::memcpy(out, in, n);
      break;
    case Kind::RecvCopyReduceSend:
      // The outgoing combine first: in place (dst == local) the copy would overwrite the local operand.
      if (ordered) combineOrdered(out, in, n);
      else reduceLocal(*op, out, in, local + offset, count, false);
      std::memcpy(dst + offset, in, n);
      break;
    case Kind::RecvCombineSend:
      if (ordered) combineOrdered(out, in, n);
      else combinePartials(*op, out, in, local + offset, count, false);
      break;
    case Kind::RecvFoldRows: break;  // applyRows
    case Kind::RecvCombineCopy:
      if (ordered && partialFirst) {
        error = combineOrderedLowerInMemory(*op, dst + offset, local + offset, in, count);
      } else if (ordered) {
        combineOrdered(dst + offset, in, n);
      } else if (partialFirst) {
        combinePartials(*op, dst + offset, local + offset, in, count, post);
      } else {
        combinePartials(*op, dst + offset, in, local + offset, count, post);
      }
      break;
  }
}

const char* Transfer::outgoingBytes(const char* in) const {
  switch (kind) {
    case Kind::Send:
      return local + offset;
    case Kind::RecvReduceCopySend:
      return dst + offset;  // once apply() reduced into dst
    case Kind::RecvCopySend:
      return in;  // read before the slot is released
    default:
      return nullptr;
  }
}

bool Transfer::ready() {
  if (finished()) return true;
  if (offset >= bytes || (kind == Kind::Send && directOut)) {
    // Only the outgoing DirectRegion is left: a free slot to post it, or its release.
    return directPosted ? send->drained() : send->tryAcquire() != nullptr;
  }
  size_t inBytes = 0;
  uint64_t inTag = 0;
  if (needsRecv() && !directIn && recv->tryPeek(&inBytes, &inTag) == nullptr) return false;
  if (sendsSlices() && send->tryAcquire() == nullptr) return false;
  return true;
}

bool Transfer::checkFirstSlot() {
  if (!needsRecv() || inChecked) return true;
  size_t inBytes = 0;
  uint64_t inTag = 0;
  const void* in = recv->tryPeek(&inBytes, &inTag);
  if (in == nullptr) return false;
  inChecked = true;
  if ((inTag & transport::kDirectTagFlag) == 0) return true;  // slices: progressSlices() checks each one
  if ((inTag & ~transport::kDirectTagFlag) != tag || inBytes != sizeof(transport::DirectRegion)) {
    error = mismatch(inTag, (inTag ^ tag ^ bytes) & kTagSizeMask, inBytes, std::min(sliceBytes, bytes));
    return true;
  }
  std::memcpy(&region, in, sizeof(region));
  if (region.bytes != (srcRows != nullptr ? srcSpan : bytes)) {
    error = mismatch(inTag, static_cast<size_t>(region.bytes), inBytes, std::min(sliceBytes, bytes));
    return true;
  }
  directIn = true;
  auto view = recv->mapDirect(region);
  if (!view.ok()) {
    error = view.status();
    return true;
  }
  mapped = *view;
  if (mapped != nullptr) tsanAcquire(mapped);  // pairs with the sender's tsanRelease before it posted the region
  return true;
}

bool Transfer::progressSlices(bool* moved) {
  while (offset < bytes && error.ok()) {
    const size_t n = std::min(sliceBytes, bytes - offset);
    const char* in = nullptr;
    if (needsRecv()) {
      size_t inBytes = 0;
      uint64_t inTag = 0;
      in = static_cast<const char*>(recv->tryPeek(&inBytes, &inTag));
      if (in == nullptr) return false;
      if (inTag != tag || inBytes != n) {
        error = mismatch(inTag, (inTag ^ tag ^ bytes) & kTagSizeMask, inBytes, n);
        return true;
      }
    }
    char* out = nullptr;
    if (sendsSlices()) {
      out = static_cast<char*>(send->tryAcquire());
      if (out == nullptr) return false;
    }
    if (const char* from = out != nullptr && sendFrom ? outgoingBytes(in) : nullptr) {
      // The outgoing slice is a copy of bytes already in memory: the end reads them from there (prims.h).
      if (kind != Kind::Send) apply(in, nullptr, n);
      send->postFrom(from, n, tag);
    } else {
      apply(in, out, n);
      if (out) send->post(n, tag);
    }
    if (in) recv->release();
    offset += n;
    *moved = true;
  }
  return true;
}

void Transfer::finishDirectIn() {
  if (mapped != nullptr) {
    tsanRelease(mapped);  // pairs with the sender's tsanAcquire once the slot is drained
    recv->unmapDirect(region);
    mapped = nullptr;
  }
  recv->release();  // the sender's verb may finish and its buffer change from now on
}

bool Transfer::progressDirectRows(bool* moved) {
  const size_t rowBytes = srcRows->rowBytes;
  size_t budget = kDirectBudget;
  while (offset < bytes && error.ok()) {
    const size_t i = offset / rowBytes;
    const int64_t row = srcRows->rows != nullptr ? srcRows->rows[i] : static_cast<int64_t>(i);
    const size_t at = row < 0 ? 0 : static_cast<size_t>(row - srcLowest) * srcRows->strideBytes;
    char* to = dstRows != nullptr && fold == nullptr ? dstRows->rowAt(i) : nullptr;
    if (row < 0) {  // a row the sender sends as zeros
      char* zeros = scratch(rowBytes);
      if (zeros != nullptr) std::memset(zeros, 0, rowBytes);
      if (zeros != nullptr) apply(zeros, nullptr, rowBytes);
    } else if (mapped != nullptr) {
      apply(mapped + at, nullptr, rowBytes);  // copied or folded straight out of the sender's memory
    } else if (to != nullptr || (dstRows != nullptr && fold == nullptr)) {
      if (to != nullptr) error = recv->readDirect(region, at, to, rowBytes);
    } else {
      char* buf = scratch(rowBytes);
      if (buf == nullptr) {
        error = Status::error(Errc::SystemError, strprintf("cannot allocate %zu bytes of scratch memory", rowBytes));
      } else {
        error = recv->readDirect(region, at, buf, rowBytes);
        if (error.ok()) apply(buf, nullptr, rowBytes);
      }
    }
    if (!error.ok()) {
      error = Status::error(error.code(), strprintf("receiving direct rows from rank %d: %s", recvPeer,
                                                    error.message().c_str()));
      return true;
    }
    offset += rowBytes;
    *moved = true;
    if (rowBytes >= budget && offset < bytes) return false;  // let the executor move other Works; we come back
    budget -= std::min(budget, rowBytes);
  }
  finishDirectIn();
  return true;
}

bool Transfer::progressDirectIn(bool* moved) {
  if (srcRows != nullptr) return progressDirectRows(moved);
  size_t budget = kDirectBudget;
  while (offset < bytes && error.ok()) {
    size_t n = 0;
    if (mapped != nullptr) {
      // The sender's bytes are readable in place: copy or reduce straight out of them, as out of a slice.
      char* out = nullptr;
      if (sendsSlices()) {
        out = static_cast<char*>(send->tryAcquire());
        if (out == nullptr) return false;
      }
      n = std::min(out != nullptr ? sliceBytes : kDirectPiece, bytes - offset);
      apply(mapped + offset, out, n);
      if (out != nullptr) send->post(n, tag);
    } else if (dstRows == nullptr && (kind == Kind::Recv || (kind == Kind::RecvCopySend && dst && !sendsSlices()))) {
      n = std::min(kDirectPiece, bytes - offset);
      error = recv->readDirect(region, offset, dst + offset, n);
    } else if (sendsSlices()) {
      // The receiver downstream expects slices of sliceBytes.
      n = std::min(sliceBytes, bytes - offset);
      char* out = static_cast<char*>(send->tryAcquire());
      if (out == nullptr) return false;
      if (kind == Kind::RecvCopySend) {
        error = recv->readDirect(region, offset, dst ? dst + offset : out, n);
        if (error.ok() && dst) std::memcpy(out, dst + offset, n);
      } else {
        char* buf = scratch(n);
        if (buf == nullptr) {
          error = Status::error(Errc::SystemError, strprintf("cannot allocate %zu bytes of scratch memory", n));
        } else {
          error = recv->readDirect(region, offset, buf, n);
          if (error.ok()) apply(buf, out, n);
        }
      }
      if (error.ok()) send->post(n, tag);
    } else {
      // Reducing into dst: read a cache-sized piece, reduce from it.
      n = std::min(kScratchPiece, bytes - offset);
      char* buf = scratch(kScratchPiece);
      if (buf == nullptr) {
        error = Status::error(Errc::SystemError, strprintf("cannot allocate %zu bytes of scratch memory", n));
      } else {
        error = recv->readDirect(region, offset, buf, n);
        if (error.ok()) apply(buf, nullptr, n);
      }
    }
    if (!error.ok()) {
      error = Status::error(error.code(), strprintf("receiving a direct message from rank %d: %s", recvPeer,
                                                    error.message().c_str()));
      return true;
    }
    offset += n;
    *moved = true;
    if (offset >= bytes) {
      finishDirectIn();
      return true;
    }
    if (n >= budget) return false;  // let the executor move other Works; we come back
    budget -= n;
  }
  return true;
}

bool Transfer::progressDirectOut(bool* moved) {
  if (!directPosted) {
    void* slot = send->tryAcquire();
    if (slot == nullptr) return false;
    const transport::DirectRegion& r = outRegion;
    std::memcpy(slot, &r, sizeof(r));
    tsanRelease(reinterpret_cast<const void*>(r.address));  // pairs with the reader's tsanAcquire in readDirect
    send->post(sizeof(r), tag | transport::kDirectTagFlag);
    directPosted = true;
    *moved = true;
  }
  if (!send->drained()) return false;
  tsanAcquire(kind == Kind::Send ? static_cast<const void*>(local) : dst);  // the reader is done with our buffer
  directDone = true;
  *moved = true;
  return true;
}

bool Transfer::progress() {
  if (finished()) return false;
  bool moved = false;
  if (enc != nullptr) {
    progressEncoded(&moved);
    return moved || !error.ok();
  }
  if (offset < bytes && !(kind == Kind::Send && directOut)) {
    if (!checkFirstSlot()) return false;
    if (!error.ok()) return true;
    const bool done = directIn ? progressDirectIn(&moved) : progressSlices(&moved);
    if (!error.ok()) return true;
    if (!done) return moved;
  }
  if (directOut) {
    if (!progressDirectOut(&moved)) return moved;
    offset = bytes;
  }
  return moved;
}

std::string Transfer::describe() const {
  std::string s;
  if (needsRecv()) s += strprintf("receiving from rank %d (%s)", recvPeer, recv ? recv->kind() : "?");
  if (needsSend()) {
    s += s.empty() ? "" : " and ";
    s += strprintf("sending to rank %d (%s)", sendPeer, send ? send->kind() : "?");
  }
  s += strprintf(", %zu of %zu bytes done", offset, bytes);
  if (directIn) s += ", reading the sender's buffer directly";
  if (directPosted && !directDone) s += strprintf(", waiting for rank %d to read this rank's buffer directly", sendPeer);
  return s;
}

void TransferAwaiter::await_suspend(Coro::Handle h) {
  Work* w = h.promise().work;
  w->waiting = &t;
  w->resumeAt = h;
}

TransferAwaiter Prims::make(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t bytes,
                            const ReduceOp* op, bool post, bool ownStrand) {
  TransferAwaiter a;
  Transfer& t = a.t;
  t.kind = kind;
  t.recvPeer = from;
  t.sendPeer = to;
  t.local = static_cast<const char*>(local);
  t.dst = static_cast<char*>(dst);
  t.bytes = bytes;
  t.sliceBytes = unitSliceBytes();
  t.op = op;
  t.post = post;
  t.tag = makeTag(opSeq_, stamp_, bytes);
  t.naming = naming_;
  t.streamBytes = std::max(bytes, opBytes_);
  if (t.needsRecv()) {
    t.recv = ep_->recv[channel_][from].get();
    if (!t.recv) {
      t.error = Status::error(Errc::InternalError, strprintf("rank %d has no connection from rank %d", rank_, from));
    }
  }
  if (t.needsSend()) {
    if (sentCounter_ != nullptr) *sentCounter_ += bytes;
    t.send = ep_->send[channel_][to].get();
    if (!t.send) t.error = Status::error(Errc::InternalError, strprintf("rank %d has no connection to rank %d", rank_, to));
  }
  if (t.error.ok() && t.sliceBytes == 0) {
    t.error = Status::error(Errc::InvalidUsage, strprintf("a unit of %zu bytes does not fit a FIFO slot of %zu bytes",
                                                          sliceUnit_, sliceBytes_));
  }
  if (!t.error.ok()) {
    t.offset = t.bytes;
    return a;
  }
  // Direct only where the outgoing bytes sit whole in memory that stays put for the verb (see prims.h), and only
  // for messages larger than a FIFO, which a sender could not finish without its receiver anyway.
  // Ordered combines stay in slices: a direct message is reduced in pieces that ignore a User op's units.
  const bool stable = (op == nullptr || !op->ordered()) &&
                      (kind == Transfer::Kind::Send || (kind == Transfer::Kind::RecvCopySend && dst) ||
                       kind == Transfer::Kind::RecvReduceCopySend);
  t.sendFrom = t.send != nullptr && t.send->sendsFromCaller();
  if (stable && t.send) {
    t.outRegion = transport::DirectRegion{};
    const size_t threshold = t.send->directThreshold();
    const size_t fifoBytes = static_cast<size_t>(t.send->nSlots()) * sliceBytes_;
    t.directOut = threshold > 0 && bytes >= threshold && (bytes > fifoBytes || ownStrand) &&
                  t.send->slotBytes() >= sizeof(transport::DirectRegion) &&
                  t.send->describeDirect(kind == Transfer::Kind::Send ? local : dst, bytes, &t.outRegion);
  }
  return a;
}

TransferAwaiter Prims::send(int peer, const void* src, size_t bytes, bool ownStrand) {
  return make(Transfer::Kind::Send, -1, peer, src, nullptr, bytes, nullptr, false, ownStrand);
}
TransferAwaiter Prims::sendPre(int peer, const void* local, size_t count, const ReduceOp& op, bool ownStrand) {
  if (op.identityPre()) {
    return make(Transfer::Kind::Send, -1, peer, local, nullptr, count * dataTypeSize(op.type), &op, false, ownStrand);
  }
  return make(Transfer::Kind::SendPre, -1, peer, local, nullptr, count * dataTypeSize(op.type), &op, false);
}
TransferAwaiter Prims::recv(int peer, void* dst, size_t bytes) {
  return make(Transfer::Kind::Recv, peer, -1, nullptr, dst, bytes, nullptr, false);
}
TransferAwaiter Prims::recvReduceSend(int from, int to, const void* local, size_t count, const ReduceOp& op) {
  return make(Transfer::Kind::RecvReduceSend, from, to, local, nullptr, count * dataTypeSize(op.type), &op, false);
}
TransferAwaiter Prims::recvReduceCopy(int from, const void* local, void* dst, size_t count, const ReduceOp& op,
                                      bool post) {
  return make(Transfer::Kind::RecvReduceCopy, from, -1, local, dst, count * dataTypeSize(op.type), &op, post);
}
TransferAwaiter Prims::recvReduceCopySend(int from, int to, const void* local, void* dst, size_t count,
                                          const ReduceOp& op, bool post) {
  return make(Transfer::Kind::RecvReduceCopySend, from, to, local, dst, count * dataTypeSize(op.type), &op, post);
}
TransferAwaiter Prims::recvCopySend(int from, int to, void* dst, size_t bytes) {
  return make(Transfer::Kind::RecvCopySend, from, to, nullptr, dst, bytes, nullptr, false);
}
TransferAwaiter Prims::recvCombineSend(int from, int to, const void* partial, size_t count, const ReduceOp& op) {
  return make(Transfer::Kind::RecvCombineSend, from, to, partial, nullptr, count * dataTypeSize(op.type), &op, false);
}
TransferAwaiter Prims::recvCombineCopy(int from, const void* partial, void* dst, size_t count, const ReduceOp& op,
                                       bool post, bool partialFirst) {
  TransferAwaiter a =
      make(Transfer::Kind::RecvCombineCopy, from, -1, partial, dst, count * dataTypeSize(op.type), &op, post);
  a.t.partialFirst = partialFirst;
  return a;
}

TransferAwaiter Prims::makeOrdered(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t count,
                                   const ReduceOp& op, bool post, size_t firstElem) {
  TransferAwaiter a = make(kind, from, to, local, dst, count * dataTypeSize(op.type), &op, post);
  a.t.firstElem = firstElem;
  if (a.t.error.ok() && op.combine == ReduceOp::Combine::Affine && dst != nullptr && dst == local) {
    a.t.error = Status::error(Errc::InternalError, "an affine combine cannot write over the operand whose decays it "
                                                   "reads (dst == local)");
    a.t.offset = a.t.bytes;
  }
  return a;
}

TransferAwaiter Prims::recvReduceSendAt(int from, int to, const void* local, size_t count, const ReduceOp& op,
                                        size_t firstElem) {
  return makeOrdered(Transfer::Kind::RecvReduceSend, from, to, local, nullptr, count, op, false, firstElem);
}
TransferAwaiter Prims::recvReduceCopyAt(int from, const void* local, void* dst, size_t count, const ReduceOp& op,
                                        size_t firstElem) {
  return makeOrdered(Transfer::Kind::RecvReduceCopy, from, -1, local, dst, count, op, false, firstElem);
}
TransferAwaiter Prims::recvReduceCopySendAt(int from, int to, const void* local, void* dst, size_t count,
                                            const ReduceOp& op, size_t firstElem) {
  return makeOrdered(Transfer::Kind::RecvReduceCopySend, from, to, local, dst, count, op, false, firstElem);
}
TransferAwaiter Prims::recvCopyReduceSend(int from, int to, const void* local, void* dst, size_t count,
                                          const ReduceOp& op, size_t firstElem) {
  return makeOrdered(Transfer::Kind::RecvCopyReduceSend, from, to, local, dst, count, op, false, firstElem);
}

TransferAwaiter Prims::sendRows(int peer, const Region& rows, bool receiverKnowsRows) {
  TransferAwaiter a = make(Transfer::Kind::Send, -1, peer, rows.base, nullptr, rows.bytes(), nullptr, false);
  Transfer& t = a.t;
  t.localRows = &rows;
  t.sendFrom = false;
  // The rows are no one run of memory: a peer can read them in place only knowing where each lies (receiverKnowsRows),
  // from the span of the named rows. The caller runs the verb as a strand of its own (prims.h).
  t.directOut = false;
  if (receiverKnowsRows && t.error.ok() && t.send != nullptr && t.send->directThreshold() > 0 &&
      t.bytes >= t.send->directThreshold() && t.send->slotBytes() >= sizeof(transport::DirectRegion)) {
    int64_t lowest = 0;
    const size_t span = rows.spanBytes(&lowest);
    t.outRegion = transport::DirectRegion{};
    t.directOut = span > 0 && t.send->describeDirect(rows.base + static_cast<size_t>(lowest) * rows.strideBytes, span,
                                                     &t.outRegion);
  }
  return a;
}
TransferAwaiter Prims::recvRows(int peer, const Region& rows, const Region* src) {
  TransferAwaiter a = make(Transfer::Kind::Recv, peer, -1, nullptr, rows.base, rows.bytes(), nullptr, false);
  a.t.dstRows = &rows;
  if (src != nullptr) {
    a.t.srcRows = src;
    a.t.srcSpan = src->spanBytes(&a.t.srcLowest);
  }
  return a;
}

TransferAwaiter Prims::recvFoldRows(int peer, const RowFold& fold, const Region* src) {
  TransferAwaiter a = make(Transfer::Kind::RecvFoldRows, peer, -1, nullptr, nullptr, fold.bytes(), nullptr, false);
  a.t.fold = &fold;
  if (src != nullptr) {
    a.t.srcRows = src;
    a.t.srcSpan = src->spanBytes(&a.t.srcLowest);
  }
  return a;
}

void Prims::copy(void* dst, const void* src, size_t bytes, size_t opBytes) {
  if (dst == src || bytes == 0) return;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (d + bytes <= s || s + bytes <= d) {
    copyPiece(dst, src, bytes, std::max(bytes, opBytes));
  } else {
    std::memmove(dst, src, bytes);
  }
}

void Prims::prepare(void* dst, const void* local, size_t count, const ReduceOp& op, bool post) {
  if (op.identityPre() && !(post && op.postDivide)) {
    copy(dst, local, count * dataTypeSize(op.type));
    return;
  }
  prepareLocal(op, dst, local, count, post);
}

}  // namespace cfx::prims
