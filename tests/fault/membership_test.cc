// SPDX-License-Identifier: Apache-2.0
// Dynamic membership through the public C API, ranks as forked processes (integration layer): a group forms,
// admits joiners at epoch boundaries, loses members that leave, die or stop, keeps its communicator across
// unchanged boundaries and across a restarted master. (The wire's refusals are tested in member_master_test.)
#include "integration/multiproc.h"
#include "integration/nccl_checks.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <new>
#include <vector>

#include "conflux.h"

namespace cfx::itest {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0 of the job runs the master and hands its id to every rank. Collective.
ncclUniqueId shareMaster(RankContext& ctx, cfxMaster_t* master) {
  ncclUniqueId id{};
  if (ctx.rank() == 0) {
    EXPECT_TRUE(succeeded(cfxMasterStart(nullptr, &id, master)));
  }
  const std::string bytes =
      ctx.broadcast(0, std::string_view(reinterpret_cast<const char*>(&id), ctx.rank() == 0 ? sizeof(id) : 0));
  std::memcpy(&id, bytes.data(), std::min(bytes.size(), sizeof(id)));
  return id;
}

// Calls cfxMemberUpdate until the epoch has `n` members, as a job calls it between steps (a short pause stands for
// the step). Every member of one epoch sees the same size at the same boundary, so the members leave together.
ncclComm_t updateUntil(cfxMember_t m, int n, cfxEpochInfo* info) {
  ncclComm_t comm = nullptr;
  const auto giveUp = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < giveUp) {
    const ncclResult_t rc = cfxMemberUpdate(m, &comm, info);
    EXPECT_EQ(rc, ncclSuccess) << ncclGetLastError(nullptr);
    if (rc != ncclSuccess) return nullptr;
    if (info->nRanks == n) return comm;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ADD_FAILURE() << "the group never reached " << n << " members";
  return nullptr;
}

int sumOfJobRanks(ncclComm_t comm, int jobRank) {
  int32_t mine = jobRank + 1, sum = -1;
  EXPECT_TRUE(succeeded(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, comm, nullptr)));
  return sum;
}

TEST(Membership, GroupFormsAdmitsJoinersAndLosesLeaversAndTheDead) {
  runRanks(5, [](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    const ncclUniqueId masterId = shareMaster(ctx, &master);
    cfxMember_t member = nullptr;
    cfxEpochInfo info{};
    ncclComm_t comm = nullptr;

    // Ranks 0..2 form the group.
    if (me < 3) {
      ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
      comm = updateUntil(member, 3, &info);
      ASSERT_NE(comm, nullptr);
      EXPECT_EQ(sumOfJobRanks(comm, me), 1 + 2 + 3);
      // An unchanged boundary keeps the communicator.
      ncclComm_t again = nullptr;
      cfxEpochInfo same{};
      ASSERT_TRUE(succeeded(cfxMemberUpdate(member, &again, &same)));
      EXPECT_EQ(same.changed, 0);
      EXPECT_EQ(same.epoch, info.epoch);
      EXPECT_EQ(again, comm);
    }
    ctx.barrier();

    // Ranks 3 and 4 join the running group; the members keep their ranks and the joiners follow them.
    const int beforeRank = info.rank;
    if (me >= 3) {
      ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
    }
    comm = updateUntil(member, 5, &info);
    ASSERT_NE(comm, nullptr);
    if (me < 3) {
      EXPECT_EQ(info.rank, beforeRank) << "members keep their order";
    }
    if (me >= 3) {
      EXPECT_GE(info.rank, 3) << "joiners come after the members";
    }
    EXPECT_EQ(sumOfJobRanks(comm, me), 15);
    // The joiners hold no state yet: a shared-state sync brings them the majority's bytes.
    std::vector<float> weights(1001, me < 3 ? 2.5f : 0.0f);
    cfxStateEntry entry{weights.data(), weights.size(), ncclFloat32};
    cfxStateSyncInfo sync{};
    ASSERT_TRUE(succeeded(cfxSharedStateSync(comm, &entry, 1, &sync)));
    EXPECT_EQ(sync.nOutdated, 2);
    EXPECT_EQ(weights, std::vector<float>(1001, 2.5f));
    ctx.barrier();

    // Rank 4 leaves; the others go on with four.
    if (me == 4) {
      EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
      return;
    }
    comm = updateUntil(member, 4, &info);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(info.left, 1);
    EXPECT_EQ(sumOfJobRanks(comm, me), 1 + 2 + 3 + 4);

    // Rank 3 dies; the others go on with three. Its all-reduce returned only once every member's had ended (all-or-
    // nothing), so its death cannot touch theirs.
    if (me == 3) ctx.killSelf(SIGKILL);
    comm = updateUntil(member, 3, &info);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(sumOfJobRanks(comm, me), 1 + 2 + 3);
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    if (me == 0) {
      EXPECT_TRUE(succeeded(cfxMasterStop(master)));
    }
  });
}

