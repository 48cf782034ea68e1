#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# platform-roots.sh NAME...: make the roots of the platforms NAME... that are missing or stale,
# side by side (debootstrap and apt wait on the network far more than on the CPU: two roots
# take about as long as one, ~1.5-3 minutes), and print each one's versions.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
pids=() names=()
for name in "$@"; do
	"$REPO/scripts/platform-root.sh" "$name" >/dev/null &
	pids+=($!) names+=("$name")
done
rc=0
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || { echo "platform-roots: the ${names[$i]} root failed" >&2; rc=1; }
done
exit $rc
