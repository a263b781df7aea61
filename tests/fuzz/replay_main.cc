// SPDX-License-Identifier: Apache-2.0
// cfx_fuzz_replay_<target> PATH...: a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, for the address
// sanitizer build of make test (tests/fuzz/CMakeLists.txt).
//
// Why: a libFuzzer run needs a clang build of its own (g++ has none), which cost make test a fourth build for a
// 2-second run per target. What keeps a fixed bug fixed is replaying the inputs that found bugs and the well-formed
// seeds, and those run as well here, under ASan and UBSan, in the build make test compiles anyway. Each file given (or
// each file in a folder given) is fed as it is, then every one of its prefixes and, for inputs of at most
// kMaxMutatedBytes, each of its bytes inverted in turn: the truncations and single corruptions a mutator tries
// first, made deterministically. A violated promise aborts, as under libFuzzer; long fuzzing is `make fuzz`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr size_t kMaxMutatedBytes = 512;

std::vector<uint8_t> readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `input` and its derived inputs; returns how many were run.
size_t replay(const std::vector<uint8_t>& input) {
  size_t runs = 0;
  auto run = [&](std::vector<uint8_t> exact) {
    // Exactly `size` bytes allocated, as libFuzzer hands them over: ASan then sees a read past the end.
    exact.shrink_to_fit();
    LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    ++runs;
  };
  run(input);
  for (size_t n = 0; n < input.size(); ++n) run(std::vector<uint8_t>(input.begin(), input.begin() + n));
  if (input.size() <= kMaxMutatedBytes) {
    for (size_t i = 0; i < input.size(); ++i) {
      std::vector<uint8_t> flipped(input);
      flipped[i] = static_cast<uint8_t>(~flipped[i]);
      run(std::move(flipped));
    }
  }
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: %s is neither a file nor a folder\n", argv[0], argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s: no inputs (did the seed generator run?)\n", argv[0]);
    return 2;
  }
  std::sort(files.begin(), files.end());
  size_t runs = 0;
  for (const auto& f : files) runs += replay(readFile(f));
  std::printf("%s: %zu inputs, %zu runs, no finding\n", argv[0], files.size(), runs);
  return 0;
}
