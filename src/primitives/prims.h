// SPDX-License-Identifier: Apache-2.0
// Verbs (primitives layer): the only operations algorithms use to move data. Algorithms never see a transport.
//
// Every verb moves one message of `bytes` bytes through the FIFO to or from one peer, sliced into
// sliceBytes() pieces; both ends slice identically, so a message may pass through ranks whose transports
// differ. Each slice carries a tag made of the operation's sequence number and the message size: a
// receiver that gets a slice of another operation, or of another size, fails with InvalidUsage naming the
// peer (mismatched calls across ranks) instead of reading garbage.
//
// Direct (single-copy) messages: when the connection supports it (SendEnd::directThreshold() > 0), the message is
// at least that large and larger than one FIFO (nSlots x sliceBytes) or sent by a verb that runs as a strand of its
// own (send/sendPre with ownStrand), and the sending verb's outgoing bytes sit in
// stable memory (Send; RecvCopySend with a dst; RecvReduceCopySend, which forwards dst once it holds the whole
// result), the sender posts ONE slot holding a DirectRegion of that memory, flagged in the tag, and its verb
// finishes only once the receiver released that slot. Every receiving verb accepts either form: it reads a
// DirectRegion straight into dst, or into the outgoing slices, or in cache-sized pieces into a private scratch
// buffer that it reduces from. Because such a message is larger than a FIFO, a sender waits for its receiver no
// more than it would with slices: direct messages add no dependency between ranks that algorithms must know.
//
// Sending from memory: where the send end supports it (SendEnd::sendsFromCaller(): tcp on an owner-driven link of
// one socket), a slice that would be a plain copy of bytes already in memory (Send's local bytes, the result
// RecvReduceCopySend just wrote to dst, the slot RecvCopySend forwards) is posted with postFrom() instead, and the
// end hands it to the socket from there. The verb still finishes once it posted: postFrom() has read the bytes (or
// copied what the socket did not take) before it returns.
//
// Deadlock rule for algorithm authors: a verb that both receives and sends can only finish if its
// upstream peer keeps sending and its downstream peer keeps receiving. FIFOs are only promised two slots,
// so in a cycle (a ring) every verb may move at most one slice: an opening send of two slices fills the
// neighbour's FIFO, and then every rank's receive-and-send waits for an outgoing slot that never frees.
// Chains have no cycle and may move any size per verb.
//
// Reductions: `local` is this rank's own input (the op's pre-multiplier is applied to it), `partial` data
// arriving from a peer is already pre-multiplied. `post` applies the op's final step (integer average's
// division) and must be set exactly once per element: on the rank that completes the reduction.
//
// The wider contract (docs/DESIGN.md, "The data-path contract"): a verb may also carry
//   - a codec (Encoded): the wire holds the codec's self-contained pieces instead of the buffer's bytes, sliced by
//     whole pieces that both ends compute from (codec, count, slot size); receivers decode each slice on arrival,
//     into values, into an fp32 accumulator, or forward it verbatim. No direct or send-from-memory path: those move
//     a buffer's own bytes.
//   - an ordered combine (ReduceOp::ordered(), ordered_combine.h): the slot is the lower ranks' operand and `local`
//     the upper one, `firstElem` locates an Affine verb's slices in their groups, and setSliceUnit() keeps a User
//     op's units whole within slices.
//   - rows (Region): a message gathered from, or scattered to, rows of a buffer (a row list or a stride) instead of
//     one run of bytes, so a sender reads rows straight into its slots and a receiver writes them where they belong.
//     A negative row index stands for no row: a gather sends zeros in its place, a scatter drops its bytes. Where the
//     receiver knows the sender's row list too (it passes it as `src`), the sender may post one DirectRegion of the
//     span of its rows instead, and the receiver copies (or folds) each row straight from the sender's memory: one
//     copy per row instead of two, under the same rules as other direct messages.
//   - folded rows (RowFold, recvFoldRows): each incoming row, times a weight, is added into an fp32 accumulator row
//     of its own (MoE combine), and its last contribution is rounded straight into the output row.
// Every form stamps its slices with the op's sequence number and a digest of its size and codec.
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/types.h"
#include "compress/codec.h"
#include "primitives/op_stamp.h"
#include "primitives/coro.h"
#include "transport/transport.h"

