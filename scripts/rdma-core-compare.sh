#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's generic pyverbs modules against srnic and against rxe from one VM boot of a
# platform (tests/test_rdma_core.py, which also holds srnic to no failure, no error, its
# rdma-core 44 passes and more passes than rxe), and the table of ran/passed/skipped/
# failed/errors per module and device: build/rdma-core-compare-<platform>.txt.
#
# Usage: scripts/rdma-core-compare.sh [--platform NAME]   (default bookworm)
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
platform=bookworm
if [ "${1:-}" = --platform ]; then
	platform=${2:?--platform needs a NAME}
fi
root=$(scripts/platform root "$platform") || exit 2
results=build/vm/results
[ "$platform" = bookworm ] || results=build/vm/$platform/results
# The platform's own suite decides the modules, as the test does.
mapfile -t modules < <(ls "$root/usr/share/doc/rdma-core/tests" |
	sed -n 's/^\(test_[a-z0-9_]*\)\.py\(\.gz\)\{0,1\}$/\1/p' | grep -Ev '^test_(mlx5|efa|cuda)' | sort)
status=0
SRNIC_PYTEST_ARGS="-s ${SRNIC_PYTEST_ARGS:-}" scripts/run-vm-suites.sh --platform "$platform" \
	tests/test_rdma_core.py || status=1
/usr/bin/python3 scripts/rdma_core_table.py --logs "$results" \
	--out "build/rdma-core-compare-$platform.txt" "${modules[@]}" || status=1
exit $status
