// SPDX-License-Identifier: Apache-2.0
// Prints docs/ENV.md from the knob registry, or with --check FILE fails when FILE is out of date or a knob
// lacks help text or has an invalid default. `make env-doc` regenerates the file.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/launch_env.h"
#include "common/param.h"
#include "perf_env.h"

namespace {

std::string escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string render() {
  std::vector<cfx::param::ParamBase*> params = cfx::param::all();
  std::sort(params.begin(), params.end(), [](auto* a, auto* b) { return std::strcmp(a->name(), b->name()) < 0; });
  std::ostringstream out;
  out << "# Environment variables\n\n"
      << "Generated from the knob registry by `make env-doc`; a unit test fails when this file is out of date.\n"
      << "`NCCL_*` variables keep NCCL's meaning; `CFX_*` are Conflux's own. Values are read once, when a\n"
      << "communicator is created. The environment wins over `NCCL_CONF_FILE` (or `~/.nccl.conf`), which wins over\n"
      << "`/etc/nccl.conf`. An invalid value logs a WARN and the default is kept. An `NCCL_*` variable that is set\n"
      << "but not listed here is logged once at INFO/ENV as ignored (NVIDIA's library has it; this one does not).\n\n"
      << "| variable | type | default | meaning |\n|---|---|---|---|\n";
  for (auto* p : params) {
    std::string def = p->defaultText();
    if (def == "-2147483648") def = "(unset)";
    out << "| `" << p->name() << "` | " << p->typeName() << " | " << (def.empty() ? "(empty)" : "`" + escape(def) + "`")
        << " | " << escape(p->help()) << " |\n";
  }
  out << "\n## Launcher variables\n\n"
      << "Read by `cfxCommInitFromEnv`, `cfxGetLaunchInfo` and the perf tools (one parser, "
         "`src/common/launch_env.h`),\n"
      << "never from the config files. The first launcher whose rank variable is set wins, in this order; numbers are\n"
      << "whole decimal numbers (`RANK=1x` is refused). `cfxrun` sets `MASTER_ADDR`, `MASTER_PORT`, `RANK`,\n"
      << "`WORLD_SIZE`, `LOCAL_RANK` and `LOCAL_WORLD_SIZE`.\n\n"
      << "| variable | meaning |\n|---|---|\n";
  for (const cfx::launch::LaunchVariable& v : cfx::launch::launchVariables()) {
    out << "| `" << v.name << "` | " << escape(v.meaning) << " |\n";
  }
  out << "\n## Perf tools\n\n"
      << "Read by `all_reduce_perf` and the other perf binaries (`perf/common/perf_env.h`), not by the library.\n\n"
      << "| variable | meaning |\n|---|---|\n";
  for (const cfx::perf::PerfVariable& v : cfx::perf::kPerfVariables) {
    out << "| `" << v.name << "` | " << escape(v.meaning) << " |\n";
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  int bad = 0;
  for (auto* p : cfx::param::all()) {
    if (p->help() == nullptr || std::strlen(p->help()) < 10) {
      std::fprintf(stderr, "knob %s has no help text\n", p->name());
      ++bad;
    }
    if (!p->defaultIsValid()) {
      std::fprintf(stderr, "knob %s has an invalid default %s\n", p->name(), p->defaultText().c_str());
      ++bad;
    }
  }
  const std::string doc = render();
  if (argc == 3 && std::strcmp(argv[1], "--check") == 0) {
    std::ifstream in(argv[2]);
    std::stringstream current;
    current << in.rdbuf();
    if (current.str() != doc) {
      std::fprintf(stderr, "%s is out of date: run `make env-doc` and commit the result\n", argv[2]);
      ++bad;
    }
    std::printf("%zu knobs checked\n", cfx::param::all().size());
    return bad == 0 ? 0 : 1;
  }
  std::fputs(doc.c_str(), stdout);
  return bad == 0 ? 0 : 1;
}
