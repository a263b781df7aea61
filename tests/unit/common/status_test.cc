// SPDX-License-Identifier: Apache-2.0
// Status/Result: error creation, frames, CFX_TRY propagation.
#include <gtest/gtest.h>

#include "common/status.h"

namespace cfx {
namespace {

Status failing() { return Status::error(Errc::RemoteError, "peer 3 closed the connection"); }
Status passesThrough() {
  CFX_TRY(failing());
  return Status();
}
Result<int> makeInt(bool ok) {
  if (!ok) return Status::error(Errc::InvalidArgument, "no int");
  return 42;
}
Status useInt(bool ok, int* out) {
  CFX_TRY_ASSIGN(int v, makeInt(ok));
  *out = v;
  return Status();
}

TEST(Status, DefaultIsOkWithEmptyMessage) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), Errc::Ok);
  EXPECT_EQ(st.message(), "");
  EXPECT_EQ(st.origin(), "");
}

TEST(Status, TryPropagatesTheErrorAndRecordsAFrame) {
  Status st = passesThrough();
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_EQ(st.message(), "peer 3 closed the connection");
  EXPECT_EQ(st.frames().size(), 2u);
  EXPECT_NE(st.origin().find("status_test.cc:"), std::string::npos);
}

TEST(Status, TryAssignYieldsTheValueOrTheError) {
  int v = 0;
  EXPECT_TRUE(useInt(true, &v).ok());
  EXPECT_EQ(v, 42);
  Status st = useInt(false, &v);
  EXPECT_EQ(st.code(), Errc::InvalidArgument);
}

TEST(Status, CopiesAreIndependent) {
  Status a = failing();
  Status b = a;
  Status c = std::move(a).addFrame(std::source_location::current());
  EXPECT_EQ(b.frames().size(), 1u);
  EXPECT_EQ(c.frames().size(), 2u);
}

TEST(Status, StrprintfFormatsLongStrings) {
  const std::string s = strprintf("%0*d", 5000, 7);
  EXPECT_EQ(s.size(), 5000u);
  EXPECT_EQ(s.back(), '7');
}

}  // namespace
}  // namespace cfx
