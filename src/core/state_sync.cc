// SPDX-License-Identifier: Apache-2.0
// Shared-state synchronisation (core layer): see state_sync.h for the protocol and its cost.
#include "core/state_sync.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/log.h"
#include "core/group.h"

namespace cfx::core {

namespace {

// What each member tells the others in the first all-gather. Plain words: all members run the same build.
struct Digest {
  uint64_t layoutLow;
  uint64_t layoutHigh;
  uint64_t stateLow;
  uint64_t stateHigh;
  uint64_t totalBytes;
};

ft::StateHash layoutHash(const std::vector<StateBuffer>& entries) {
  ft::StateHasher h;
  const uint64_t n = entries.size();
  h.update(&n, sizeof(n));
  for (const StateBuffer& e : entries) {
    const uint64_t words[2] = {static_cast<uint64_t>(e.bytes), static_cast<uint64_t>(e.dataType)};
    h.update(words, sizeof(words));
  }
  return h.digest();
}

// One all-gather of `bytesPerRank` per member over the data path, so a dead peer is a named error like any op's.
Status allGatherBytes(Communicator& comm, const void* mine, void* all, size_t bytesPerRank) {
  Op op;
  op.kind = Op::Kind::Coll;
  op.comm = &comm;
  op.args.coll = coll::Collective::AllGather;
  op.args.sendbuff = mine;
  op.args.recvbuff = all;
  op.args.count = bytesPerRank;
  op.args.type = DataType::Uint8;
  op.args.op = ReduceOp::builtin(DataType::Uint8, RedOpKind::Sum, comm.nRanks());
  return submit(op);
}

Status sendOrRecv(Communicator& comm, Op::Kind kind, const StateBuffer& e, int peer) {
  Op op;
  op.kind = kind;
  op.comm = &comm;
  op.sendbuff = kind == Op::Kind::Send ? e.data : nullptr;
  op.recvbuff = kind == Op::Kind::Recv ? e.data : nullptr;
  op.bytes = e.bytes;
  op.peer = peer;
  return submit(op);
}

// Moves every entry from each source to the out-of-date members it serves, as one group.
Status transfer(Communicator& comm, const std::vector<StateBuffer>& entries, const std::vector<int>& sourceOf) {
  groupStart();
  Status first;
  for (int r = 0; r < comm.nRanks(); ++r) {
    const int src = sourceOf[static_cast<size_t>(r)];
    if (src < 0) continue;
    const bool iSend = src == comm.rank();
    const bool iRecv = r == comm.rank();
    if (!iSend && !iRecv) continue;
    for (const StateBuffer& e : entries) {
      if (e.bytes == 0) continue;
      Status st = iSend ? sendOrRecv(comm, Op::Kind::Send, e, r) : sendOrRecv(comm, Op::Kind::Recv, e, src);
      if (!st.ok() && first.ok()) first = std::move(st);
    }
  }
  Status end = groupEnd();
  return first.ok() ? end : first;
}

}  // namespace

ft::StateHash hashState(const std::vector<StateBuffer>& entries) {
  ft::StateHasher h;
  for (const StateBuffer& e : entries) h.update(e.data, e.bytes);
  return h.digest();
}

Result<StateSyncOutcome> syncSharedState(Communicator& comm, const std::vector<StateBuffer>& entries) {
  const int n = comm.nRanks();
  const int me = comm.rank();
  const ft::StateHash layout = layoutHash(entries);
  const ft::StateHash mine = hashState(entries);
  Digest own{layout.low, layout.high, mine.low, mine.high, 0};
  for (const StateBuffer& e : entries) own.totalBytes += e.bytes;
  std::vector<Digest> all(static_cast<size_t>(n));
  CFX_TRY(allGatherBytes(comm, &own, all.data(), sizeof(Digest)));

  for (int r = 0; r < n; ++r) {
    const Digest& d = all[static_cast<size_t>(r)];
    if (d.layoutLow != all[0].layoutLow || d.layoutHigh != all[0].layoutHigh) {
      return Status::error(Errc::InvalidUsage,
                           strprintf("cfxSharedStateSync: rank %d's state has another layout than rank 0's (%llu "
                                     "against %llu bytes, or other entry counts, sizes or datatypes): every rank "
                                     "must pass the same entries",
                                     r, static_cast<unsigned long long>(d.totalBytes),
                                     static_cast<unsigned long long>(all[0].totalBytes)));
    }
  }

  // The majority digest; ties go to the digest whose lowest holder has the lowest rank (the first one met).
  auto keyOf = [&](int r) {
    return std::make_pair(all[static_cast<size_t>(r)].stateLow, all[static_cast<size_t>(r)].stateHigh);
  };
  std::map<std::pair<uint64_t, uint64_t>, int> votes;
  for (int r = 0; r < n; ++r) ++votes[keyOf(r)];
  // Digests are met at their lowest holder in rank order, so "strictly more" keeps the earliest among equals.
  std::pair<uint64_t, uint64_t> best = keyOf(0);
  int bestVotes = 0;
  for (int r = 0; r < n; ++r) {
    const int v = votes[keyOf(r)];
    if (v > bestVotes) {
      bestVotes = v;
      best = keyOf(r);
    }
  }
  std::vector<int> holders, outdated;
  for (int r = 0; r < n; ++r) {
    (keyOf(r) == best ? holders : outdated).push_back(r);
  }
  StateSyncOutcome out;
  out.hash = ft::StateHash{best.first, best.second};
  out.outdated = static_cast<int>(outdated.size());
  if (outdated.empty()) return out;

  std::vector<int> sourceOf(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < outdated.size(); ++i) {
    sourceOf[static_cast<size_t>(outdated[i])] = holders[i % holders.size()];
  }
  CFX_INFO(log::Sys::Init, "cfxSharedStateSync: %zu of %d ranks hold state %s; %zu are brought up to date (%llu bytes)",
           holders.size(), n, out.hash.hex().c_str(), outdated.size(),
           static_cast<unsigned long long>(own.totalBytes));
  CFX_TRY(transfer(comm, entries, sourceOf));

  uint64_t failed = 0;
  if (sourceOf[static_cast<size_t>(me)] >= 0) {
    out.replaced = true;
    out.source = sourceOf[static_cast<size_t>(me)];
    out.bytesReceived = own.totalBytes;
    const ft::StateHash got = hashState(entries);
    if (!(got == out.hash)) {
      failed = 1;
      CFX_WARN("cfxSharedStateSync: the state received from rank %d hashes to %s, not to the majority's %s",
               out.source, got.hex().c_str(), out.hash.hex().c_str());
    }
  }
  std::vector<uint64_t> verdicts(static_cast<size_t>(n));
  CFX_TRY(allGatherBytes(comm, &failed, verdicts.data(), sizeof(uint64_t)));
  std::string bad;
  for (int r = 0; r < n; ++r) {
    if (verdicts[static_cast<size_t>(r)] != 0) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!bad.empty()) {
    return Status::error(Errc::RemoteError,
                         strprintf("cfxSharedStateSync: rank(s) %s received state that does not hash to the "
                                   "majority's %s (memory changed during the call, or a corrupt transfer)",
                                   bad.c_str(), out.hash.hex().c_str()));
  }
  return out;
}

}  // namespace cfx::core
