// SPDX-License-Identifier: Apache-2.0
// The HIP adapter (common/hip_driver.h) against the HIP runtime installed here: every entry point it requires
// resolves by name. No AMD GPU is needed (nothing is called); the test skips where no libamdhip64 is installed,
// and in sanitizer builds, which would report the uninstrumented runtime's own allocations at exit.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/hip_driver.h"

namespace cfx::cuda {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(HipDriver, EveryRequiredEntryPointResolvesInTheInstalledRuntime) {
  if (kSanitized) GTEST_SKIP() << "sanitizer build: the HIP runtime is not instrumented";
  void* lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) GTEST_SKIP() << "no HIP runtime installed (libamdhip64.so.6 or .5)";
  const std::vector<std::string> missing = hipMissingEntryPoints(lib);
  std::string names;
  for (const std::string& m : missing) names += " " + m;
  EXPECT_TRUE(missing.empty()) << "libamdhip64 lacks:" << names;
  // Not dlclose'd: a runtime's unload is never worth the risk in a test process either.
}

TEST(HipDriver, AMachineWithoutAnAmdGpuGetsNoTable) {
  if (kSanitized) GTEST_SKIP() << "sanitizer build: the HIP runtime is not instrumented";
  if (dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD) == nullptr &&
      dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    GTEST_SKIP() << "no HIP runtime installed";
  }
  if (access("/dev/kfd", F_OK) == 0) GTEST_SKIP() << "this machine has the AMD GPU driver (/dev/kfd)";
  Driver table{};
  std::string why;
  EXPECT_EQ(loadHipDriver(&table, &why), nullptr);
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace cfx::cuda
