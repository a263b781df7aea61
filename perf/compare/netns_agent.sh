#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mpirun launch agent (--mca plm_rsh_agent) for compare.py's namespace mode: the "hosts" of its hostfile are
# network namespaces of the test bed (tests/netbed), and this script plays ssh. mpirun calls
#   netns_agent.sh [ssh options] <host> <command...>
# and the command (orted and its arguments) runs in that namespace through a shell, as ssh would run it. Each
# host also gets its own UTS namespace with the host name set to the namespace's name: the bed's namespaces
# share the machine's host name, and Open MPI tells nodes apart by name.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # ssh options mpirun may add (-x, -T, ...): nothing to do for a namespace
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "netns_agent.sh: usage: netns_agent.sh [options] <namespace> <command...>" >&2
  exit 2
fi
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname '$host' && exec $*"
