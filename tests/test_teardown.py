# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --smp 2
"""Teardown and object lifetimes under traffic.

Two processes (tests/teardown_peer.py), one per end of the veth-two-netns
topology (tests/topology.py), stream RDMA WRITEs to each other over the
RoCEv2 wire, each with receives posted that nobody consumes. Then one of
them, or what is under it, goes away mid-transfer: kill -9, `rdma link
delete`, the netdev, the netns, the IP address, the MR the peer writes
to, or its QP (destroyed with WRITEs outstanding, then CQ, MR and PD in
every order the API allows). Each time:

  * the kernel survives (the VM console is checked for splats);
  * a surviving peer's QP goes to the error state: its WRITEs complete
    with an error (IBV_WC_RETRY_EXC_ERR: nobody answers any more, or
    IBV_WC_REM_ACCESS_ERR for the deregistered MR), then everything still
    posted, receives included, completes with IBV_WC_WR_FLUSH_ERR, all
    within a bounded time;
  * a process whose device went away gets IBV_EVENT_DEVICE_FATAL;
  * srnic's object counts, as `rdma resource show` reports them, return to
    zero once the processes are gone.

Finally srnic is removed with rmmod while traffic runs, and once more at
rest. The destroy orders that include an SRQ are in tests/test_srq.py
(test_destroy_orders_mid_transfer).
"""
import json
import os
import select
import subprocess
import time

import pytest

import harness
import topology

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "teardown_peer.py")
WC_SUCCESS, WC_WR_FLUSH_ERR, WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR = 0, 5, 10, 12
RECVS = 32              # teardown_peer.RECVS
# Bounds: an error completion within ERROR_SECONDS of the event (3 retries
# of the peers' ACK timeout, 67 ms by default, doubled each time, under
# TCG), a summary within SUMMARY_SECONDS. Both scale with the ACK timeout
# exponent SRNIC_TEST_ACK_TIMEOUT (teardown_peer.ACK_TIMEOUT, default 14;
# scripts/debug-kernel.sh sets a larger one), as the peers' drain waits and
# every other wait here do (a larger ACK timeout means a slower kernel).
ACK_TIMEOUT = int(os.environ.get("SRNIC_TEST_ACK_TIMEOUT", "14"))
TIME_SCALE = 2 ** max(0, ACK_TIMEOUT - 14)
ERROR_SECONDS = 20 * TIME_SCALE
SUMMARY_SECONDS = 2 * ERROR_SECONDS + 20


class Peer:
    """One teardown_peer.py process on one end."""

    def __init__(self, end):
        self.end = end
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", PEER, end.name, str(end.gid_index)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        self.buf = b""
        self.lines = []
        self.hello = json.loads(self.wait_line(lambda l: l.startswith("{"),
                                               60 * TIME_SCALE))

    def _read(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.lines.append(line.decode(errors="replace"))
        return True

    def wait_line(self, pred, timeout, start=0):
        deadline = time.monotonic() + timeout
        seen = start
        while True:
            for line in self.lines[seen:]:
                if pred(line):
                    return line
            seen = len(self.lines)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{self.end.name} peer: nothing matching after "
                    f"{timeout}s; output: {self.lines[-20:]}")
            if self._read(min(left, 0.5)) is None:
                for line in self.lines[seen:]:
                    if pred(line):
                        return line
                raise AssertionError(
                    f"{self.end.name} peer exited "
                    f"{self.proc.wait()}: {self.lines[-20:]}")

    def start(self, other):
        info = dict(other.hello, gid=other.end.gid)
        self.send(json.dumps(info))

    def send(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def progress(self):
        n = 0
        for line in self.lines:
            if line.startswith("progress "):
                n = int(line.split()[1])
        return n

    def wait_progress(self, writes, timeout=60 * TIME_SCALE):
        """Wait until the peer completed at least writes WRITEs."""
        deadline = time.monotonic() + timeout
        while self.progress() < writes:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.end.name}: no traffic: {self.lines[-10:]}")
            if self._read(0.5) is None:
                raise AssertionError(f"{self.end.name} exited: "
                                     f"{self.lines[-10:]}")

    def summary(self, timeout=SUMMARY_SECONDS):
        line = self.wait_line(lambda l: l.startswith('{"event"'), timeout)
        s = json.loads(line)
        assert self.proc.wait(timeout=30) == 0, self.lines[-10:]
        return s

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        self.kill()
        self.proc.stdin.close()
        self.proc.stdout.close()


