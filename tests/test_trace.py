# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 300 --smp 1
"""srnic's tracepoints (issue 25, item 1; kernel/srnic_trace.h, events/srnic/
in tracefs) through the tools operators use: `trace-cmd record -e srnic`
over an RC exchange between two srnic devices in two netns, read back with
`trace-cmd report`, and `perf trace -e srnic:...`.

The exchange: a QP pair connects (MR registrations, QP states), a SENDs 4
KiB to b (doorbell, WQE start, packets out and in, ACK, completions), a
WRITEs 64 KiB (twice, or until b sent a CNP) through a netem that marks a
fifth of its ECN-capable skbs Congestion Experienced (b sends CNPs, a
receives them and cuts its rate), a SENDs before b posts a receive (b's RNR NAK, a's RNR wait), a
WRITEs while b sends nothing (a's ACK timeout, go-back-N retransmission),
and the pair closes (MRs deregistered). Every event must name the right
device, QP, PSN, opcode and length.

One vCPU (the srnic-vm-run line above): turning events on and off patches
kernel text (static keys: srnic's tracepoints, the sched_switch probe that
records command names, perf trace's syscall tracepoints) while the other
vCPU runs it, and Debian 12's QEMU 7.2 under multi-threaded TCG can run a
stale translation of the patched bytes (an int3 oops in __schedule, seen in
CI on trixie; QEMU fixed it in 8.1). Real CPUs have no such race.
"""
import os
import re
import signal
import subprocess
import time

import pytest

import faults
import harness
import verbs_enums as e
from faults import wire  # noqa: F401  (a pytest fixture)
from rc_verbs import RCPair, check_ok, recv_wr, send_wr, sge

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not os.path.exists("/usr/bin/trace-cmd"),
                       reason="trace-cmd is not installed"),
]

SEND_SIZE = 4096
WRITE_SIZE = 64 * 1024
IB_WR_SEND = 2          # include/rdma/ib_verbs.h's enum ib_wr_opcode
OP_SEND_FIRST = 0x00    # RC SEND FIRST, the BTH opcode
OP_ACKNOWLEDGE = 0x11
EVENT = re.compile(r"^\s*\S.*?\s(srnic_\w+):\s+(\S+)\s*(.*)$")


def record(out):
    """trace-cmd record -e srnic into out, once it records (it enables
    the events; its "Hit Ctrl^C" line is buffered in a pipe)."""
    enable = f"{harness.tracefs()}/events/srnic/enable"
    proc = subprocess.Popen(["trace-cmd", "record", "-e", "srnic", "-o", out],
                            stdout=subprocess.DEVNULL)

    def recording():
        assert proc.poll() is None, f"trace-cmd record: {proc.returncode}"
        with open(enable) as f:
            return f.read().strip() == "1"

    harness.wait_for(recording, timeout=30, what="trace-cmd recording")
    time.sleep(0.5)     # its per-CPU readers start
    return proc


def number(value):
    """A field's value: an int if it reads as one (0x1f, 31), else text."""
    try:
        return int(value, 0)
    except ValueError:
        return value


def report(out):
    """trace-cmd report of out: [(event, device, {field: value}, text)]."""
    text = harness.run("trace-cmd", "report", "-i", out).stdout
    events = []
    for line in text.splitlines():
        m = EVENT.match(line)
        if m and len(events) < 60:
            print(line)     # the first ones: the SEND of the exchange
        if m:
            fields = {k: number(v) for k, v in
                      (kv.split("=", 1) for kv in m.group(3).split()
                       if "=" in kv)}
            events.append((m.group(1), m.group(2), fields, m.group(3)))
    return events


def exchange(topo):
    """The exchange of this module's docstring; returns what it used."""
    pair = RCPair(topo, max_send_wr=8)
    used = {}
    try:
        pair.connect()
        a, b = pair.a, pair.b
        used.update(a_qpn=a.qp.qp_num, b_qpn=b.qp.qp_num, mtu=pair.mtu)
        src, dst = a.mr(WRITE_SIZE), b.mr(WRITE_SIZE)
        used.update(mr_key=src.lkey, mr_len=WRITE_SIZE)

        b.qp.post_recv(recv_wr(0xb1, [sge(dst, 0, SEND_SIZE)]))
        a.qp.post_send(send_wr(0x5e0d, e.IBV_WR_SEND,
                               [sge(src, 0, SEND_SIZE)]))
        check_ok(a.poll()[0], 0x5e0d, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 0xb1, e.IBV_WC_RECV, SEND_SIZE)

        # a's packets through a marking netem: b answers with CNPs.
        for x, peer in ((topo.a, topo.b), (topo.b, topo.a)):
            mac = harness.run(*peer.cmd("cat", f"/sys/class/net/"
                                        f"{peer.netdev}/address")).stdout
            harness.run(*x.cmd("ip", "neigh", "replace", peer.addr,
                               "lladdr", mac.strip(), "dev", x.netdev,
                               "nud", "permanent"))
        harness.run(*topo.a.cmd("tc", "qdisc", "add", "dev", topo.a.netdev,
                                "root", "netem", "loss", "20%", "ecn"))
        cnps = harness.link_counters(topo.b)["np_cnp_sent"]
        try:
            # netem marks a fifth of the skbs it sees, and a batch of
            # packets is one skb: WRITEs until b has sent a CNP (two
            # mostly; none marked in one CI run), at most 16.
            for n in range(16):
                a.qp.post_send(send_wr(0x3000 + n, e.IBV_WR_RDMA_WRITE,
                                       [sge(src, 0, WRITE_SIZE)],
                                       remote=(dst, 0)))
                check_ok(a.poll()[0], 0x3000 + n, e.IBV_WC_RDMA_WRITE)
                if n and harness.link_counters(topo.b)["np_cnp_sent"] > cnps:
                    break
        finally:
            harness.run(*topo.a.cmd("tc", "qdisc", "del", "dev",
                                    topo.a.netdev, "root"))

        # A SEND before b's receive: RNR NAK, wait, SEND again.
        a.qp.post_send(send_wr(0x7272, e.IBV_WR_SEND,
                               [sge(src, 0, SEND_SIZE)]))
        time.sleep(0.2)
        b.qp.post_recv(recv_wr(0xb2, [sge(dst, 0, SEND_SIZE)]))
        check_ok(a.poll(timeout=20)[0], 0x7272, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 0xb2, e.IBV_WC_RECV, SEND_SIZE)

        # b's ACKs dropped for a while: a's ACK timer, then go-back-N.
        faults.set_knobs(topo.b.name, tx_drop=1000000)
        try:
            a.qp.post_send(send_wr(0x7173, e.IBV_WR_RDMA_WRITE,
                                   [sge(src, 0, SEND_SIZE)],
                                   remote=(dst, 0)))
            time.sleep(0.3)
        finally:
            faults.set_knobs(topo.b.name, tx_drop=0)
        check_ok(a.poll(timeout=20)[0], 0x7173, e.IBV_WC_RDMA_WRITE)
    finally:
        pair.close()
    return used