namespace cfx::prims {

struct Work;

// A message carried in a codec's pieces (compress/codec.h): `count` values of `valueType` on the verb's local and
// dst side, on the wire as the codec's pieces of codec->pieceElems(slice) values. Owned by the algorithm, which
// keeps it alive while the verb runs.
struct Encoded {
  const compress::Codec* codec = nullptr;
  DataType valueType = DataType::Float32;  // of local values (what is encoded, or added to) and dst values (decoded)
  // sendEncoded: when set, the message's framed wire bytes, sent as they are instead of encoding local values.
  // recvDecoded / recvForward: when set, the framed wire bytes are also kept here (codec->framedBytes bytes).
  char* framed = nullptr;
  compress::EncodeContext ctx;  // residual aligned with the local values; firstElem of the first value; seed
  float divide = 1.0f;          // recvRequantizeCopySend: the reduced values are divided by this before encoding
};

// A message gathered from or scattered to rows of a buffer: nRows rows of rowBytes bytes each, in message order;
// row i lies at base + rows[i] * strideBytes, or at base + i * strideBytes without a row list. Rows may repeat in a
// gather (a row sent twice); a scatter's rows must not overlap. A negative entry in the row list names no row: a
// gather sends zeros for it and a scatter drops its bytes (what MoE's bounded mode does with rows over its bound).
// The row list is the algorithm's and outlives the verb.
struct Region {
  char* base = nullptr;
  size_t rowBytes = 0;
  size_t strideBytes = 0;
  const int64_t* rows = nullptr;
  size_t nRows = 0;

  size_t bytes() const { return rowBytes * nRows; }
  // Row i's first byte, or nullptr for a negative entry.
  char* rowAt(size_t i) const {
    const int64_t row = rows != nullptr ? rows[i] : static_cast<int64_t>(i);
    return row < 0 ? nullptr : base + static_cast<size_t>(row) * strideBytes;
  }
  // The bytes from the lowest named row to the end of the highest (rows' span), and the lowest row's index; 0 bytes
  // when no row is named. A direct rows message (sendRows with a receiver that knows the rows) posts this span.
  size_t spanBytes(int64_t* lowest) const {
    int64_t lo = INT64_MAX;
    int64_t hi = -1;
    for (size_t i = 0; i < nRows; ++i) {
      const int64_t row = rows != nullptr ? rows[i] : static_cast<int64_t>(i);
      if (row < 0) continue;
      lo = std::min(lo, row);
      hi = std::max(hi, row);
    }
    *lowest = hi < 0 ? 0 : lo;
    return hi < 0 ? 0 : static_cast<size_t>(hi - lo) * strideBytes + rowBytes;
  }
  // Calls f(p, len) for the spans of the buffer that hold message bytes [offset, offset + n), in message order; p is
  // nullptr within a row that the list does not name.
  template <class F>
  void forSpans(size_t offset, size_t n, F&& f) const {
    size_t row = offset / rowBytes;
    size_t in = offset % rowBytes;
    while (n > 0) {
      const size_t len = std::min(n, rowBytes - in);
      char* p = rowAt(row);
      f(p != nullptr ? p + in : nullptr, len);
      n -= len;
      in = 0;
      ++row;
    }
  }
};

// A message of rows folded into per-token fp32 sums (MoE combine): message row i, rowElems values of valueType, is
// multiplied by weights[i] (1 without weights) and folded into the sums of token tokens[i] as steps[i] says:
//   First   acc = w * x                      the token's first contribution
//   Middle  acc = acc + w * x
//   Last    out = round(acc + w * x)          its last: rounded once, into the output row
//   Only    out = round(w * x)                its only contribution: the accumulator is not touched
// Every product and sum is fp32, each added in message order, so the same message folds to the same bits whatever
// the slicing. acc rows are accStride floats apart, indexed by token - accFirstToken (an algorithm that folds a range
// of tokens at a time keeps the sums of that range only), out rows outStride bytes apart, indexed by token; out holds
// valueType (fp32, bf16 or fp16). The arrays are the algorithm's and outlive the verb.
struct RowFold {
  enum class Step : uint8_t { First, Middle, Last, Only };
  DataType valueType = DataType::Float32;
  size_t rowElems = 0;
  float* acc = nullptr;
  size_t accStride = 0;
  int64_t accFirstToken = 0;
  char* out = nullptr;
  size_t outStride = 0;
  const int64_t* tokens = nullptr;
  const float* weights = nullptr;
  const Step* steps = nullptr;
  size_t nRows = 0;