def status_count(s, status):
    return s["statuses"].get(str(status), 0)


# What a survivor's WRITEs end with when the other end is gone: no answer
# at all; or, while the other end's objects are being destroyed (process
# exit and device removal destroy its MR while its QP still answers), a
# NAK for the rkey that no longer exists.
GONE = (WC_RETRY_EXC_ERR, WC_REM_ACCESS_ERR)


def assert_peer_errored(s, first_errors=(WC_RETRY_EXC_ERR,)):
    """A survivor's QP went to the error state: its first error is one of
    first_errors, and everything still posted was flushed, receives
    included."""
    assert s["event"] == "error", s
    assert s["first_error"] in first_errors, s
    assert s["outstanding"] == 0 and s["recvs"] == 0, s
    assert status_count(s, WC_WR_FLUSH_ERR) >= RECVS, s
    assert not s["fatal"], s


def assert_fatal(s):
    """The process got IBV_EVENT_DEVICE_FATAL. Before it, while ib_core
    destroyed its objects, WQEs may have completed in error (the MR
    deregistered under a WRITE: IBV_WC_LOC_PROT_ERR) or a post may have
    failed."""
    assert s["fatal"], s
    assert s["event"] in ("fatal", "post_error", "error"), s


def srnic_counts():
    """{ibdev: {pd, cq, qp, mr, ctx}} of the srnic devices (the topology's
    srnic0 and srnic1; devices of every netns show, ib_core's default
    shared mode), the kernel's own objects (ib_mad's QP1 and the like) left
    out (harness.rdma_user_counts())."""
    return {name: c for name, c in harness.rdma_user_counts().items()
            if name.startswith("srnic")}


def assert_counts_zero(timeout=15 * TIME_SCALE):
    zero = {"pd": 0, "cq": 0, "qp": 0, "mr": 0, "ctx": 0}

    def done():
        # No srnic device left at all counts too.
        return all(c == zero for c in srnic_counts().values())
    try:
        harness.wait_for(done, timeout=timeout, what="srnic objects released")
    except AssertionError as ex:
        raise AssertionError(f"{ex}: {srnic_counts()}") from None


class Topo:
    """veth-two-netns, rebuilt when a test took it apart."""

    def __init__(self):
        self.topo = self.veth = None

    def get(self):
        if self.topo is not None:
            have = set(harness.rdma_devs())
            if {self.topo.a.name, self.topo.b.name} <= have:
                return self.topo
            self.close()
        self.topo, self.veth = topology.build("veth-two-netns",
                                              kind="srnic")
        return self.topo

    def close(self):
        if self.topo is not None:
            topology.teardown(self.topo, self.veth)
            self.topo = self.veth = None


@pytest.fixture(scope="module")
def topo_holder():
    holder = Topo()
    yield holder
    holder.close()


@pytest.fixture
def pair(topo_holder):
    """Both peers running, WRITEs flowing both ways."""
    topo = topo_holder.get()
    peers = []
    try:
        a = Peer(topo.a)
        peers.append(a)
        b = Peer(topo.b)
        peers.append(b)
        a.start(b)
        b.start(a)
        for p in peers:
            p.wait_line(lambda l: l == "connected", 60 * TIME_SCALE)
        for p in peers:
            p.send("go")
        for p in peers:
            p.wait_line(lambda l: l == "running", 60 * TIME_SCALE)
        for p in peers:
            p.wait_progress(32)
        yield topo, a, b
    finally:
        for p in peers:
            p.close()


def test_kill9_mid_transfer(pair):
    topo, a, b = pair
    a.proc.kill()
    a.proc.wait()
    s = b.summary()
    assert_peer_errored(s, GONE)
    assert s["t_error"] is not None
    assert_counts_zero()


def test_rdma_link_delete_mid_transfer(pair):
    topo, a, b = pair
    t0 = time.monotonic()
    harness.run("rdma", "link", "delete", topo.a.name, timeout=60)
    assert time.monotonic() - t0 < 30 * TIME_SCALE
    assert_fatal(a.summary())
    assert_peer_errored(b.summary(), GONE)
    assert topo.a.name not in harness.rdma_devs()
    assert_counts_zero()


