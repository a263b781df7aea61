// SPDX-License-Identifier: Apache-2.0
// Verbs over FIFO slices (primitives layer).
#include "primitives/prims.h"

#include <cstring>

#include "common/log.h"
#include "primitives/executor.h"
#include "primitives/reduce.h"

namespace cfx::prims {

namespace {
// Tag = (op sequence << 32) | message bytes (low 32 bits). Both sides of a message compute the same tag from
// their own call's arguments, so a mismatch in call order or count shows up on the first slice.
uint64_t makeTag(uint32_t opSeq, size_t bytes) { return (static_cast<uint64_t>(opSeq) << 32) | (bytes & 0xffffffffu); }
}  // namespace

bool Transfer::ready() {
  if (finished()) return true;
  size_t inBytes = 0;
  uint64_t inTag = 0;
  if (needsRecv() && recv->tryPeek(&inBytes, &inTag) == nullptr) return false;
  if (needsSend() && send->tryAcquire() == nullptr) return false;
  return true;
}

bool Transfer::progress() {
  bool moved = false;
  const size_t elt = op ? dataTypeSize(op->type) : 1;
  while (offset < bytes && error.ok()) {
    const size_t n = std::min(sliceBytes, bytes - offset);
    const char* in = nullptr;
    if (needsRecv()) {
      size_t inBytes = 0;
      uint64_t inTag = 0;
      in = static_cast<const char*>(recv->tryPeek(&inBytes, &inTag));
      if (in == nullptr) return moved;
      if (inTag != tag || inBytes != n) {
        error = Status::error(
            Errc::InvalidUsage,
            strprintf("mismatched operation across ranks: rank %d sent op #%u with a %u-byte message (slice %zu B), "
                      "but this rank expects op #%u with %u bytes (slice %zu B) from it; every rank must call the "
                      "same collectives in the same order with the same counts",
                      recvPeer, static_cast<unsigned>(inTag >> 32), static_cast<unsigned>(inTag & 0xffffffffu),
                      inBytes, static_cast<unsigned>(tag >> 32), static_cast<unsigned>(tag & 0xffffffffu), n));
        return true;
      }
    }
    char* out = nullptr;
    if (needsSend()) {
      out = static_cast<char*>(send->tryAcquire());
      if (out == nullptr) return moved;
    }
    const size_t count = n / elt;
    switch (kind) {
      case Kind::Send: std::memcpy(out, local + offset, n); break;
      case Kind::SendPre: prepareLocal(*op, out, local + offset, count, false); break;
      case Kind::Recv: std::memcpy(dst + offset, in, n); break;
      case Kind::RecvReduceSend: reduceLocal(*op, out, in, local + offset, count, false); break;
      case Kind::RecvReduceCopy: reduceLocal(*op, dst + offset, in, local + offset, count, post); break;
      case Kind::RecvReduceCopySend:
        reduceLocal(*op, dst + offset, in, local + offset, count, post);
        std::memcpy(out, dst + offset, n);
        break;
      case Kind::RecvCopySend:
        if (dst) std::memcpy(dst + offset, in, n);
        std::memcpy(out, in, n);
        break;
      case Kind::RecvCombineSend: combinePartials(*op, out, in, local + offset, count, false); break;
      case Kind::RecvCombineCopy: combinePartials(*op, dst + offset, in, local + offset, count, post); break;
    }
    if (out) send->post(n, tag);
    if (in) recv->release();
    offset += n;
    moved = true;
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
  return s;
}

void TransferAwaiter::await_suspend(Task::Handle h) {
  Work* w = h.promise().work;
  w->waiting = &t;
  w->resumeAt = h;
}

TransferAwaiter Prims::make(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t bytes,
                            const ReduceOp* op, bool post) {
  TransferAwaiter a;
  Transfer& t = a.t;
  t.kind = kind;
  t.recvPeer = from;
  t.sendPeer = to;
  t.local = static_cast<const char*>(local);
  t.dst = static_cast<char*>(dst);
  t.bytes = bytes;
  t.sliceBytes = sliceBytes_;
  t.op = op;
  t.post = post;
  t.tag = makeTag(opSeq_, bytes);
  if (t.needsRecv()) {
    t.recv = ep_->recv[channel_][from].get();
    if (!t.recv) {
      t.error = Status::error(Errc::InternalError, strprintf("rank %d has no connection from rank %d", rank_, from));
    }
  }
  if (t.needsSend()) {
    t.send = ep_->send[channel_][to].get();
    if (!t.send) t.error = Status::error(Errc::InternalError, strprintf("rank %d has no connection to rank %d", rank_, to));
  }
  if (!t.error.ok()) t.offset = t.bytes;
  return a;
}

TransferAwaiter Prims::send(int peer, const void* src, size_t bytes) {
  return make(Transfer::Kind::Send, -1, peer, src, nullptr, bytes, nullptr, false);
}
TransferAwaiter Prims::sendPre(int peer, const void* local, size_t count, const ReduceOp& op) {
  if (op.identityPre()) return make(Transfer::Kind::Send, -1, peer, local, nullptr, count * dataTypeSize(op.type), &op, false);
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
                                       bool post) {
  return make(Transfer::Kind::RecvCombineCopy, from, -1, partial, dst, count * dataTypeSize(op.type), &op, post);
}

void Prims::copy(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

void Prims::prepare(void* dst, const void* local, size_t count, const ReduceOp& op, bool post) {
  if (op.identityPre() && !(post && op.postDivide)) {
    copy(dst, local, count * dataTypeSize(op.type));
    return;
  }
  prepareLocal(op, dst, local, count, post);
}

}  // namespace cfx::prims