  size_t rowBytes() const { return rowElems * dataTypeSize(valueType); }
  size_t bytes() const { return rowBytes() * nRows; }
  // Folds values [first, first + n) of message row i, read from `in`.
  void foldPiece(size_t i, size_t first, size_t n, const char* in) const;
  // Folds message row i whole, read from `in` (a row this rank holds itself, that crosses no wire).
  void foldRow(size_t i, const char* in) const { foldPiece(i, 0, rowElems, in); }
};

// One verb in flight. progress() never blocks.
struct Transfer {
  enum class Kind : uint8_t {
    Send,                // slot = local
    SendPre,             // slot = pre(local)
    Recv,                // dst = slot
    RecvReduceSend,      // next slot = slot ⊕ pre(local)
    RecvReduceCopy,      // dst = post?(slot ⊕ pre(local))
    RecvReduceCopySend,  // dst = post?(slot ⊕ pre(local)); next slot = dst
    RecvCopySend,        // dst = slot (if dst); next slot = slot
    RecvCombineSend,     // next slot = slot ⊕ partial(local) — both already pre-multiplied
    RecvCombineCopy,     // dst = post?(slot ⊕ partial(local)), or post?(partial(local) ⊕ slot) with partialFirst
    RecvCopyReduceSend,  // dst = slot; next slot = slot ⊕ pre(local) — an exclusive scan's chain
    RecvFoldRows,        // fold rows of the slot into fp32 sums (RowFold)
  };
  Kind kind = Kind::Send;
  transport::RecvEnd* recv = nullptr;
  transport::SendEnd* send = nullptr;
  int recvPeer = -1;
  int sendPeer = -1;
  const char* local = nullptr;
  char* dst = nullptr;
  size_t bytes = 0;
  size_t sliceBytes = 0;
  const ReduceOp* op = nullptr;
  bool post = false;
  bool partialFirst = false;  // RecvCombineCopy: `local` is the left operand (exchange algorithms fix the order)
  bool sendFrom = false;      // the send end takes slices from our memory (SendEnd::postFrom)
  uint64_t tag = 0;                  // op_stamp.h
  const OpNaming* naming = nullptr;  // names both sides of a mismatch
  size_t offset = 0;  // bytes of the message processed (received and/or sent) so far; wire bytes when encoded
  // Ordered combines: index of local[0] within its buffer, from which Affine finds each element's group.
  size_t firstElem = 0;
  // Codec messages (Encoded): the message's values, values per slice, and values processed so far.
  const Encoded* enc = nullptr;
  size_t encCount = 0;
  size_t pieceElems = 0;
  size_t elemDone = 0;
  // Rows: where local (a gather) or dst (a scatter) lies instead of one run at `local` / `dst`.
  const Region* localRows = nullptr;
  const Region* dstRows = nullptr;
  const RowFold* fold = nullptr;  // RecvFoldRows
  // Receivers of rows that know the sender's row list (base unused): a direct message is then its rows' span, read row
  // by row at the rows' offsets from the lowest. srcLowest and srcSpan are computed when the verb is made.
  const Region* srcRows = nullptr;
  int64_t srcLowest = 0;
  size_t srcSpan = 0;
  size_t streamBytes = 0;  // the larger of bytes and the operation's size: what copyPiece() decides by
  Status error;
  // Direct messages (see the file comment).
  bool directOut = false;         // this verb posts one DirectRegion instead of slices (decided in Prims::make)
  bool directPosted = false;      // ... and has posted it; it finishes once the receiver released it
  bool inChecked = false;         // the first incoming slot was examined
  bool directIn = false;          // the incoming message is a DirectRegion, held in `region`
  const char* mapped = nullptr;   // ... readable in place here (RecvEnd::mapDirect), else read with readDirect
  // The two regions are left uninitialised (anonymous unions) until a direct message fills them: most verbs never
  // use one, and zeroing both in every verb (a rep stos of 128 bytes) was a tenth of a 2-rank 4 KiB all-to-all.
  union {
    transport::DirectRegion region;  // written by checkFirstSlot before anything reads it
  };
  union {
    transport::DirectRegion outRegion;  // what a directOut verb posts; reset by Prims::make before describeDirect
  };