def test_address_removal_mid_transfer(pair):
    """The address under A's GID goes: A's packets cannot leave with it
    and B's cannot reach it, so both QPs run out of retries; neither
    device goes away."""
    topo, a, b = pair
    harness.run("ip", "addr", "del", f"{topo.a.addr}/24", "dev",
                topo.a.netdev, netns=topo.a.netns)
    try:
        assert_peer_errored(a.summary())
        assert_peer_errored(b.summary())
        assert_counts_zero()
    finally:
        harness.run("ip", "addr", "add", f"{topo.a.addr}/24", "dev",
                    topo.a.netdev, netns=topo.a.netns, check=False)
        topo.a.resolve_gid()


def test_netdev_removal_mid_transfer(pair):
    """Deleting the veth removes both ends, so both devices go."""
    topo, a, b = pair
    harness.run("ip", "link", "del", topo.a.netdev, netns=topo.a.netns,
                timeout=60)
    assert_fatal(a.summary())
    assert_fatal(b.summary())
    harness.wait_for(lambda: not {topo.a.name, topo.b.name} &
                     set(harness.rdma_devs()), timeout=30,
                     what="both devices removed")
    assert_counts_zero()


def test_netns_deletion_mid_transfer(pair):
    """Deleting A's netns takes its veth end, and so the pair, with it."""
    topo, a, b = pair
    harness.run("ip", "netns", "del", topo.a.netns, timeout=60)
    assert_fatal(a.summary())
    assert_fatal(b.summary())
    harness.wait_for(lambda: not {topo.a.name, topo.b.name} &
                     set(harness.rdma_devs()), timeout=60,
                     what="both devices removed")
    assert_counts_zero()


def test_mr_dereg_under_inflight_writes(pair):
    """B deregisters the MR A's WRITEs target: A's next WRITE completes
    with IBV_WC_REM_ACCESS_ERR, and B's memory is not written after its
    deregistration returned."""
    topo, a, b = pair
    b.send("dereg")
    b.wait_line(lambda l: l == "dereg done", 30)
    sa = a.summary()
    assert sa["event"] == "error" and \
        sa["first_error"] == WC_REM_ACCESS_ERR, sa
    assert sa["outstanding"] == 0 and sa["recvs"] == 0, sa
    b.send("stop")
    sb = b.summary()
    assert sb["mr_intact"] is True, sb
    assert sb["dereg_seconds"] < 10, sb
    assert_counts_zero()


# Every order of destroying QP, CQ, MR and PD that the API allows: the QP
# before its CQ and PD, the MR before its PD. (ib_core refuses the others
# with EBUSY: tests/test_uverbs_hostile.py.)
ORDERS = ["qp,cq,mr,pd", "qp,mr,cq,pd", "qp,mr,pd,cq", "mr,qp,cq,pd",
          "mr,qp,pd,cq"]


@pytest.mark.parametrize("order", ORDERS)
def test_destroy_with_writes_outstanding(pair, order):
    """A destroys its QP with WRITEs in flight, then the rest in order;
    B's QP runs out of retries and flushes."""
    topo, a, b = pair
    a.send(f"destroy {order}")
    sa = a.summary()
    assert sa["event"] == "destroyed", sa
    assert all(t < 10 for t in sa["destroy_times"].values()), sa
    sb = b.summary()
    # B's WRITEs target A's MR: when it goes first, a WRITE of B's may
    # reach A's still-live QP after it and be refused.
    assert_peer_errored(sb, GONE if order.startswith("mr") else
                        (WC_RETRY_EXC_ERR,))
    assert_counts_zero()


def test_stop_and_close_cleanly(pair):
    """The baseline: both stop, drain and close; nothing is left."""
    topo, a, b = pair
    a.send("stop")
    b.send("stop")
    for p in (a, b):
        s = p.summary()
        assert s["event"] == "stopped" and s["outstanding"] == 0, s
        assert set(s["statuses"]) == {str(WC_SUCCESS)}, s
    assert_counts_zero()


def test_rmmod_mid_transfer(pair):
    """rmmod with both devices open and busy: uverbs disassociates the
    processes (IBV_EVENT_DEVICE_FATAL) and the module goes."""
    topo, a, b = pair
    t0 = time.monotonic()
    harness.run("modprobe", "-r", "srnic", timeout=120)
    assert time.monotonic() - t0 < 60 * TIME_SCALE
    assert not harness.module_loaded()
    assert_fatal(a.summary())
    assert_fatal(b.summary())


def test_rmmod_at_rest(topo_holder):
    """Build it all again, then take it down and rmmod: nothing leaked."""
    topo_holder.get()
    assert_counts_zero()
    topo_holder.close()
    harness.run("modprobe", "-r", "srnic", timeout=120)
    assert not harness.module_loaded()
