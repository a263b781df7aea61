// SPDX-License-Identifier: Apache-2.0
// What every message of a collective says about its call (prims/op_stamp.h): the kind a receiver can name
// (collective, datatype, op) and a digest of the rest every rank must agree on.
#include <string>

#include "collectives/collective.h"
#include "collectives/moe.h"
#include "common/status.h"

namespace cfx::coll {

namespace {

// The op as the kind carries it (4 bits). 0: a collective that does not reduce.
enum class OpClass : uint32_t { None, Sum, Prod, Max, Min, IntAvg, ScaledSum, Affine, User };
constexpr const char* kOpClassNames[] = {"",   "sum", "prod", "max", "min", "avg", "sum with a pre-multiplier",
                                         "affine", "user op"};

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter ||
         c == Collective::Scan;
}

OpClass opClass(const CollArgs& args) {
  if (!reduces(args.coll)) return OpClass::None;
  const ReduceOp& op = args.op;
  switch (op.combine) {
    case ReduceOp::Combine::Sum:
      // A float avg is a sum of inputs pre-multiplied by 1/n (types.cc), as a PreMulSum is: the wire cannot tell
      // them apart, and ranks that mix them still agree on one result.
      if (op.preMultiply) return OpClass::ScaledSum;
      return op.postDivide ? OpClass::IntAvg : OpClass::Sum;
    case ReduceOp::Combine::Prod: return OpClass::Prod;
    case ReduceOp::Combine::Max: return OpClass::Max;
    case ReduceOp::Combine::Min: return OpClass::Min;
    case ReduceOp::Combine::Affine: return OpClass::Affine;
    case ReduceOp::Combine::User: return OpClass::User;
  }
  return OpClass::None;
}

// A digest of a few words, a multiply and a shift per word: it runs on every op, and needs to tell calls apart,
// not resist anyone.
struct Mix {
  uint64_t h = 0x243f6a8885a308d3ull;
  void mix(uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  uint32_t digest31() const { return static_cast<uint32_t>(h ^ (h >> 32)) & 0x7fffffffu; }
};

}  // namespace

bool rootedCollective(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather ||
         c == Collective::Scatter || c == Collective::BroadcastDelta;
}

prims::OpStamp opStamp(const CollArgs& args) {
  prims::OpStamp s;
  s.kind = (static_cast<uint32_t>(args.coll) + 1) | (static_cast<uint32_t>(args.type) << 4) |
           (static_cast<uint32_t>(opClass(args)) << 8);
  Mix f;
  f.mix(args.count);
  if (rootedCollective(args.coll)) f.mix(static_cast<uint64_t>(args.root));
  if (args.coll == Collective::Scan) f.mix(args.exclusive ? 1 : 0);
  // A MoE handle's exchange and its dispatch share a collective; the configuration is not mixed in, because the
  // ops swap it themselves and refuse a mismatch by name (hidden, dtype) as ncclInvalidArgument. All-to-all-v's
  // sizes differ by rank and show in each message's size instead.
  if (args.moe != nullptr) f.mix(static_cast<uint64_t>(args.moe->phase));
  const ReduceOp& op = args.op;
  if (op.combine == ReduceOp::Combine::Affine) {
    f.mix(op.rows);
    f.mix(op.cols);
    f.mix(op.scalarDecay ? 1 : 0);
  }
  if (op.combine == ReduceOp::Combine::User) f.mix(op.unitElems);
  if (args.compress != nullptr) {
    f.mix(args.compress->codec.signature());
    f.mix(static_cast<uint64_t>(args.compress->mode));
    f.mix(args.compress->average ? 1 : 0);
  }
  s.params = f.digest31();
  return s;
}

std::string stampKindName(uint32_t kind) {
  const uint32_t c = kind & 0xf;
  const uint32_t t = (kind >> 4) & 0xf;
  const uint32_t o = (kind >> 8) & 0xf;
  if (c == 0 || c > kNumCollectives || t >= static_cast<uint32_t>(kNumDataTypes) || o > 8) {
    return strprintf("an unknown op (kind %#x)", kind);
  }
  std::string s = collectiveName(static_cast<Collective>(c - 1));
  s += "(";
  if (o != 0) s += std::string(kOpClassNames[o]) + ", ";
  s += dataTypeName(static_cast<DataType>(t));
  return s + ")";
}

std::string describeCall(const CollArgs& args) {
  const OpClass o = opClass(args);
  std::string s = collectiveName(args.coll);
  if (args.coll == Collective::Scan && args.exclusive) s = "ExScan";
  s += "(";
  if (o != OpClass::None) s += std::string(kOpClassNames[static_cast<uint32_t>(o)]) + ", ";
  if (args.alltoallv != nullptr) {
    return s + strprintf("%s, sends %zu B, receives %zu B)", dataTypeName(args.type), args.alltoallv->sendExtent,
                         args.alltoallv->recvExtent);
  }
  if (args.moe != nullptr) {
    constexpr const char* kPhases[] = {"exchange", "dispatch", "bounded dispatch", "combine"};
    return s + strprintf("%s, %s, %zu tokens)", dataTypeName(args.type),
                         kPhases[static_cast<size_t>(args.moe->phase)], args.moe->nTokens);
  }
  s += strprintf("%s, count %zu", dataTypeName(args.type), args.count);
  if (rootedCollective(args.coll)) s += strprintf(", root %d", args.root);
  if (args.op.combine == ReduceOp::Combine::Affine) {
    s += strprintf(", %ux%u%s", args.op.rows, args.op.cols, args.op.scalarDecay ? " scalar decay" : "");
  }
  if (args.op.combine == ReduceOp::Combine::User) s += strprintf(", units of %u", args.op.unitElems);
  if (args.compress != nullptr) s += ", codec " + compress::codecText(args.compress->codec.spec());
  return s + ")";
}

}  // namespace cfx::coll