def test_trace_cmd_records_an_rc_exchange(wire, tmp_path):  # noqa: F811
    out = str(tmp_path / "srnic.dat")
    proc = record(out)
    try:
        used = exchange(wire)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    events = report(out)
    a, b = wire.a.name, wire.b.name
    aq, bq = used["a_qpn"], used["b_qpn"]
    names = sorted({ev for ev, *_ in events})
    print(f"{len(events)} events: {names}")

    def find(event, dev, **want):
        return [f for ev, d, f, _ in events if ev == event and d == dev and
                all(f.get(k) == v for k, v in want.items())]

    def texts(event, dev, qpn):
        return [t for ev, d, f, t in events
                if ev == event and d == dev and f.get("qpn") == qpn]

    # QP states, MR registration and deregistration.
    states = [t.split(None, 1)[1] for t in texts("srnic_qp_state", a, aq)]
    assert states[:3] == ["RESET -> INIT", "INIT -> RTR", "RTR -> RTS"], \
        states
    key = used["mr_key"]
    assert find("srnic_mr_reg", a, key=key, length=used["mr_len"]), events
    assert find("srnic_mr_dereg", a, key=key), events

    # The SEND: its WQE, packets out of a and into b, the ACK, completions.
    npsn = -(-SEND_SIZE // (128 << used["mtu"]))
    start = find("srnic_wqe_start", a, qpn=aq, wr_id=0x5e0d)
    assert start and start[0]["wr_opcode"] == IB_WR_SEND and \
        start[0]["len"] == SEND_SIZE and start[0]["npsn"] == npsn, start
    psn = start[0]["psn"]
    first = find("srnic_packet_tx", a, qpn=aq, dqpn=bq, psn=psn)
    assert first and first[0]["opcode"] == OP_SEND_FIRST, first
    assert first[0]["len"] == 128 << used["mtu"], first
    assert find("srnic_packet_rx", b, dqpn=bq, psn=psn), events
    assert find("srnic_packet_tx", b, qpn=bq, dqpn=aq,
                opcode=OP_ACKNOWLEDGE), events
    assert any("ack" in t.split() for t in texts("srnic_aeth_rx", a, aq))
    assert find("srnic_cqe", a, qpn=aq, wr_id=0x5e0d, status=0)
    assert find("srnic_cqe", b, qpn=bq, wr_id=0xb1, status=0,
                byte_len=SEND_SIZE)
    assert find("srnic_doorbell", a, qpn=aq), events

    # Congestion: CNPs from b to a, and a's rate cut.
    assert [t for t in texts("srnic_cnp", b, bq) if "sent" in t], events
    assert [t for t in texts("srnic_cnp", a, aq) if "received" in t], events
    assert [t for t in texts("srnic_rate_change", a, aq) if "cut" in t], \
        events

    # RNR, then the ACK timeout and going back N.
    assert [t for t in texts("srnic_nak_send", b, bq) if "rnr-nak" in t]
    assert texts("srnic_rnr_wait", a, aq), events
    assert texts("srnic_ack_timeout", a, aq), events
    assert [t for t in texts("srnic_retransmit", a, aq)
            if t.endswith("go-back-n")], events


def test_perf_trace_shows_mr_registration(wire):  # noqa: F811
    """perf trace -e srnic:srnic_mr_reg over a process registering an MR:
    one event with its device, key and length."""
    if not os.path.exists("/usr/bin/perf"):
        pytest.skip("perf (linux-perf) is not installed")
    harness.tracefs()
    script = ("import sys; from pyverbs.device import Context; "
              "from pyverbs.pd import PD; from pyverbs.mr import MR; "
              f"mr = MR(PD(Context(name='{wire.a.name}')), 12288, 1); "
              "print(f'key={mr.lkey:#x}'); sys.stdout.flush()")
    r = harness.run("perf", "trace", "--no-syscalls", "-e",
                    "srnic:srnic_mr_reg", "--", "python3", "-c", script,
                    timeout=120)
    key = int(re.search(r"key=(0x[0-9a-f]+)", r.stdout).group(1), 16)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines()
             if "srnic:srnic_mr_reg" in ln]
    print("\n".join(lines))
    # perf prints the fields by name: dev: "srnic0", key: 934, ...
    assert any(f'dev: "{wire.a.name}"' in ln and f"key: {key}," in ln and
               "length: 12288," in ln for ln in lines), (r.stdout, r.stderr)
