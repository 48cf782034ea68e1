#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# vm-console-check.sh LOG: fail if a VM's kernel console log shows a kernel failure.
#
# Exit 0 when LOG is clean; 1 (and the offending lines with context on stdout) when it has a
# BUG, WARNING, oops, lockdep or RCU report, hung task, leaked netdev, sanitizer (KASAN, UBSAN)
# report, kmemleak report, DEBUG_OBJECTS report, panic, or any call trace; 2 on usage errors.
# scripts/vm-run calls it after every run.
#
# Known-harmless lines are not patterns here, so they pass: an out-of-tree module's
# "module verification failed: signature and/or required key missing - tainting kernel", the
# "Disabling lock debugging due to kernel taint" that follows it, and normal boot messages.
# A bare "Call Trace:" is counted too: the kernel prints one only when something went wrong
# (warn_alloc, a sysrq dump asked for by a test is the exception and should not be in a test).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 CONSOLE_LOG" >&2; exit 2; }
log=$1
[ -r "$log" ] || { echo "$0: cannot read $log" >&2; exit 2; }

patterns=(
	'BUG:'                      # BUG: sleeping function…, soft lockup, KASAN/KFENCE headers
	'kernel BUG at'
	'WARNING:'                  # WARN_ON and friends
	'Oops'
	'general protection fault'
	'Unable to handle kernel'
	'refcount_t'
	'list_add corruption'
	'list_del corruption'
	'possible circular locking dependency'
	'inconsistent lock state'
	'possible recursive locking'
	'suspicious RCU usage'
	'INFO: lockdep'
	'detected stall'            # rcu: INFO: rcu_sched detected stalls / self-detected stall
	'blocked for more than'     # hung task
	'unregister_netdevice: waiting for' # a leaked netdev reference
	'Kernel panic'
	'KASAN'
	'UBSAN'
	'unreferenced object'       # a kmemleak report (vm-run --kmemleak prints it after COMMAND)
	'leak detector disabled'    # kmemleak gave up (its boot and scan lines are not reports)
	'Memory pool empty'
	'ODEBUG:'                   # DEBUG_OBJECTS: a timer, work or rcu_head freed while active
	'BUG kmalloc'               # SLUB debug: redzone/poison overwritten
	'sleeping function called from invalid context'
	'possible irq lock inversion'
	'Call Trace:'
)

# Lines from the guest's own scripts ("srnic-vm: ...", which may quote the command) are not kernel
# reports and are skipped. Each hit is printed with 3 lines before and 25 after (most of a trace),
# overlapping ranges merged, repeats of one message left out after the third, the whole report
# capped to keep it readable. Serial consoles end
# lines with \r\n: the \r is dropped.
printf '%s\n' "${patterns[@]}" | awk -v logfile="$log" '
	NR == FNR { pats[++np] = $0; next }
	{
		sub(/\r$/, "")
		line[FNR] = $0
		if ($0 ~ /^srnic-vm: /) next
		for (i = 1; i <= np; i++) {
			if (!index($0, pats[i])) continue
			nhits++
			# A message repeated (with new timestamps) is shown 3 times, then only counted.
			key = $0
			sub(/^\[[ 0-9.]*\] */, "", key)
			if (++seen[key] <= 3) hit[FNR] = 1
			else repeats++
			break
		}
	}
	END {
		if (!nhits) exit 0
		printf "vm-console-check: %d suspicious line(s) in %s", nhits, logfile
		if (repeats) printf " (%d repeats not shown)", repeats
		printf ":\n"
		for (n in hit)
			for (k = n - 3; k <= n + 25; k++) show[k] = 1
		prev = 0; printed = 0
		for (k = 1; k <= FNR; k++) {
			if (!(k in show)) continue
			if (prev && k > prev + 1) print "  --"
			if (++printed > 300) { print "  [... cut]"; break }
			printf "  %d%s%s\n", k, (k in hit) ? ":" : "-", line[k]
			prev = k
		}
		exit 1
	}' - "$log"
