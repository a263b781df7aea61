// SPDX-License-Identifier: Apache-2.0
//
// membership: peers that come and go, with the cfx membership API (conflux.h, "Dynamic membership").
//
//     cfxrun -n 2 ./membership
//
// Rank 0 starts a membership master and hands its id to the others over a communicator made from the
// launcher's environment. Every process joins as a member and, between steps, calls cfxMemberUpdate: the epoch
// boundary, where the master admits joiners and drops whoever left. Each step all-reduces every member's
// contribution. After two steps the last rank leaves; the others carry on in a new, smaller epoch, and each
// member checks every sum. docs/USER_GUIDE.md quotes this file.
#include <conflux.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    std::fprintf(stderr, "%s failed: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
    std::exit(1);
  }
}

// One training step: every member adds 1 to each element, so each element ends as the epoch's member count.
bool step(ncclComm_t comm, const cfxEpochInfo& epoch) {
  std::vector<float> grads(1024, 1.0f);
  check(ncclAllReduce(grads.data(), grads.data(), grads.size(), ncclFloat32, ncclSum, comm, nullptr), "all-reduce");
  for (float g : grads) {
    if (g != static_cast<float>(epoch.nRanks)) return false;
  }
  return true;
}

}  // namespace

int main() {
  cfxLaunchInfo launch;
  check(cfxGetLaunchInfo(&launch), "cfxGetLaunchInfo");
  const bool leaverExists = launch.nRanks > 1;  // the last rank leaves after two steps
  const bool leaver = leaverExists && launch.rank == launch.nRanks - 1;

  // The master's id travels like an ncclUniqueId; here over a communicator of the launched processes.
  cfxMaster_t master = nullptr;
  ncclUniqueId masterId{};
  if (launch.rank == 0) check(cfxMasterStart(nullptr, &masterId, &master), "cfxMasterStart");
  ncclComm_t launched = nullptr;
  check(cfxCommInitFromEnv(&launched), "cfxCommInitFromEnv");
  check(ncclBroadcast(&masterId, &masterId, sizeof(masterId), ncclUint8, 0, launched, nullptr), "broadcast id");
  check(ncclCommDestroy(launched), "ncclCommDestroy");

  cfxMember_t member = nullptr;
  check(cfxMemberJoin(&masterId, nullptr, &member), "cfxMemberJoin");
  // A member is admitted at the first boundary after its first cfxMemberUpdate, so the first members may start
  // without the others. Wait for the quorum: pass boundaries until every launched process is in.
  ncclComm_t comm = nullptr;  // the epoch's communicator; the member owns it
  cfxEpochInfo epoch{};
  do {
    check(cfxMemberUpdate(member, &comm, &epoch), "cfxMemberUpdate");
  } while (epoch.nRanks < launch.nRanks);

  bool ok = true;
  for (int s = 0; s < 3; ++s) {
    if (s > 0) {
      if (s == 2 && leaver) break;  // this rank leaves after two steps; the others go on without it
      check(cfxMemberUpdate(member, &comm, &epoch), "cfxMemberUpdate");
    }
    // Every member adds its part, and from step 2 on the leaver is gone.
    const bool right = step(comm, epoch) && (s < 2 || !leaverExists || epoch.nRanks == launch.nRanks - 1);
    ok = ok && right;
    std::printf("rank %d step %d: epoch %llu, member %d of %d (left since the last epoch: %d): %s\n", launch.rank, s,
                epoch.epoch, epoch.rank, epoch.nRanks, epoch.left, right ? "correct" : "WRONG");
  }
  check(cfxMemberLeave(member), "cfxMemberLeave");
  if (master != nullptr) {
    // Members still leaving need the master to hear them: stop it once they are gone (bounded, 10 s).
    for (int i = 0; i < 1000; ++i) {
      unsigned long long epochNow = 0;
      int members = 0;
      check(cfxMasterGetEpoch(master, &epochNow, &members), "cfxMasterGetEpoch");
      if (members == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    check(cfxMasterStop(master), "cfxMasterStop");
  }
  return ok ? 0 : 1;
}