  Transfer() {}  // NOLINT(modernize-use-equals-default): `= default` would be deleted by the unions above

  bool needsRecv() const { return kind != Kind::Send && kind != Kind::SendPre; }
  bool needsSend() const {
    return kind == Kind::Send || kind == Kind::SendPre || kind == Kind::RecvReduceSend ||
           kind == Kind::RecvReduceCopySend || kind == Kind::RecvCopySend || kind == Kind::RecvCombineSend ||
           kind == Kind::RecvCopyReduceSend;
  }
  bool finished() const { return !error.ok() || (offset >= bytes && (!directOut || directDone)); }
  // Moves as many slices as the FIFOs allow. Returns true if anything moved (or an error was found).
  bool progress();
  // True if progress() would move at least one slice now (used before sleeping).
  bool ready();
  // "recv from rank 3 (shm)" — for timeout and error messages.
  std::string describe() const;

 private:
  bool progressSlices(bool* moved);
  bool progressEncoded(bool* moved);  // prims_encoded.cc
  void applyEncoded(const char* in, char* out, size_t n, size_t wireBytes);
  // slot ⊕ local for ordered combines (the slot is the lower operand), into out.
  void combineOrdered(char* out, const char* in, size_t n);
  bool progressDirectIn(bool* moved);
  bool progressDirectRows(bool* moved);  // progressDirectIn of a rows span (srcRows)
  void finishDirectIn();                 // the whole message was read: unmap it and release its slot
  bool progressDirectOut(bool* moved);
  bool checkFirstSlot();
  Status mismatch(uint64_t inTag, size_t inMessageBytes, size_t inSlotBytes, size_t expectSlot) const;
  bool sendsSlices() const { return needsSend() && !directOut; }
  // Where the outgoing slice is a plain copy of bytes in memory (Send: local; RecvReduceCopySend: dst, once
  // reduced; RecvCopySend: the incoming slot), those bytes; else nullptr.
  const char* outgoingBytes(const char* in) const;
  void apply(const char* in, char* out, size_t n);
  void applyRows(const char* in, char* out, size_t n);  // the rows forms (localRows, dstRows, fold)
  bool directDone = false;  // the posted DirectRegion was released
};

// co_await-able wrapper: finishes immediately when the FIFOs allow, else parks the coroutine on its Work.
struct TransferAwaiter {
  Transfer t;
  bool await_ready() {
    t.progress();
    return t.finished();
  }
  void await_suspend(Coro::Handle h);
  Status await_resume() { return std::move(t.error); }
};

// Verbs for one rank on one channel of one communicator. Cheap to copy; holds no ownership.
class Prims {
 public:
  Prims(transport::Endpoints& endpoints, int channel, int rank, int nRanks, size_t sliceBytes)
      : ep_(&endpoints), channel_(channel), rank_(rank), nRanks_(nRanks), sliceBytes_(sliceBytes) {}

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }
  size_t sliceBytes() const { return sliceBytes_; }
  // How many slices a ring chunk may span, the same on every rank of the communicator: 1, or on a long fat path
  // (every FIFO a network one with slots grown to the round trip) one less than the smallest FIFO, so that a ring
  // loop's round trip is paid once per several slices. A ring's opening send of one chunk then still fits in
  // the neighbour's FIFO, which is all its deadlock argument needs.
  void setRingChunkSlices(int slices) { ringChunkSlices_ = slices; }
  int ringChunkSlices() const { return ringChunkSlices_; }
  // Every message sent or received from now on is stamped with this operation number.
  void setOpSeq(uint32_t seq) { opSeq_ = seq; }
  // While set, every verb that sends adds the bytes it puts on the wire (a codec message's framed bytes) to *counter:
  // what a compressed op reports it sent (cfxCommGetCompressStats). Null (the default) counts nothing.
  void setSentCounter(uint64_t* counter) { sentCounter_ = counter; }
  // Every message made from now on carries `stamp` in its tag (op_stamp.h), so ranks whose calls differ in kind or
  // parameters fail on the first slot, with both sides named by `naming` (may be null; kept alive by the caller
  // while the op runs). The default stamp (kind 0) is a point-to-point message's.
  void setOpStamp(OpStamp stamp, const OpNaming* naming) {
    stamp_ = stamp;
    naming_ = naming;
  }
  // Every verb made from now on cuts its slices at a multiple of `bytes` (a User op's unit, so the function always
  // sees whole units); 1 (the default) cuts anywhere. Both ends of every message must set the same unit.
  void setSliceUnit(size_t bytes) { sliceUnit_ = bytes == 0 ? 1 : bytes; }
  // The slice verbs cut now: sliceBytes() rounded down to the unit (0 when a unit exceeds a slice).
  size_t unitSliceBytes() const { return sliceBytes_ / sliceUnit_ * sliceUnit_; }
  uint32_t opSeq() const { return opSeq_; }
  const OpStamp& opStamp() const { return stamp_; }
  const OpNaming* opNaming() const { return naming_; }
  // The operation's largest buffer, in bytes: copies of its messages stream past the caches (copy.h) when the
  // operation as a whole is that large, even where each message is smaller (blocks of many ranks).
  void setOpBytes(size_t bytes) { opBytes_ = bytes; }
  size_t opBytes() const { return opBytes_; }

