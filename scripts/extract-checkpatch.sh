#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Extract checkpatch.pl and the data files it reads from Debian's
# linux-source-6.1 tarball into DIR (default build/checkpatch).
set -euo pipefail
dir=${1:-build/checkpatch}
tarball=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | head -n 1)
[ -n "$tarball" ] || { echo "linux-source-6.1 is not installed: run scripts/setup-deps.sh" >&2; exit 1; }
mkdir -p "$dir"
tar -xf "$tarball" -C "$dir" --strip-components=2 \
	linux-source-6.1/scripts/checkpatch.pl \
	linux-source-6.1/scripts/spelling.txt \
	linux-source-6.1/scripts/const_structs.checkpatch
