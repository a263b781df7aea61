// SPDX-License-Identifier: Apache-2.0
// Knob registry: strict parsing, validators, config files, precedence.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "common/param.h"

namespace cfx::param {
namespace {

TEST(ParamParse, IntegersAreStrict) {
  int64_t v = 0;
  EXPECT_FALSE(parse("12", v).has_value());
  EXPECT_EQ(v, 12);
  EXPECT_FALSE(parse("0x10", v).has_value());
  EXPECT_EQ(v, 16);
  EXPECT_FALSE(parse("-5", v).has_value());
  EXPECT_EQ(v, -5);
  EXPECT_TRUE(parse("12abc", v).has_value());
  EXPECT_TRUE(parse("", v).has_value());
  EXPECT_TRUE(parse("99999999999999999999999", v).has_value());
  int i = 0;
  EXPECT_TRUE(parse("4294967296", i).has_value());
}

TEST(ParamParse, BooleansAcceptOnlyClearSpellings) {
  bool b = false;
  EXPECT_FALSE(parse("1", b).has_value());
  EXPECT_TRUE(b);
  EXPECT_FALSE(parse("false", b).has_value());
  EXPECT_FALSE(b);
  EXPECT_TRUE(parse("2", b).has_value());
  EXPECT_TRUE(parse("on?", b).has_value());
}

TEST(ParamParse, DoublesRejectTrailingText) {
  double d = 0;
  EXPECT_FALSE(parse("1.5", d).has_value());
  EXPECT_DOUBLE_EQ(d, 1.5);
  EXPECT_TRUE(parse("1.5x", d).has_value());
  EXPECT_TRUE(parse("inf", d).has_value());
}

TEST(ParamValidators, RangeAndChoices) {
  auto range = inRange<int>(1, 8);
  EXPECT_FALSE(range(1).has_value());
  EXPECT_TRUE(range(9).has_value());
  auto choice = oneOf({"ring", "tree"});
  EXPECT_FALSE(choice("RING").has_value());
  EXPECT_TRUE(choice("mesh").has_value());
}

TEST(Param, InvalidEnvironmentValueKeepsTheDefault) {
  static Param<int> p("CFX_TEST_PARAM_INVALID", 7, "test knob with a range validator", inRange(0, 10));
  ::setenv("CFX_TEST_PARAM_INVALID", "12abc", 1);
  EXPECT_EQ(p.get(), 7);
  ::unsetenv("CFX_TEST_PARAM_INVALID");
}

TEST(Param, ValidEnvironmentValueIsUsed) {
  static Param<int> p("CFX_TEST_PARAM_VALID", 7, "test knob with a range validator", inRange(0, 10));
  ::setenv("CFX_TEST_PARAM_VALID", "3", 1);
  EXPECT_EQ(p.get(), 3);
  ::unsetenv("CFX_TEST_PARAM_VALID");
}

TEST(Param, OutOfRangeValueKeepsTheDefault) {
  static Param<int> p("CFX_TEST_PARAM_RANGE", 7, "test knob with a range validator", inRange(0, 10));
  ::setenv("CFX_TEST_PARAM_RANGE", "11", 1);
  EXPECT_EQ(p.get(), 7);
  ::unsetenv("CFX_TEST_PARAM_RANGE");
}

TEST(Param, ConfigFileIsReadAndEnvironmentWins) {
  const std::string path = ::testing::TempDir() + "cfx_test_nccl.conf";
  {
    std::ofstream f(path);
    f << "# comment\nCFX_TEST_PARAM_FILE = 5\nCFX_TEST_PARAM_BOTH=6\n";
  }
  ::setenv("NCCL_CONF_FILE", path.c_str(), 1);
  ::setenv("CFX_TEST_PARAM_BOTH", "9", 1);
  reloadConfigFilesForTesting();
  static Param<int> fromFile("CFX_TEST_PARAM_FILE", 1, "test knob read from a config file");
  static Param<int> both("CFX_TEST_PARAM_BOTH", 1, "test knob set in the file and the environment");
  EXPECT_EQ(fromFile.get(), 5);
  EXPECT_EQ(both.get(), 9);
  ::unsetenv("NCCL_CONF_FILE");
  ::unsetenv("CFX_TEST_PARAM_BOTH");
  reloadConfigFilesForTesting();
}

TEST(Param, EveryRegisteredKnobHasHelpAndAValidDefault) {
  for (const ParamBase* p : all()) {
    EXPECT_NE(p->help(), nullptr) << p->name();
    EXPECT_GE(std::string(p->help()).size(), 10u) << p->name();
    EXPECT_TRUE(p->defaultIsValid()) << p->name();
  }
}

}  // namespace
}  // namespace cfx::param