  // `ownStrand`: the caller runs this send as a strand of its own (prims::Parallel) that nothing else of this rank
  // waits behind, so it may go direct at any size from the connection's threshold, not only above a FIFO's worth.
  TransferAwaiter send(int peer, const void* src, size_t bytes, bool ownStrand = false);
  TransferAwaiter sendPre(int peer, const void* local, size_t count, const ReduceOp& op, bool ownStrand = false);
  TransferAwaiter recv(int peer, void* dst, size_t bytes);
  TransferAwaiter recvReduceSend(int from, int to, const void* local, size_t count, const ReduceOp& op);
  TransferAwaiter recvReduceCopy(int from, const void* local, void* dst, size_t count, const ReduceOp& op,
                                 bool post);
  TransferAwaiter recvReduceCopySend(int from, int to, const void* local, void* dst, size_t count,
                                     const ReduceOp& op, bool post);
  TransferAwaiter recvCopySend(int from, int to, void* dst, size_t bytes);
  TransferAwaiter recvCombineSend(int from, int to, const void* partial, size_t count, const ReduceOp& op);
  // partialFirst: combine as partial ⊕ slot instead of slot ⊕ partial. Two ranks that exchange partials and each
  // combine them pass opposite values, so both evaluate lower ⊕ upper and hold the same bits (for max/min with
  // NaNs or signed zeros, and NaN payloads of sums, the order shows in the result).
  TransferAwaiter recvCombineCopy(int from, const void* partial, void* dst, size_t count, const ReduceOp& op,
                                  bool post, bool partialFirst = false);

