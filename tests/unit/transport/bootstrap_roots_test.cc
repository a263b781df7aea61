// SPDX-License-Identifier: Apache-2.0
// Bootstrap through several roots (ncclCommInitRankScalable's ids, UniqueId::allIds), ranks as threads of one
// process over loopback: the groups, the communicator they form, that every root serves its group, and the errors
// of a bad id set.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../../free_port.h"
#include "bootstrap_test_util.h"
#include "common/socket.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/root.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport {
namespace {

using std::chrono::milliseconds;

// m fresh ids (each with its root running in this process), the first carrying all of them.
UniqueId severalIds(int m, const BootstrapOptions& options) {
  UniqueId first;
  for (int k = 0; k < m; ++k) {
    Result<UniqueId> id = createUniqueId(options);
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (!id.ok()) return {};
    first.allIds.push_back(*id);
  }
  UniqueId out = first.allIds[0];
  out.allIds = std::move(first.allIds);
  return out;
}

TEST(BootstrapGroupsTest, GroupsPartitionTheRanksEvenly) {
  for (int n = 1; n <= 300; n += (n < 20 ? 1 : 37)) {
    for (int m = 1; m <= n && m <= 40; ++m) {
      int next = 0;
      for (int g = 0; g < m; ++g) {
        const boot::GroupRange r = boot::groupRange(g, n, m);
        ASSERT_EQ(r.first, next) << n << " ranks, " << m << " groups, group " << g;
        ASSERT_GE(r.count, n / m);
        ASSERT_LE(r.count, n / m + 1);
        for (int rank = r.first; rank < r.first + r.count; ++rank) ASSERT_EQ(boot::groupOf(rank, n, m), g);
        next += r.count;
      }
      ASSERT_EQ(next, n);
    }
  }
}

// Every (ranks, roots) shape forms one communicator: the same session secret and table everywhere, a correct
// allGather and barrier; and every root served (its thread finished, having answered its group).
TEST(BootstrapRootsTest, SeveralRootsFormOneCommunicator) {
  const std::vector<std::pair<int, int>> shapes = {{2, 2}, {3, 2}, {5, 3}, {7, 4}, {16, 4}, {24, 3}};
  for (const auto& [n, m] : shapes) {
    SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(m) + " roots");
    const BootstrapOptions options = testing::bootstrapTestOptions();
    const UniqueId id = severalIds(m, options);
    ASSERT_EQ(id.allIds.size(), static_cast<size_t>(m));
    std::vector<std::shared_ptr<boot::RootDone>> roots;
    for (const UniqueId& one : id.allIds) {
      roots.push_back(boot::hostedRoot(one.magic));
      ASSERT_NE(roots.back(), nullptr);
    }
    auto ranks = testing::joinAll(id, n, options);
    std::set<std::string> addresses;
    for (const auto& b : ranks) {
      ASSERT_TRUE(b);
      EXPECT_EQ(b->nRanks(), n);
      EXPECT_EQ(b->secret(), ranks[0]->secret());
      EXPECT_TRUE(b->authenticated());
      addresses.insert(net::addressToString(b->localAddress()));
    }
    EXPECT_EQ(addresses.size(), static_cast<size_t>(n));
    for (int k = 0; k < m; ++k) {
      EXPECT_TRUE(roots[static_cast<size_t>(k)]->wait(milliseconds(10000))) << "root " << k << " never finished";
      EXPECT_EQ(boot::hostedRoot(id.allIds[static_cast<size_t>(k)].magic), nullptr) << "root " << k;
    }
    testing::runRankThreads(n, [&](int r) {
      Bootstrap& b = *ranks[static_cast<size_t>(r)];
      std::vector<uint32_t> data(static_cast<size_t>(n), 0);
      data[static_cast<size_t>(r)] = 7u * static_cast<uint32_t>(r) + 1;
      ASSERT_TRUE(b.allGather(data.data(), sizeof(uint32_t)).ok());
      for (int p = 0; p < n; ++p) EXPECT_EQ(data[static_cast<size_t>(p)], 7u * static_cast<uint32_t>(p) + 1);
      // Point-to-point across groups: the table every rank got holds every other rank's listen address.
      const int to = (r + n / 2 + 1) % n;
      const int from = ((r - n / 2 - 1) % n + n) % n;
      const uint32_t out = 1000u + static_cast<uint32_t>(r);
      uint32_t in = 0;
      ASSERT_TRUE(b.send(to, 5, &out, sizeof(out)).ok());
      ASSERT_TRUE(b.recv(from, 5, &in, sizeof(in)).ok());
      EXPECT_EQ(in, 1000u + static_cast<uint32_t>(from));
      EXPECT_TRUE(b.barrier().ok());
    });
  }
}

