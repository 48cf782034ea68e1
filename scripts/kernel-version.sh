#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Print the version of the newest Debian kernel image installed under /boot
# (the one the VM boots and srnic.ko is built for). SRNIC_KVER overrides it.
set -euo pipefail
if [ -n "${SRNIC_KVER:-}" ]; then
	echo "$SRNIC_KVER"
	exit 0
fi
ls /boot/vmlinuz-* 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1 | grep . ||
	{ echo "no kernel image in /boot: run scripts/setup-deps.sh" >&2; exit 1; }
