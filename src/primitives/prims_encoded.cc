// SPDX-License-Identifier: Apache-2.0
// Verbs over codec pieces (primitives layer): the Encoded half of Transfer (prims.h).
//
// A codec message of `count` values travels as slices of pieceElems values, each slice one self-contained piece of
// pieceBytes(n) wire bytes. Sender and receiver derive the same cut from (codec, count, slice size), and the tag
// carries a digest of the framed size and the codec's signature, so ranks that disagree on the count or the codec
// fail on their first slice with a named mismatch. Each slice is handled whole the moment both its ends are ready:
// decoded into values, accumulated into fp32, forwarded byte for byte, or re-encoded after adding this rank's values.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "primitives/prims.h"

namespace cfx::prims {

namespace {

// This thread's fp32 scratch of at least n values, for one slice at a time.
float* sliceScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace

void Transfer::applyEncoded(const char* in, char* out, size_t n, size_t wireBytes) {
  const compress::Codec& c = *enc->codec;
  const DataType vt = enc->valueType;
  const size_t at = elemDone * dataTypeSize(vt);
  compress::EncodeContext ctx = enc->ctx;
  ctx.firstElem += elemDone;
  if (ctx.residual != nullptr) ctx.residual += elemDone;
  switch (kind) {
    case Kind::Send:
      if (local != nullptr) c.encode(local + at, vt, n, out, ctx);
      else std::memcpy(out, enc->framed + offset, wireBytes);
      return;
    case Kind::Recv:
    case Kind::RecvCopySend:
      if (out != nullptr) std::memcpy(out, in, wireBytes);
      if (dst != nullptr) c.decodeTo(in, n, vt, dst + at);
      if (enc->framed != nullptr) std::memcpy(enc->framed + offset, in, wireBytes);
      return;
    case Kind::RecvReduceCopy:
      c.decode(in, n, reinterpret_cast<float*>(dst) + elemDone, /*accumulate=*/true);
      return;
    case Kind::RecvReduceSend:
    case Kind::RecvReduceCopySend: {
      float* sum = sliceScratch(2 * n);
      float* mine = sum + n;
      c.decode(in, n, sum, false);
      compress::toFloat(vt, local + at, n, mine);
      for (size_t i = 0; i < n; ++i) sum[i] += mine[i];
      if (enc->divide != 1.0f) {
        for (size_t i = 0; i < n; ++i) sum[i] /= enc->divide;
      }
      ctx.residual = nullptr;  // a hop re-encodes a partial sum: no single rank owns what it drops
      c.encode(sum, DataType::Float32, n, out, ctx);
      if (kind == Kind::RecvReduceCopySend) c.decodeTo(out, n, vt, dst + at);
      return;
    }
    default:
      error = Status::error(Errc::InternalError, "a codec message on a verb that does not carry one");
  }
}

bool Transfer::progressEncoded(bool* moved) {
  const compress::Codec& c = *enc->codec;
  while (elemDone < encCount && error.ok()) {
    const size_t n = std::min(pieceElems, encCount - elemDone);
    const size_t w = c.pieceBytes(n);
    const char* in = nullptr;
    if (needsRecv()) {
      size_t inBytes = 0;
      uint64_t inTag = 0;
      in = static_cast<const char*>(recv->tryPeek(&inBytes, &inTag));
      if (in == nullptr) return false;
      if (inTag != tag || inBytes != w) {
        error = Status::error(
            Errc::InvalidUsage,
            describeMismatch(recvPeer, inTag, tag, naming,
                             strprintf("expecting %zu values in codec %s, slices of %zu B; its slice holds %zu B",
                                       encCount, compress::codecText(c.spec()).c_str(), w, inBytes)));
        return true;
      }
    }
    char* out = nullptr;
    if (needsSend()) {
      out = static_cast<char*>(send->tryAcquire());
      if (out == nullptr) return false;
    }
    applyEncoded(in, out, n, w);
    if (!error.ok()) return true;
    if (out != nullptr) send->post(w, tag);
    if (in != nullptr) recv->release();
    offset += w;
    elemDone += n;
    *moved = true;
  }
  return true;
}

TransferAwaiter Prims::makeEncoded(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t count,
                                   const Encoded& e) {
  const size_t piece = e.codec->pieceElems(unitSliceBytes());
  const size_t framed = e.codec->framedBytes(count, piece);
  TransferAwaiter a = make(kind, from, to, local, dst, framed, nullptr, false);
  Transfer& t = a.t;
  t.enc = &e;
  t.encCount = count;
  t.pieceElems = piece;
  t.directOut = false;  // wire bytes are made per slice: there is no buffer of them to read in place
  t.sendFrom = false;
  // The codec's digest joins the op's: ranks that encode differently fail on the first piece.
  t.tag = makeTag(opSeq_, OpStamp{stamp_.kind, (stamp_.params ^ e.codec->signature()) & 0x7fffffffu}, framed);
  if (t.error.ok() && piece == 0 && count > 0) {
    t.error = Status::error(Errc::InvalidArgument,
                            strprintf("codec %s: one block does not fit a FIFO slot of %zu bytes; use a smaller block",
                                      compress::codecText(e.codec->spec()).c_str(), unitSliceBytes()));
    t.offset = t.bytes;
  }
  return a;
}

TransferAwaiter Prims::sendEncoded(int peer, const void* values, size_t count, const Encoded& e) {
  return makeEncoded(Transfer::Kind::Send, -1, peer, values, nullptr, count, e);
}
TransferAwaiter Prims::recvDecoded(int peer, void* dst, size_t count, const Encoded& e) {
  return makeEncoded(Transfer::Kind::Recv, peer, -1, nullptr, dst, count, e);
}
TransferAwaiter Prims::recvAccumulate(int peer, float* acc, size_t count, const Encoded& e) {
  return makeEncoded(Transfer::Kind::RecvReduceCopy, peer, -1, nullptr, acc, count, e);
}
TransferAwaiter Prims::recvForward(int from, int to, void* dst, size_t count, const Encoded& e) {
  return makeEncoded(Transfer::Kind::RecvCopySend, from, to, nullptr, dst, count, e);
}
TransferAwaiter Prims::recvRequantizeSend(int from, int to, const void* local, size_t count, const Encoded& e) {
  return makeEncoded(Transfer::Kind::RecvReduceSend, from, to, local, nullptr, count, e);
}
TransferAwaiter Prims::recvRequantizeCopySend(int from, int to, const void* local, void* dst, size_t count,
                                              const Encoded& e) {
  return makeEncoded(Transfer::Kind::RecvReduceCopySend, from, to, local, dst, count, e);
}

}  // namespace cfx::prims
