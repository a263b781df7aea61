// SPDX-License-Identifier: Apache-2.0
// Where a rank's helper threads may run (common layer).
//
// Launchers pin each rank to a core (mpirun binds to cores by default, and so does cfxrun when ranks <= cores), and
// threads inherit their creator's affinity. A transport's proxy thread pinned with its rank then shares that one
// core with it, and a rank that spins while it waits for the proxy keeps the proxy from running until the spin
// gives up: a 1 KiB all-reduce over loopback TCP took 260 us pinned against 68 us unpinned (issue 3's notes). The
// proxies therefore ask for every CPU the process's cpuset allows; the kernel keeps the cpuset's limits.
#pragma once

namespace cfx {

// Lets the calling helper thread run on any CPU of the machine (within its cpuset) when it was pinned to fewer,
// unless CFX_PROXY_AFFINITY=inherit. `name` is for the INFO line. Never fails: a refusal leaves it as it was.
void releaseHelperThreadAffinity(const char* name);

// Whether `localRanks` ranks fit this machine's online CPUs, one each. Owners that poll their transports inline
// (tcp, ucx) help only then: with more ranks than CPUs, the polling takes CPU time the proxies and the other
// ranks need (4 ranks on 2 CPUs: 1 KiB all-reduces 1.3-3x slower with inline polling).
bool ranksFitCpus(int localRanks);

}  // namespace cfx
