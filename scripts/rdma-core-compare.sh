#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's 19 generic pyverbs modules against srnic and against rxe from
# one VM boot, and the table of ran/passed/skipped/failed/errors per module
# and device (build/rdma-core-compare.txt). See scripts/rdma-core-tests.sh.
#
# Usage: scripts/rdma-core-compare.sh [test_cq test_mr ...]
exec "$(dirname "$(readlink -f "$0")")/rdma-core-tests.sh" --compare "$@"
