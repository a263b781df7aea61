// SPDX-License-Identifier: Apache-2.0
// Logging: NCCL's line format, levels, subsystem masks, NCCL_DEBUG_FILE and ncclGetLastError text.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/log.h"

namespace cfx::log {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "cfx_log_test_%p.txt";
    expanded_ = ::testing::TempDir() + "cfx_log_test_" + std::to_string(getpid()) + ".txt";
    ::setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("NCCL_DEBUG");
    ::unsetenv("NCCL_DEBUG_SUBSYS");
    ::unsetenv("NCCL_DEBUG_FILE");
    reset();
    ::unlink(expanded_.c_str());
  }
  std::string path_;
  std::string expanded_;
};

TEST_F(LogTest, InfoLinesHaveNcclsPrefixAndRespectTheSubsystemMask) {
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "INIT,COLL", 1);
  reset();
  setThreadRank(3);
  CFX_INFO(Sys::Init, "hello %d", 42);
  CFX_INFO(Sys::Net, "not shown");
  CFX_INFO(Sys::Coll, "coll line");
  reset();  // flushes and closes the file
  const std::string text = readFile(expanded_);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(^[^:\s]+:\d+:\d+ \[3\] NCCL INFO hello 42$)", std::regex::multiline)))
      << text;
  EXPECT_EQ(text.find("not shown"), std::string::npos);
  EXPECT_NE(text.find("coll line"), std::string::npos);
}

TEST_F(LogTest, CaretInvertsTheSubsystemList) {
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "^INIT", 1);
  reset();
  CFX_INFO(Sys::Init, "init hidden");
  CFX_INFO(Sys::Net, "net shown");
  reset();
  const std::string text = readFile(expanded_);
  EXPECT_EQ(text.find("init hidden"), std::string::npos);
  EXPECT_NE(text.find("net shown"), std::string::npos);
}

TEST_F(LogTest, WarnHasFileLineAndBecomesTheLastError) {
  ::setenv("NCCL_DEBUG", "WARN", 1);
  reset();
  CFX_WARN("something failed on peer %d", 5);
  CFX_INFO(Sys::Init, "info hidden at WARN level");
  EXPECT_STREQ(lastError(), "something failed on peer 5");
  reset();
  const std::string text = readFile(expanded_);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\[\d+\] [^ ]*log_test\.cc:\d+ NCCL WARN something failed on peer 5)")))
      << text;
  EXPECT_EQ(text.find("info hidden"), std::string::npos);
}

TEST_F(LogTest, SilentByDefaultButLastErrorStillRecorded) {
  ::unsetenv("NCCL_DEBUG");
  reset();
  setLastError("");
  EXPECT_FALSE(enabled(Level::Warn, Sys::Init));
  EXPECT_STREQ(lastError(), "");
}

TEST_F(LogTest, LimitedWarningsLetABurstThroughAndCountWhatTheyDrop) {
  ::setenv("NCCL_DEBUG", "WARN", 1);
  reset();
  WarnLimiter limiter(3, std::chrono::milliseconds(200));
  for (int i = 0; i < 50; ++i) CFX_WARN_LIMITED(limiter, "stranger %d refused", i);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CFX_WARN_LIMITED(limiter, "stranger %d refused", 50);
  reset();
  const std::string text = readFile(expanded_);
  const auto lines = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(lines("NCCL WARN stranger"), 4u) << text;
  EXPECT_NE(text.find("stranger 2 refused\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("stranger 3 refused"), std::string::npos) << text;
  EXPECT_NE(text.find("stranger 50 refused (47 similar lines dropped before this one)"), std::string::npos) << text;
}

}  // namespace
}  // namespace cfx::log
