// SPDX-License-Identifier: Apache-2.0
// All-Scan building blocks (collectives layer); see scan.h.
#include "collectives/scan.h"

#include <cstring>
#include <limits>

#include "collectives/scratch.h"
#include "common/float_types.h"
#include "primitives/ordered_combine.h"
#include "primitives/parallel.h"
#include "primitives/reduce.h"

namespace cfx::coll {

namespace {

// The identity of max (lowest) or min (highest) of a type, as its bytes.
void extreme(DataType t, bool lowest, unsigned char* out) {
  auto put = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (t) {
    case DataType::Int8: put(lowest ? std::numeric_limits<int8_t>::min() : std::numeric_limits<int8_t>::max()); break;
    case DataType::Uint8: put(lowest ? uint8_t{0} : std::numeric_limits<uint8_t>::max()); break;
    case DataType::Int32: put(lowest ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max()); break;
    case DataType::Uint32: put(lowest ? uint32_t{0} : std::numeric_limits<uint32_t>::max()); break;
    case DataType::Int64: put(lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max()); break;
    case DataType::Uint64: put(lowest ? uint64_t{0} : std::numeric_limits<uint64_t>::max()); break;
    case DataType::Float16: put(static_cast<uint16_t>(lowest ? 0xFC00 : 0x7C00)); break;    // -+inf
    case DataType::Bfloat16: put(static_cast<uint16_t>(lowest ? 0xFF80 : 0x7F80)); break;   // -+inf
    case DataType::Float32: put(lowest ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity()); break;
    case DataType::Float64: put(lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()); break;
    case DataType::Fp8E4M3: put(static_cast<uint8_t>(lowest ? 0xFE : 0x7E)); break;  // -+448: E4M3 has no inf
    case DataType::Fp8E5M2: put(static_cast<uint8_t>(lowest ? 0xFC : 0x7C)); break;  // -+inf
  }
}

void one(DataType t, unsigned char* out) {
  auto put = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8: put(uint8_t{1}); break;
    case DataType::Int32:
    case DataType::Uint32: put(uint32_t{1}); break;
    case DataType::Int64:
    case DataType::Uint64: put(uint64_t{1}); break;
    case DataType::Float16: put(fp::floatToHalf(1.0f)); break;
    case DataType::Bfloat16: put(fp::floatToBf16(1.0f)); break;
    case DataType::Float32: put(1.0f); break;
    case DataType::Float64: put(1.0); break;
    case DataType::Fp8E4M3: put(fp::floatToE4M3(1.0f)); break;
    case DataType::Fp8E5M2: put(fp::floatToE5M2(1.0f)); break;
  }
}

}  // namespace

void combineLocal(const ReduceOp& op, void* out, const void* lower, const void* upper, size_t count) {
  if (op.combine == ReduceOp::Combine::Affine && out == upper) {
    // Affine reads the upper operand's decays while it writes: combine from a copy of it.
    const size_t bytes = count * dataTypeSize(op.type);
    std::vector<unsigned char> copy(static_cast<const unsigned char*>(upper), static_cast<const unsigned char*>(upper) + bytes);
    prims::combineOrdered(op, out, lower, copy.data(), count, 0, copy.data());
    return;
  }
  if (op.ordered()) {
    prims::combineOrdered(op, out, lower, upper, count, 0, upper);
    return;
  }
  prims::combinePartials(op, out, lower, upper, count, /*applyPost=*/false);
}

Status writeScanIdentity(const ReduceOp& op, void* out, size_t count) {
  auto* o = static_cast<unsigned char*>(out);
  const size_t elt = dataTypeSize(op.type);
  switch (op.combine) {
    case ReduceOp::Combine::Affine: return prims::writeIdentity(op, out, count);
    case ReduceOp::Combine::User:
      return Status::error(Errc::InvalidUsage, "a user op has no identity for an exclusive scan's first rank");
    case ReduceOp::Combine::Sum: std::memset(o, 0, count * elt); return Status();
    case ReduceOp::Combine::Prod:
    case ReduceOp::Combine::Max:
    case ReduceOp::Combine::Min: {
      unsigned char v[8];
      if (op.combine == ReduceOp::Combine::Prod) one(op.type, v);
      else extreme(op.type, op.combine == ReduceOp::Combine::Max, v);
      for (size_t i = 0; i < count; ++i) std::memcpy(o + i * elt, v, elt);
      return Status();
    }
  }
  return Status();
}

Status finishEmptyPrefix(const ReduceOp& op, char* out, size_t count) {
  if (op.combine == ReduceOp::Combine::User) return Status();  // left as it was (conflux.h documents it)
  return writeScanIdentity(op, out, count);
}