TEST(Membership, ARestartedMasterContinuesTheEpochWithoutRebuilding) {
  runRanks(3, [](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    const ncclUniqueId masterId = shareMaster(ctx, &master);
    cfxMember_t member = nullptr;
    ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
    cfxEpochInfo info{};
    ncclComm_t comm = updateUntil(member, 3, &info);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(sumOfJobRanks(comm, me), 6);  // collective #1, decided by the first master
    ctx.barrier();
    if (me == 0) {
      // The master process "restarts": a new master on the same address and secret, knowing nothing.
      ASSERT_TRUE(succeeded(cfxMasterStop(master)));
      ncclUniqueId again{};
      ASSERT_TRUE(succeeded(cfxMasterStart(&masterId, &again, &master)));
      EXPECT_EQ(std::memcmp(&again, &masterId, sizeof(again)), 0) << "a restarted master keeps its id";
    }
    ctx.barrier();
    ncclComm_t after = nullptr;
    cfxEpochInfo next{};
    ASSERT_TRUE(succeeded(cfxMemberUpdate(member, &after, &next))) << ncclGetLastError(nullptr);
    EXPECT_EQ(next.changed, 0) << "the members are the same: the communicator stays";
    EXPECT_EQ(next.epoch, info.epoch);
    EXPECT_EQ(next.rank, info.rank);
    EXPECT_EQ(after, comm);
    EXPECT_EQ(sumOfJobRanks(after, me), 6);  // #2: the new master learnt #1's verdict from the members
    EXPECT_EQ(sumOfJobRanks(after, me), 6);
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    ctx.barrier();
    if (me == 0) {
      EXPECT_TRUE(succeeded(cfxMasterStop(master)));
    }
  });
}

