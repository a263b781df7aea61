// SPDX-License-Identifier: Apache-2.0
// A helper thread started by a rank pinned to one CPU may run on every CPU the process may use (common layer).
#include "common/thread_affinity.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

namespace cfx {
namespace {

TEST(ThreadAffinity, AHelperOfAPinnedRankGetsEveryAllowedCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "this process may use one CPU only";
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  cpu_set_t after;
  CPU_ZERO(&after);
  int pinnedCount = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one), 0);  // as a launcher pins a rank
    cpu_set_t pinned;
    CPU_ZERO(&pinned);
    ::pthread_getaffinity_np(::pthread_self(), sizeof(pinned), &pinned);
    pinnedCount = CPU_COUNT(&pinned);
    releaseHelperThreadAffinity("test");
    ::pthread_getaffinity_np(::pthread_self(), sizeof(after), &after);
  }).join();
  EXPECT_EQ(pinnedCount, 1);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << CPU_COUNT(&after) << " CPUs after, " << CPU_COUNT(&allowed) << " allowed";
}

}  // namespace
}  // namespace cfx