Result<const char*> scanInput(const CollArgs& args, bool separate, ScratchBlock* keep) {
  const auto* in = static_cast<const char*>(args.sendbuff);
  if (!separate || in != args.recvbuff) return in;
  const size_t bytes = args.count * dataTypeSize(args.type);
  CFX_TRY_ASSIGN(*keep, takeScratch(bytes));
  std::memcpy(keep->data(), in, bytes);
  return static_cast<const char*>(keep->data());
}

ScanGroup ScanGroup::ofAll(int nRanks, int rank) {
  ScanGroup g;
  for (int r = 0; r < nRanks; ++r) g.ranks.push_back(r);
  g.me = rank;
  return g;
}

Coro chainScan(const ScanGroup& g, const char* in, char* out, size_t count, const ReduceOp& op, bool exclusive,
               char* total, prims::Prims& prims) {
  const int n = g.n();
  const int p = g.me;
  const size_t elt = dataTypeSize(op.type);
  const int next = p + 1 < n ? g.ranks[static_cast<size_t>(p + 1)] : -1;
  const int prev = p > 0 ? g.ranks[static_cast<size_t>(p - 1)] : -1;
  // Two slices a piece, as the chain broadcast: every piece fits a FIFO, so the chain pipelines slice by slice.
  const size_t pieceElems = std::max<size_t>(1, 2 * prims.unitSliceBytes() / elt);
  for (size_t first = 0; n > 1 && first < count; first += pieceElems) {
    const size_t len = std::min(pieceElems, count - first);
    const char* mine = in + first * elt;
    char* dst = out + first * elt;
    if (p == 0) {
      CFX_CO_TRY(co_await prims.send(next, mine, len * elt));
      if (!exclusive && dst != mine) std::memcpy(dst, mine, len * elt);
    } else if (exclusive && next >= 0) {
      CFX_CO_TRY(co_await prims.recvCopyReduceSend(prev, next, mine, dst, len, op, first));
    } else if (exclusive) {
      CFX_CO_TRY(co_await prims.recv(prev, dst, len * elt));
    } else if (next >= 0) {
      CFX_CO_TRY(co_await prims.recvReduceCopySendAt(prev, next, mine, dst, len, op, first));
    } else {
      CFX_CO_TRY(co_await prims.recvReduceCopyAt(prev, mine, dst, len, op, first));
    }
  }
  if (n == 1 && !exclusive && out != in) std::memcpy(out, in, count * elt);
  if (total != nullptr) {
    // The group's last position folds its own value into the prefix it kept (its first position has no prefix).
    if (p == 0) std::memcpy(total, in, count * elt);
    else if (exclusive) combineLocal(op, total, out, in, count);
    else std::memcpy(total, out, count * elt);
  }
  co_return Status();
}

Coro doublingScan(const ScanGroup& g, const char* in, char* out, size_t count, const ReduceOp& op, bool exclusive,
                  bool* outEmpty, prims::Prims& prims) {
  const int n = g.n();
  const int p = g.me;
  const size_t bytes = count * dataTypeSize(op.type);
  CFX_CO_TRY_ASSIGN(ScratchBlock accBlock, takeScratch(bytes));
  CFX_CO_TRY_ASSIGN(ScratchBlock tmpBlock, takeScratch(bytes));
  char* acc = accBlock.data();
  char* tmp = tmpBlock.data();
  std::memcpy(acc, in, bytes);
  // The exclusive prefix grows in `out` itself (the input was copied into acc first); empty until the first arrival.
  bool empty = true;
  for (int d = 1; d < n; d <<= 1) {
    std::vector<Coro> strands;
    if (p + d < n) strands.push_back(verbStrand(prims.send(g.ranks[static_cast<size_t>(p + d)], acc, bytes)));
    if (p - d >= 0) strands.push_back(verbStrand(prims.recv(g.ranks[static_cast<size_t>(p - d)], tmp, bytes)));
    CFX_CO_TRY(co_await prims::Parallel(std::move(strands)));
    if (p - d < 0) continue;
    // What arrived covers the positions just before this rank's partial: it goes on the left of both.
    if (exclusive) {
      if (empty) std::memcpy(out, tmp, bytes);
      else combineLocal(op, out, tmp, out, count);
      empty = false;
    }
    combineLocal(op, acc, tmp, acc, count);
  }
  if (!exclusive) std::memcpy(out, acc, bytes);
  if (outEmpty != nullptr) *outEmpty = exclusive && empty;
  co_return Status();
}

}  // namespace cfx::coll