TEST(Membership, AStoppedMemberIsDroppedAfterTheRoundTimeout) {
  RunOptions options;
  options.env = {{"CFX_MEMBER_ROUND_TIMEOUT_MS", "1500"}};
  options.failOnChildError = false;
  const RunResult result = runRanks(3, options, [](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    const ncclUniqueId masterId = shareMaster(ctx, &master);
    const std::vector<std::string> pids = ctx.allGather(std::to_string(::getpid()));
    cfxMember_t member = nullptr;
    ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
    cfxEpochInfo info{};
    ASSERT_NE(updateUntil(member, 3, &info), nullptr);
    ctx.barrier();
    if (me == 2) ctx.killSelf(SIGSTOP);  // hung: its connections stay open
    const auto t0 = Clock::now();
    ncclComm_t comm = updateUntil(member, 2, &info);
    const double waitedMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(info.left, 1);
    EXPECT_GE(waitedMs, 1400.0) << "the boundary waits for the round timeout";
    EXPECT_LT(waitedMs, 15000.0);
    EXPECT_EQ(sumOfJobRanks(comm, me), 1 + 2);
    ctx.report("droppedAfterMs", std::to_string(static_cast<int>(waitedMs)));
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    if (me == 0) {
      ::kill(std::stoi(pids[2]), SIGKILL);
      EXPECT_TRUE(succeeded(cfxMasterStop(master)));
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(result.ranks[r].exited && result.ranks[r].exitCode == 0) << result.ranks[r].describe();
  EXPECT_EQ(result.ranks[2].termSignal, SIGKILL);
}

// All-or-nothing: a member that refuses a collective (here: a bad datatype) makes it fail on every member, with the
// failing member named and in-place inputs given back.
TEST(Membership, ACollectiveThatFailsOnOneMemberFailsOnAllWithInputsRestored) {
  runRanks(3, [](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    const ncclUniqueId masterId = shareMaster(ctx, &master);
    cfxMember_t member = nullptr;
    ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
    cfxEpochInfo info{};
    ncclComm_t comm = updateUntil(member, 3, &info);
    ASSERT_NE(comm, nullptr);
    const int culprit = 1;  // epoch rank
    std::vector<float> data(4099);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(me * 10000 + i);
    const std::vector<float> input = data;
    const ncclDataType_t type = info.rank == culprit ? static_cast<ncclDataType_t>(99) : ncclFloat;
    const ncclResult_t rc = ncclAllReduce(data.data(), data.data(), data.size(), type, ncclSum, comm, nullptr);
    if (info.rank == culprit) {
      EXPECT_EQ(rc, ncclInvalidArgument);
    } else {
      // The others' transfers end when the culprit revokes (ncclRemoteError naming it), or a member that reaches
      // the call after the revoke is refused it as NCCL refuses ops on a revoked communicator (ncclInvalidUsage
      // naming the revoker); had their part finished, the verdict would name it.
      EXPECT_TRUE(rc == ncclRemoteError || rc == ncclInvalidUsage) << rc;
      const std::string text = ncclGetLastError(comm);
      EXPECT_TRUE(text.find("rank 1 revoked the communicator") != std::string::npos ||
                  text.find("revoked by rank 1") != std::string::npos ||
                  text.find("failed on member rank 1") != std::string::npos)
          << text;
      EXPECT_EQ(data, input) << "a failed in-place collective gives the input back";
    }
    // The refusal revoked the communicator (the others' transfers waited for the culprit's data); every member asks
    // for a new one at the boundary, and the retried step succeeds everywhere.
    cfxEpochInfo next{};
    ASSERT_TRUE(succeeded(cfxMemberUpdate(member, &comm, &next))) << ncclGetLastError(nullptr);
    EXPECT_EQ(next.changed, 1);
    EXPECT_EQ(next.nRanks, 3);
    EXPECT_EQ(next.left, 0);
    EXPECT_EQ(sumOfJobRanks(comm, me), 1 + 2 + 3);
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    ctx.barrier();
    if (me == 0) {
      EXPECT_TRUE(succeeded(cfxMasterStop(master)));
    }
  });
}

// All-or-nothing: a member dies inside an all-reduce, at a different moment each round (before it sent anything,
// mid-transfer, about when it finishes). Whatever each survivor's own transfers saw, all survivors end the same way:
// all succeed with the right sum, or all fail with their in-place input given back.
TEST(Membership, ADeathInsideACollectiveEndsItTheSameWayOnEverySurvivor) {
  constexpr int kRanks = 5;
  constexpr int kRounds = kRanks - 2;
  // outcome[round][job rank]: 0 not there, 1 success with the right result, 2 failure with the input restored,
  // 3 a wrong result or a failure that lost the input.
  auto* outcome = static_cast<std::atomic<int>*>(
      ::mmap(nullptr, sizeof(std::atomic<int>) * kRounds * kRanks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
             -1, 0));
  ASSERT_NE(outcome, MAP_FAILED);
  for (int i = 0; i < kRounds * kRanks; ++i) new (&outcome[i]) std::atomic<int>(0);
  RunOptions options;
  options.failOnChildError = false;
  options.env = {{"CFX_HEARTBEAT_MS", "100"}};
  const RunResult result = runRanks(kRanks, options, [&](RankContext& ctx) {
    const int me = ctx.rank();
    cfxMaster_t master = nullptr;
    const ncclUniqueId masterId = shareMaster(ctx, &master);
    cfxMember_t member = nullptr;
    ASSERT_TRUE(succeeded(cfxMemberJoin(&masterId, nullptr, &member)));
    for (int round = 0; round < kRounds; ++round) {
      const int n = kRanks - round;
      cfxEpochInfo info{};
      ncclComm_t comm = updateUntil(member, n, &info);
      ASSERT_NE(comm, nullptr);
      // Large enough that a transfer is under way when the victim dies; the victim is the job's highest live rank.
      std::vector<float> data(1 << 18);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((me + 1) * (i % 13 + 1));
      const std::vector<float> input = data;
      if (me == n - 1) {
        const auto after = std::chrono::microseconds(round * 700);
        std::thread([after] {
          std::this_thread::sleep_for(after);
          ::raise(SIGKILL);
        }).detach();
      }
      const ncclResult_t rc = ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat, ncclSum, comm, nullptr);
      if (me == n - 1) ctx.killSelf(SIGKILL);
      int sumOfMembers = 0;
      for (int r = 0; r < n; ++r) sumOfMembers += r + 1;
      bool right = true;
      for (size_t i = 0; i < data.size() && right; ++i) {
        right = data[i] == static_cast<float>(sumOfMembers * static_cast<int>(i % 13 + 1));
      }
      outcome[round * kRanks + me].store(rc == ncclSuccess ? (right ? 1 : 3) : (data == input ? 2 : 3));
    }
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    // Rank 0 holds the master: it stops it once every other survivor has left.
    if (me == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      EXPECT_TRUE(succeeded(cfxMasterStop(master)));
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(result.ranks[r].exited && result.ranks[r].exitCode == 0) << result.ranks[r].describe();
  }
  for (int round = 0; round < kRounds; ++round) {
    const int survivors = kRanks - round - 1;
    std::string seen;
    for (int r = 0; r < survivors; ++r) seen += std::to_string(outcome[round * kRanks + r].load());
    std::printf("round %d: survivors' outcomes %s (1 success, 2 failure with input restored)\n", round, seen.c_str());
    EXPECT_TRUE(seen == std::string(survivors, '1') || seen == std::string(survivors, '2'))
        << "round " << round << ": survivors ended differently: " << seen;
  }
  ::munmap(outcome, sizeof(std::atomic<int>) * kRounds * kRanks);
}

TEST(Membership, AGroupOfOneAndBadArguments) {
  runRanks(1, [](RankContext&) {
    cfxMaster_t master = nullptr;
    ncclUniqueId id{};
    EXPECT_EQ(cfxMasterStart(nullptr, nullptr, &master), ncclInvalidArgument);
    ASSERT_TRUE(succeeded(cfxMasterStart(nullptr, &id, &master)));
    cfxMember_t member = nullptr;
    EXPECT_EQ(cfxMemberJoin(nullptr, nullptr, &member), ncclInvalidArgument);
    ncclConfig_t nonBlocking = NCCL_CONFIG_INITIALIZER;
    nonBlocking.blocking = 0;
    EXPECT_EQ(cfxMemberJoin(&id, &nonBlocking, &member), ncclInvalidUsage);
    ASSERT_TRUE(succeeded(cfxMemberJoin(&id, nullptr, &member)));
    ncclComm_t comm = nullptr;
    EXPECT_EQ(cfxMemberUpdate(member, nullptr, nullptr), ncclInvalidArgument);
    cfxEpochInfo info{};
    ASSERT_TRUE(succeeded(cfxMemberUpdate(member, &comm, &info)));
    EXPECT_EQ(info.nRanks, 1);
    EXPECT_EQ(info.rank, 0);
    EXPECT_EQ(info.epoch, 1u);
    EXPECT_EQ(sumOfJobRanks(comm, 0), 1);
    EXPECT_TRUE(succeeded(cfxMemberLeave(member)));
    EXPECT_TRUE(succeeded(cfxMasterStop(master)));
  });
}

}  // namespace
}  // namespace cfx::itest