  // Ordered combines (All-Scan). `firstElem`: index of local[0] in its buffer (Affine's groups count from there).
  // recvReduceSend / recvReduceCopy / recvReduceCopySend with an ordered op compute slot ⊕ local as well; these are
  // the same verbs with the index, and the exclusive scan's verb:
  TransferAwaiter recvReduceSendAt(int from, int to, const void* local, size_t count, const ReduceOp& op,
                                   size_t firstElem);
  TransferAwaiter recvReduceCopyAt(int from, const void* local, void* dst, size_t count, const ReduceOp& op,
                                   size_t firstElem);
  TransferAwaiter recvReduceCopySendAt(int from, int to, const void* local, void* dst, size_t count,
                                       const ReduceOp& op, size_t firstElem);
  // dst = slot, and the next slot = slot ⊕ local: forwards the prefix of the ranks before this one with this rank
  // folded in, while keeping the prefix without it.
  TransferAwaiter recvCopyReduceSend(int from, int to, const void* local, void* dst, size_t count,
                                     const ReduceOp& op, size_t firstElem = 0);

  // Codec messages (Encoded). `count` values each; acc is fp32 and aligned.
  // slot = encode(values) (or e.framed's bytes as they are, with values null).
  TransferAwaiter sendEncoded(int peer, const void* values, size_t count, const Encoded& e);
  // dst = decode(slot) in e.valueType (dst may be null), and the wire bytes into e.framed when set.
  TransferAwaiter recvDecoded(int peer, void* dst, size_t count, const Encoded& e);
  // acc += decode(slot), in fp32.
  TransferAwaiter recvAccumulate(int peer, float* acc, size_t count, const Encoded& e);
  // next slot = slot as it is; dst = decode(slot) (dst may be null); e.framed keeps the bytes when set.
  TransferAwaiter recvForward(int from, int to, void* dst, size_t count, const Encoded& e);
  // next slot = encode(decode(slot) + local): one hop of a requantising ring.
  TransferAwaiter recvRequantizeSend(int from, int to, const void* local, size_t count, const Encoded& e);
  // r = (decode(slot) + local) / e.divide; next slot = encode(r); dst = decode(that code), so this rank holds the
  // bytes every other rank will decode.
  TransferAwaiter recvRequantizeCopySend(int from, int to, const void* local, void* dst, size_t count,
                                         const Encoded& e);

  // Rows (Region): a message gathered from rows into slices, or scattered from slices into rows. With
  // receiverKnowsRows (the receiver passes the same row list as `src`) the message may go direct, as a strand of its
  // own: the caller promises that the receive verb gets `src`, and that nothing else of this rank waits behind it.
  TransferAwaiter sendRows(int peer, const Region& rows, bool receiverKnowsRows = false);
  TransferAwaiter recvRows(int peer, const Region& rows, const Region* src = nullptr);
  // Rows folded into fp32 sums on arrival (RowFold): the message is fold.bytes() long; src as for recvRows.
  TransferAwaiter recvFoldRows(int peer, const RowFold& fold, const Region* src = nullptr);

  // Local, synchronous helpers (no peer involved). `opBytes` as setOpBytes(): the size that decides streaming.
  static void copy(void* dst, const void* src, size_t bytes, size_t opBytes = 0);
  // dst = post?(pre(local)): a rank's contribution when it is the only one (nRanks == 1) or starts a chain.
  static void prepare(void* dst, const void* local, size_t count, const ReduceOp& op, bool post);

 private:
  TransferAwaiter make(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t bytes,
                       const ReduceOp* op, bool post, bool ownStrand = false);
  TransferAwaiter makeOrdered(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t count,
                              const ReduceOp& op, bool post, size_t firstElem);
  TransferAwaiter makeEncoded(Transfer::Kind kind, int from, int to, const void* local, void* dst, size_t count,
                              const Encoded& e);
  transport::Endpoints* ep_;
  int channel_;
  int rank_;
  int nRanks_;
  size_t sliceBytes_;
  int ringChunkSlices_ = 1;
  uint32_t opSeq_ = 0;
  size_t opBytes_ = 0;
  size_t sliceUnit_ = 1;
  OpStamp stamp_;
  const OpNaming* naming_ = nullptr;
  uint64_t* sentCounter_ = nullptr;
};

}  // namespace cfx::prims
