// SPDX-License-Identifier: Apache-2.0
// The HIP build of the device kernels: when hipcc was found, both kernel files are embedded as Clang offload
// bundles holding a code object for every target in CFX_HIP_ARCHS, with the kernels' names in them. (No AMD GPU
// runs them here: this checks what the build produced.)
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>

#include "primitives/device_kernels.h"

namespace cfx::prims {
namespace {

TEST(HipKernels, BundlesHoldEveryTargetAndTheKernels) {
  size_t bytes = 0;
  if (DeviceKernels::hipBundle(0, &bytes) == nullptr) GTEST_SKIP() << "built without hipcc: no HIP kernels";
  for (int which : {0, 1}) {
    const unsigned char* b = DeviceKernels::hipBundle(which, &bytes);
    ASSERT_GT(bytes, 64u);
    const std::string_view image(reinterpret_cast<const char*>(b), bytes);
    EXPECT_EQ(image.substr(0, 24), "__CLANG_OFFLOAD_BUNDLE__") << "bundle " << which;
    std::istringstream archs(DeviceKernels::hipArchs());
    for (std::string arch; archs >> arch;) {
      EXPECT_NE(image.find("amdgcn-amd-amdhsa--" + arch), std::string_view::npos) << "bundle " << which << " lacks " << arch;
    }
    EXPECT_NE(image.find(which == 0 ? "cfx_reduce_bf16_sum" : "cfx_quantize_int4"), std::string_view::npos);
  }
}

}  // namespace
}  // namespace cfx::prims