// The roots run NCCL_COMM_ID style (no root yet): each group's first rank serves its group's root inside init.
TEST(BootstrapRootsTest, EachGroupsFirstRankServesItsCommIdRoot) {
  const BootstrapOptions options = testing::bootstrapTestOptions();
  UniqueId id;
  for (int k = 0; k < 3; ++k) {
    const uint16_t port = testports::freeLoopbackPort();
    ASSERT_NE(port, 0);
    const std::string where = "127.0.0.1:" + std::to_string(port);
    Result<UniqueId> one = uniqueIdFromAddress(where, "the job's secret", /*startRoot=*/true);
    ASSERT_TRUE(one.ok()) << one.status().message();
    id.allIds.push_back(*one);
  }
  const auto all = id.allIds;
  id = all[0];
  id.allIds = all;
  auto ranks = testing::joinAll(id, 7, options);
  for (const auto& b : ranks) {
    ASSERT_TRUE(b);
    EXPECT_EQ(b->secret(), ranks[0]->secret());
  }
}

TEST(BootstrapRootsTest, MoreIdsThanRanksIsInvalidArgument) {
  const BootstrapOptions options = testing::bootstrapTestOptions(milliseconds(2000));
  const UniqueId id = severalIds(3, options);
  Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(id, 0, 2, options);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Errc::InvalidArgument);
  EXPECT_NE(b.status().message().find("3 ids for 2 ranks"), std::string::npos) << b.status().message();
}

// A rank given the ids in another order joins the wrong root as the wrong group: it is refused, saying so, and the
// others fail within their deadline instead of forming a communicator without it.
TEST(BootstrapRootsTest, IdsInAnotherOrderAreRefusedNamingTheGroups) {
  const int n = 4;
  const BootstrapOptions options = testing::bootstrapTestOptions(milliseconds(2500));
  const UniqueId id = severalIds(2, options);
  UniqueId swapped = id.allIds[1];
  swapped.allIds = {id.allIds[1], id.allIds[0]};
  std::vector<Status> results(n);
  testing::runRankThreads(n, [&](int r) {
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(r == 3 ? swapped : id, r, n, options);
    results[static_cast<size_t>(r)] = b.ok() ? Status() : b.status();
  });
  bool named = false;
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(results[static_cast<size_t>(r)].ok()) << "rank " << r << " formed a communicator";
    const std::string& text = results[static_cast<size_t>(r)].message();
    named = named || text.find("this root serves group") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no rank was told its group does not match its root's";
}

// The leader of group 1 brings group 1's addresses to root 0; when group 0 never completes, group 0 and the leader
// time out naming the missing rank, and the rest of group 1 names it too (passed on by its leader) or, if its own
// deadline came first, names the leader it was waiting for.
TEST(BootstrapRootsTest, AMissingRankOfGroupZeroIsNamedInEveryGroup) {
  const int n = 4;
  const BootstrapOptions options = testing::bootstrapTestOptions(milliseconds(2500));
  const UniqueId id = severalIds(2, options);
  testing::runRankThreads(n, [&](int r) {
    if (r == 1) return;  // group 0 = ranks 0 and 1
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::init(id, r, n, options);
    ASSERT_FALSE(b.ok());
    const std::string& text = b.status().message();
    const bool named = text.find("missing rank 1") != std::string::npos ||
                       (r == 3 && text.find("rank 2, the leader of group 1") != std::string::npos);
    EXPECT_TRUE(named) << "rank " << r << ": " << text;
  });
}

}  // namespace
}  // namespace cfx::transport
