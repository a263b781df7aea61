// SPDX-License-Identifier: Apache-2.0
// Delta broadcast (collectives layer): the root sends only what changed since the last broadcast of this buffer,
// and every rank rebuilds the new state bit for bit (cfxBroadcastDelta; compress/sparse_delta.h has the encodings).
//
// Every rank keeps the state of the last delta broadcast of the buffer (core keeps it, DeltaArgs::previous). Steps:
//   1. all-gather every rank's hash of its previous state (a 24-byte record: has-state flag, XXH3-128), so every
//      rank knows whether all of them hold the root's previous state;
//   2. the root compares its buffer with that state and picks the smallest encoding (an index list, a bitmap, or
//      the whole buffer, which it must send when some rank lacks the state); it broadcasts a header (encoding,
//      changed elements, payload bytes, the new state's hash) down the chain, then the payload;
//   3. every rank applies the payload to its previous state (the whole buffer lands there directly), checks the
//      new state's hash against the root's, and copies it into its receive buffer.
// A payload that does not decode, or a state whose hash differs, fails the op on that rank and forgets its state,
// so the next call resends the whole buffer. Cost: the all-gather and the header are n - 1 small hops each; the
// payload travels the chain once (broadcast_chain.cc), pipelined by slices.
#include <cstring>

#include "collectives/collective.h"
#include "collectives/scratch.h"
#include "compress/sparse_delta.h"
#include "faulttol/state_hash.h"

namespace cfx::coll {

namespace {

struct Record {
  uint64_t has;
  uint64_t hash[2];
};

struct Header {
  uint64_t mode;
  uint64_t changed;
  uint64_t bytes;
  uint64_t hash[2];  // of the new state
};

void hashOf(const void* p, size_t bytes, uint64_t out[2]) {
  ft::StateHasher h;
  h.update(p, bytes);
  const ft::StateHash d = h.digest();
  out[0] = d.low;
  out[1] = d.high;
}

// A chain broadcast of `bytes` at `buf` (the root's data there; every other rank's arrives there).
Coro chainBytes(void* buf, size_t bytes, int root, prims::Prims& prims) {
  CollArgs a;
  a.coll = Collective::Broadcast;
  a.sendbuff = buf;
  a.recvbuff = buf;
  a.count = bytes;
  a.type = DataType::Uint8;
  a.root = root;
  co_return co_await broadcastChain(a, Plan{Algorithm::Chain}, prims);
}

}  // namespace

Coro broadcastDeltaChain(const CollArgs& args, Plan, prims::Prims& prims) {
  DeltaArgs& d = *args.delta;
  const int n = prims.nRanks();
  const int r = prims.rank();
  const size_t elt = dataTypeSize(args.type);
  const size_t bytes = args.count * elt;
  const bool root = r == args.root;

  // 1. Who holds the root's previous state.
  std::vector<Record> records(static_cast<size_t>(n));
  records[static_cast<size_t>(r)] = Record{d.hasPrevious ? 1u : 0u, {d.previousHash[0], d.previousHash[1]}};
  CollArgs gather;
  gather.coll = Collective::AllGather;
  gather.sendbuff = &records[static_cast<size_t>(r)];
  gather.recvbuff = records.data();
  gather.count = sizeof(Record);
  gather.type = DataType::Uint8;
  CFX_CO_TRY(co_await allGatherRing(gather, Plan{Algorithm::Ring}, prims));
  const Record& rootRecord = records[static_cast<size_t>(args.root)];
  bool everyoneHasIt = rootRecord.has != 0;
  for (const Record& rec : records) {
    everyoneHasIt = everyoneHasIt && rec.has != 0 && rec.hash[0] == rootRecord.hash[0] && rec.hash[1] == rootRecord.hash[1];
  }

  // 2. The root's encoding, and the header.
  Header h{};
  ScratchBlock payload;
  if (root) {
    compress::DeltaPlan plan;
    if (everyoneHasIt) {
      plan = compress::planDelta(args.sendbuff, d.previous, args.count, elt);
    } else {
      plan.mode = compress::DeltaMode::Full;
      plan.changed = args.count;
      plan.bytes = bytes;
    }
    h = Header{static_cast<uint64_t>(plan.mode), plan.changed, plan.bytes, {0, 0}};
    hashOf(args.sendbuff, bytes, h.hash);
    if (plan.mode != compress::DeltaMode::Full) {
      CFX_CO_TRY_ASSIGN(payload, takeScratch(plan.bytes));
      compress::encodeDelta(plan, args.sendbuff, d.previous, args.count, elt, payload.data());
    }
  }
  CFX_CO_TRY(co_await chainBytes(&h, sizeof(h), args.root, prims));
  const auto mode = static_cast<compress::DeltaMode>(h.mode);
  if (h.mode > static_cast<uint64_t>(compress::DeltaMode::Bitmap) ||
      h.bytes != compress::deltaBytes(mode, h.changed, args.count, elt) || (!everyoneHasIt && mode != compress::DeltaMode::Full)) {
    d.hasPrevious = false;
    co_return Status::error(Errc::RemoteError,
                            strprintf("delta broadcast from rank %d: a header this rank cannot apply (encoding %llu, "
                                      "%llu bytes); the next call sends the whole buffer",
                                      args.root, static_cast<unsigned long long>(h.mode),
                                      static_cast<unsigned long long>(h.bytes)));
  }
  d.mode = static_cast<int>(mode);
  d.changed = h.changed;
  d.payloadBytes = h.bytes;

  // 3. The payload: the whole buffer straight into the previous state, or an encoding through scratch.
  if (mode == compress::DeltaMode::Full) {
    if (root) std::memcpy(d.previous, args.sendbuff, bytes);
    CFX_CO_TRY(co_await chainBytes(d.previous, bytes, args.root, prims));
  } else {
    if (!root) {
      CFX_CO_TRY_ASSIGN(payload, takeScratch(h.bytes));
    }
    CFX_CO_TRY(co_await chainBytes(payload.data(), h.bytes, args.root, prims));
    // The root too applies the payload to its kept state: it touches only the changed elements, where a copy of
    // the buffer would pass over all of them.
    if (Status st = compress::applyDelta(mode, payload.data(), h.bytes, h.changed, d.previous, args.count, elt);
        !st.ok()) {
      d.hasPrevious = false;
      co_return Status::error(Errc::RemoteError, strprintf("delta broadcast from rank %d: %s; the next call sends the "
                                                           "whole buffer", args.root, st.message().c_str()));
    }
  }
  uint64_t now[2];
  if (root) {
    now[0] = h.hash[0];
    now[1] = h.hash[1];
  } else {
    hashOf(d.previous, bytes, now);
  }
  if (now[0] != h.hash[0] || now[1] != h.hash[1]) {
    d.hasPrevious = false;
    co_return Status::error(Errc::RemoteError,
                            strprintf("delta broadcast from rank %d: the rebuilt state's hash differs from the root's; "
                                      "the next call sends the whole buffer", args.root));
  }
  d.hasPrevious = true;
  d.previousHash[0] = now[0];
  d.previousHash[1] = now[1];
  if (args.recvbuff != d.previous) std::memmove(args.recvbuff, d.previous, bytes);
  co_return Status();
}

}  // namespace cfx::coll
