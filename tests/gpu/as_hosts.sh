#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# as_hosts.sh N PROG [ARGS...]: runs PROG as if the ranks of one machine were on hosts of N ranks each. Rank r
# (RANK, set by cfxrun) gets NCCL_HOSTID gpu-host-<r / N>, the identity the library groups ranks by: shared memory
# within a host, the network transport (CFX_NET) between hosts.
if [ $# -lt 2 ] || [ -z "$RANK" ]; then
  echo "usage: RANK=r as_hosts.sh RANKS_PER_HOST PROG [ARGS...] (RANK comes from cfxrun)" >&2
  exit 2
fi
per=$1
shift
NCCL_HOSTID="gpu-host-$((RANK / per))"
export NCCL_HOSTID
exec "$@"
