#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where an NVMe over RDMA read spends its time, inside the VM: the kernel's
function_graph tracer on the functions named (nothing else traced), during
fio's 128 KiB sequential read (make bench's NVMe line: its sizes, depth and
null_blk) from nvme-rdma to nvmet-rdma on one device of DRIVER (srnic or
rxe), the namespace a null_blk that moves no data (or with
SRNIC_TRACE_BACKING=file the bench's other namespace, a file in tmpfs);
then each function's calls, time with what it called (inclusive) and
without the traced functions it called (exclusive), summed over the CPUs,
and the CPU time of the busiest threads.

Usage (on the host):
  scripts/vm-run [--env SRNIC_TRACE_BACKING=file] -- \
      /usr/bin/python3 scripts/nvme-rdma-trace.py DRIVER FUNC,FUNC...
e.g. FUNC = srnic_post_send,srnic_local_execute,srnic_sgl_copy,srnic_mr_copy,
nvme_rdma_queue_rq,nvme_rdma_complete_rq,null_queue_rq. A function that is
not in the kernel (or inlined) is named and left out.

Use it for proportions, not figures: under TCG, tracing a function costs
about a microsecond a call, which lands in its caller's exclusive time, and
fio's bandwidth drops by 10-20 % with a dozen functions traced. Debian's
kernels have no function profiler (CONFIG_FUNCTION_PROFILER), and perf's
cpu-clock samples in these guests land almost all in the idle loop.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
# make bench's NVMe line: its null_blk, block size, depth and size.
from bench import (NVME_BS, NVME_IODEPTH, NVME_MIB,  # noqa: E402
                   nvme_namespace)
import harness  # noqa: E402
import nvme_rdma  # noqa: E402
import topology  # noqa: E402

TRACING = "/sys/kernel/tracing"
# The namespace: "null_blk" (default) or "file" (a file in the VM's tmpfs),
# make bench's two NVMe backings.
BACKING = os.environ.get("SRNIC_TRACE_BACKING", "null_blk")
WARMUP_S, TRACE_S = 2, 4
# " 1) ! 132.746 us  |        } /* srnic_post_send [srnic] */"
LINE = re.compile(r"^\s*(\d+)\)\s+(?:[+!#*@$]\s+)?(?:([\d.]+) us\s+)?\|\s+(.*)$")


def tracing(name, value):
    with open(f"{TRACING}/{name}", "w") as f:
        f.write(value)


def set_filter(funcs):
    """Trace funcs only; returns those the kernel has."""
    tracing("set_ftrace_filter", "")
    found = []
    for fn in funcs:
        # The shell's ">>": a refused name through Python's buffered append
        # took the names written before it with it.
        if subprocess.run(["sh", "-c", f'echo "$1" >>{TRACING}/set_ftrace_filter',
                           "sh", fn], stderr=subprocess.DEVNULL).returncode:
            print(f"not traceable: {fn}")
        else:
            found.append(fn)
    return found


def thread_cpu():
    """{task stat path: (name, user + system ticks)} of every thread."""
    out = {}
    for path in glob.glob("/proc/[0-9]*/task/[0-9]*/stat"):
        try:
            stat = open(path).read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[path] = (re.sub(r"[/:].*", "", name),
                     int(fields[11]) + int(fields[12]))
    return out


def summarise(trace_lines):
    """{function: [calls, inclusive us, exclusive us]} of function_graph
    output with funcgraph-tail, children's time taken from their caller's
    exclusive time."""
    stacks = collections.defaultdict(list)
    funcs = collections.defaultdict(lambda: [0, 0.0, 0.0])

    def account(cpu, fn, us, children):
        f = funcs[fn]
        f[0] += 1
        f[1] += us
        f[2] += us - children
        if stacks[cpu]:
            stacks[cpu][-1][1] += us

    for line in trace_lines:
        m = LINE.match(line)
        if not m:
            continue
        cpu, us, body = m.group(1), m.group(2), m.group(3).strip()
        body = re.sub(r" \[\w+\]", "", body)
        if body.endswith("() {"):
            stacks[cpu].append([body[:-4], 0.0])
        elif body.endswith("();") and us:
            account(cpu, body[:-3], float(us), 0.0)
        elif body.startswith("} /* ") and us:
            fn = body[5:-3]
            if stacks[cpu] and stacks[cpu][-1][0] == fn:
                _, children = stacks[cpu].pop()
                account(cpu, fn, float(us), children)
            else:
                # Entered before the trace began: its callers are unknown.
                stacks[cpu].clear()
    return funcs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    driver, funcs = sys.argv[1], sys.argv[2].split(",")
    if not os.path.exists(f"{TRACING}/trace"):
        harness.run("mount", "-t", "tracefs", "nodev", TRACING)
    topo, veth = topology.build("one-device", driver)
    with nvme_namespace(BACKING) as path:
        target = nvme_rdma.Target(topo.a.addr, path)
        target.start()
        try:
            dev = nvme_rdma.connect(topo.a.addr)
            tracing("tracing_on", "0")
            tracing("current_tracer", "nop")
            found = set_filter(funcs)
            tracing("buffer_size_kb", "30000")
            tracing("current_tracer", "function_graph")
            tracing("options/funcgraph-tail", "1")
            tracing("trace", "")
            fio = subprocess.Popen(
                ["fio", "--name=trace", f"--filename={dev}",
                 "--ioengine=libaio", "--direct=1", "--rw=read",
                 f"--bs={NVME_BS}",
                 f"--iodepth={NVME_IODEPTH}", f"--size={NVME_MIB}M",
                 f"--runtime={WARMUP_S + TRACE_S + 2}",
                 "--time_based"], stdout=subprocess.PIPE, text=True)
            time.sleep(WARMUP_S)
            cpu0 = thread_cpu()
            tracing("tracing_on", "1")
            time.sleep(TRACE_S)
            tracing("tracing_on", "0")
            cpu1 = thread_cpu()
            out, _ = fio.communicate(timeout=120)
            assert fio.returncode == 0, out
            with open(f"{TRACING}/trace") as f:
                funcs = summarise(f)
            tracing("current_tracer", "nop")
            tracing("set_ftrace_filter", "")
        finally:
            nvme_rdma.disconnect()
            target.stop()
    print(driver, *[ln.strip() for ln in out.splitlines() if "READ:" in ln])
    print(f"{len(found)} functions traced for {TRACE_S} s; seconds summed "
          "over the CPUs:")
    for fn, (calls, incl, excl) in sorted(funcs.items(),
                                          key=lambda kv: -kv[1][2]):
        print(f"  {fn:32s} calls {calls:7d}  inclusive {incl / 1e6:7.3f}  "
              f"exclusive {excl / 1e6:7.3f}  ({excl / calls:7.1f} us a call)")
    busy = collections.Counter()
    for path, (name, ticks) in cpu1.items():
        busy[name] += ticks - cpu0.get(path, (name, 0))[1]
    print(f"threads' CPU over those {TRACE_S} s (s):",
          ", ".join(f"{name} {ticks / os.sysconf('SC_CLK_TCK'):.2f}"
                    for name, ticks in busy.most_common(6) if ticks))


if __name__ == "__main__":
    main()
