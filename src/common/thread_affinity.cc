// SPDX-License-Identifier: Apache-2.0
// Helper threads' CPU affinity (common layer); see thread_affinity.h.
#include "common/thread_affinity.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"
#include "common/param.h"

namespace cfx {

CFX_PARAM(std::string, proxyAffinityParam, "CFX_PROXY_AFFINITY", std::string("any"),
          "CPUs of a rank's transport proxy threads (tcp, ucx). any (the default): every CPU the process's cpuset "
          "allows, even when the launcher pinned the rank to one core, so the proxy never waits behind its own "
          "spinning rank. inherit: the rank's own affinity, as threads get by default.",
          param::oneOf({"any", "inherit"}));

void releaseHelperThreadAffinity(const char* name) {
  if (proxyAffinityParam.get() == "inherit") return;
  cpu_set_t current;
  CPU_ZERO(&current);
  if (::pthread_getaffinity_np(::pthread_self(), sizeof(current), &current) != 0) return;
  const long configured = ::sysconf(_SC_NPROCESSORS_CONF);
  if (configured <= 0 || CPU_COUNT(&current) >= configured) return;  // not pinned
  cpu_set_t all;
  CPU_ZERO(&all);
  for (long cpu = 0; cpu < configured && cpu < CPU_SETSIZE; ++cpu) CPU_SET(static_cast<int>(cpu), &all);
  // The kernel intersects the mask with the thread's cpuset, so a container's limits stay in force.
  if (const int rc = ::pthread_setaffinity_np(::pthread_self(), sizeof(all), &all); rc != 0) {
    CFX_INFO(log::Sys::Proxy, "%s thread keeps its rank's %d CPU(s): pthread_setaffinity_np: %s", name,
             CPU_COUNT(&current), std::strerror(rc));
    return;
  }
  CFX_INFO(log::Sys::Proxy, "%s thread may run on any allowed CPU (its rank is pinned to %d of %ld)", name,
           CPU_COUNT(&current), configured);
}

bool ranksFitCpus(int localRanks) {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online <= 0 || localRanks <= online;
}

}  // namespace cfx
