// SPDX-License-Identifier: Apache-2.0
#include "core/call_check.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/status.h"

namespace cfx::core {

namespace {

// What one rank was called with: the stamp and, spelled out for the message, the count and root.
struct CallRecord {
  uint32_t kind = 0;
  uint32_t params = 0;
  uint64_t count = 0;
  int64_t root = 0;
};

// The stamp kind of the check's own messages: outside every collective's (coll::opStamp uses 1..15 in its low bits).
constexpr uint32_t kCheckKind = 0xff0;

std::string describe(const CallRecord& r, bool rooted) {
  const std::string kind = coll::stampKindName(r.kind);  // "Name(op, type)": the count and root go inside
  const size_t close = kind.rfind(')');
  const std::string extra = strprintf(", count %llu", static_cast<unsigned long long>(r.count)) +
                            (rooted ? strprintf(", root %lld", static_cast<long long>(r.root)) : std::string());
  if (close == std::string::npos) return kind + " (" + extra.substr(2) + ")";
  return kind.substr(0, close) + extra + kind.substr(close);
}

}  // namespace

prims::Coro checkCall(const coll::CollArgs& args, uint32_t seq, prims::Prims& prims) {
  const int n = prims.nRanks();
  const int me = prims.rank();
  const prims::OpStamp stamp = coll::opStamp(args);
  const prims::OpNaming* naming = prims.opNaming();
  std::vector<CallRecord> all(static_cast<size_t>(n));
  all[static_cast<size_t>(me)] = CallRecord{stamp.kind, stamp.params, args.count, args.root};
  coll::CollArgs gather;
  gather.coll = coll::Collective::AllGather;
  gather.sendbuff = &all[static_cast<size_t>(me)];
  gather.recvbuff = all.data();
  gather.count = sizeof(CallRecord);
  gather.type = DataType::Uint8;
  prims.setOpSeq(seq);
  prims.setSliceUnit(1);
  prims.setOpStamp({kCheckKind, 0}, nullptr);
  Status st = co_await coll::allGatherRing(gather, coll::Plan{coll::Algorithm::Ring}, prims);
  prims.setOpStamp(stamp, naming);
  CFX_CO_TRY(std::move(st));
  bool same = true;
  for (const CallRecord& r : all) same = same && r.kind == stamp.kind && r.params == stamp.params;
  if (same) co_return Status();
  // Ranks grouped by identical calls, in rank order of each group's first rank.
  std::vector<int> groupOf(static_cast<size_t>(n), -1);
  std::string text;
  std::vector<std::string> seen;
  bool alike = false;  // two groups whose calls print the same: they differ where the text does not show
  for (int r = 0; r < n; ++r) {
    if (groupOf[static_cast<size_t>(r)] >= 0) continue;
    const CallRecord& a = all[static_cast<size_t>(r)];
    std::string ranks;
    int members = 0;
    for (int q = r; q < n; ++q) {
      const CallRecord& b = all[static_cast<size_t>(q)];
      if (groupOf[static_cast<size_t>(q)] < 0 && b.kind == a.kind && b.params == a.params) {
        groupOf[static_cast<size_t>(q)] = r;
        if (members++ > 0) ranks += ',';
        ranks += std::to_string(q);
      }
    }
    const uint32_t which = a.kind & 0xf;  // coll::opStamp: the collective + 1
    const auto c = static_cast<coll::Collective>(which - 1);
    const bool rooted = which != 0 && coll::rootedCollective(c);
    // All-to-all-v and MoE have no count (their sizes differ by rank): the kind alone names them.
    const bool shaped = which != 0 && (c == coll::Collective::AllToAllv || c == coll::Collective::MoeDispatch ||
                                       c == coll::Collective::MoeCombine);
    const std::string call = shaped ? coll::stampKindName(a.kind) : describe(a, rooted);
    for (const std::string& other : seen) alike = alike || other == call;
    seen.push_back(call);
    text += strprintf("%s%s %s: %s", text.empty() ? "" : "; ", members > 1 ? "ranks" : "rank", ranks.c_str(),
                      call.c_str());
  }
  co_return Status::error(
      Errc::InvalidUsage,
      strprintf("mismatched operation across ranks (CFX_CHECK_CALLS): %s; this rank (%d) called %s%s", text.c_str(), me,
                coll::describeCall(args).c_str(),
                alike ? " (calls printed alike differ in their codec, scan mode, MoE phase or op shape)" : ""));
}

}  // namespace cfx::core
