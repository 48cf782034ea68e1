# SPDX-License-Identifier: GPL-2.0
"""RC traffic through srnic's local delivery: two QPs of one device, and
two srnic devices on the two ends of a veth pair in one namespace. Every
opcode's payload is checked byte for byte; error completions and the
tools (ibv_rc_pingpong -c, perftest) run too.
"""
import contextlib
import random
import subprocess
import time
from types import SimpleNamespace

import pytest

from harness import (ipv4_gid, link_add, link_counters, port_gids, run,
                     wait_for)

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.addr import AHAttr, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import (QP, QPAttr, QPCap, QPEx, QPInitAttr,  # noqa: E402
                        QPInitAttrEx)
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402

ADDR_A, ADDR_B = "198.18.9.1", "198.18.9.2"
BUF = 3 * 4096 + 123
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)


def gid_index(dev, addr):
    gid = ipv4_gid(addr)
    return wait_for(lambda: [i for i, g, t in port_gids(dev)
                             if g == gid and t == "RoCE v2"],
                    what=f"GID of {addr}")[0]


class RcEnd:
    """One RC QP with its CQ and a registered buffer, on device dev."""

    def __init__(self, dev, gidx, access=ACCESS, rnr_retry=7,
                 min_rnr_timer=1, split_cq=False, buf=BUF, send_ops=0,
                 cq_ex=False):
        self.ctx = Context(name=dev)
        self.gidx = gidx
        self.pd = PD(self.ctx)
        # cq_ex: an extended CQ (ibv_create_cq_ex), read with the
        # start/next/end poll API, as perftest 25 makes them.
        self.cq = CQEX(self.ctx, CqInitAttrEx(
            cqe=64, wc_flags=e.IBV_WC_STANDARD_FLAGS)) if cq_ex \
            else CQ(self.ctx, 64)
        # With split_cq, receives complete to a CQ of their own (rcq).
        self.rcq = CQ(self.ctx, 64) if split_cq else self.cq
        self.buf = buf
        self.mr = MR(self.pd, buf, access)
        cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=4,
                    max_recv_sge=4, max_inline_data=64)
        init = QPAttr(port_num=1)
        init.qp_access_flags = ACCESS   # what the responder allows
        # Only WRs posted with IBV_SEND_SIGNALED complete successfully.
        if send_ops:
            # An extended QP, posted to through the ibv_wr_* builders.
            self.qp = QPEx(self.ctx, QPInitAttrEx(
                qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.rcq, cap=cap,
                sq_sig_all=0, pd=self.pd, send_ops_flags=send_ops,
                comp_mask=e.IBV_QP_INIT_ATTR_PD |
                e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
            self.qp.to_init(init)
        else:
            self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC,
                                             scq=self.cq, rcq=self.rcq,
                                             cap=cap, sq_sig_all=0),
                         init)
        self.rnr_retry = rnr_retry
        self.min_rnr_timer = min_rnr_timer

    def connect(self, peer):
        attr = QPAttr(port_num=1)
        attr.path_mtu = e.IBV_MTU_1024
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = self.min_rnr_timer
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = self.rnr_retry
        gr = GlobalRoute(dgid=peer.ctx.query_gid(1, peer.gidx),
                         sgid_index=self.gidx)
        attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        attr.dest_qp_num = peer.qp.qp_num
        attr.rq_psn = 0
        attr.sq_psn = 0
        self.qp.to_rts(attr)

    def poll(self, count=1, timeout=10, cq=None):
        cq = self.cq if cq is None else cq
        wcs = []
        read = poll_ex if isinstance(cq, CQEX) else \
            (lambda cq, n: cq.poll(n)[1])
        wait_for(lambda: wcs.extend(read(cq, count - len(wcs))) or
                 len(wcs) >= count, timeout=timeout, interval=0.001,
                 what="completions")
        return wcs

    def close(self):
        self.ctx.close()


def poll_ex(cq, n):
    """Up to n completions of an extended CQ, in one start/next/end
    session, as (wr_id, status, opcode, qp_num) namespaces."""
    wcs = []
    if cq.start_poll(PollCqAttr()) != 0:
        return wcs
    try:
        while True:
            wcs.append(SimpleNamespace(wr_id=cq.wr_id, status=cq.status,
                                       opcode=cq.read_opcode(),
                                       qp_num=cq.read_qp_num()))
            if len(wcs) == n or cq.poll_next() != 0:
                return wcs
    finally:
        cq.end_poll()


def ex_post(end, wr_id, op, *op_args, sge=None, inline=None, signaled=True):
    """One work request, a batch of its own, through the ibv_wr_* builders
    of end's extended QP (RcEnd with send_ops): op names the builder
    (rdma_write, send, send_imm) and op_args are its arguments; the payload
    is sge (an SGE) or inline ((address, length), IBV_SEND_INLINE)."""
    qp = end.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = (e.IBV_SEND_SIGNALED if signaled else 0) | \
        (e.IBV_SEND_INLINE if inline else 0)
    getattr(qp, f"wr_{op}")(*op_args)
    if inline:
        qp.wr_set_inline_data(*inline)
    else:
        qp.wr_set_sge(sge)
    qp.wr_complete()


def make_devices(veth, two):
    """srnic0 on veth.a (ADDR_A) and, if two, srnic1 on veth.b (ADDR_B);
    returns [(device, GID index)] for the two ends of a connection."""
    # ib_core resolves the peer MAC by ARP between two local addresses.
    run("sysctl", "-qw", f"net.ipv4.conf.{veth.a}.accept_local=1",
        f"net.ipv4.conf.{veth.b}.accept_local=1")
    run("ip", "addr", "add", f"{ADDR_A}/24", "dev", veth.a)
    run("ip", "addr", "add", f"{ADDR_B}/24", "dev", veth.b)
    link_add("srnic0", veth.a)
    first = ("srnic0", gid_index("srnic0", ADDR_A))
    if not two:
        return [first, first]
    link_add("srnic1", veth.b)
    return [first, ("srnic1", gid_index("srnic1", ADDR_B))]


@contextlib.contextmanager
def connected_pairs(devs):
    """make(a={...}, b={...}) -> two RcEnds (on devs[0] and devs[1], with
    those keyword arguments) connected to each other; all closed after."""
    ends = []

    def make(**kw):
        a = RcEnd(*devs[0], **kw.get("a", {}))
        b = RcEnd(*devs[1], **kw.get("b", {}))
        a.connect(b)
        b.connect(a)
        ends.extend([a, b])
        return a, b
    try:
        yield make
    finally:
        for end in ends:
            end.close()


@pytest.fixture(params=["one-device", "two-devices"])
def pair(request, srnic, veth):
    with connected_pairs(make_devices(veth, request.param == "two-devices")) \
            as make:
        yield make


def fill(end, seed):
    data = random.Random(seed).randbytes(end.buf)
    end.mr.write(data, end.buf)
    return data


def test_send_and_send_with_imm_scatter_across_sges(pair):
    a, b = pair()
    data = fill(a, 1)
    fill(b, 2)
    # Receive into three pieces of b's buffer, out of order.
    pieces = [(4096, 1000), (0, 3000), (8192, 4096)]
    b.qp.post_recv(RecvWR(wr_id=7, num_sge=3, sg=[
        SGE(b.mr.buf + off, n, b.mr.lkey) for off, n in pieces]))
    b.qp.post_recv(RecvWR(wr_id=8, num_sge=1, sg=[SGE(b.mr.buf, BUF, b.mr.lkey)]))
    length = 7000
    a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=2, sg=[
        SGE(a.mr.buf, 5000, a.mr.lkey), SGE(a.mr.buf + 6000, 2000, a.mr.lkey)],
        send_flags=e.IBV_SEND_SIGNALED))
    (wc,) = a.poll()
    assert (wc.status, wc.opcode, wc.wr_id) == (e.IBV_WC_SUCCESS, e.IBV_WC_SEND, 1)
    (rwc,) = b.poll()
    assert (rwc.status, rwc.opcode, rwc.wr_id, rwc.byte_len) == \
        (e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 7, length)
    assert rwc.src_qp == a.qp.qp_num
    sent = data[:5000] + data[6000:8000]
    got = b.mr.read(BUF, 0)
    assert got[4096:5096] + got[0:3000] + got[8192:8192 + 3000] == sent

    imm = 0x12345678
    a.qp.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND_WITH_IMM, imm_data=imm,
                          num_sge=1, sg=[SGE(a.mr.buf, 10, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    a.poll()
    (rwc,) = b.poll()
    assert rwc.wc_flags & e.IBV_WC_WITH_IMM and rwc.imm_data == imm
    assert b.mr.read(10, 0) == data[:10]


def test_inline_send(pair):
    a, b = pair()
    fill(b, 3)
    b.qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(b.mr.buf, BUF, b.mr.lkey)]))
    payload = bytes(range(60))
    a.mr.write(payload, len(payload))
    a.qp.post_send(SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(a.mr.buf, len(payload), a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE))
    a.poll()
    (rwc,) = b.poll()
    assert rwc.byte_len == len(payload)
    assert b.mr.read(len(payload), 0) == payload


def test_rdma_write_write_imm_and_read(pair):
    a, b = pair()
    data_a = fill(a, 5)
    data_b = fill(b, 6)
    w = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(a.mr.buf + 100, 9000, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(b.mr.rkey, b.mr.buf)
    a.qp.post_send(w)
    (wc,) = a.poll()
    assert (wc.status, wc.opcode) == (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)
    expected = bytearray(data_b)
    expected[0:9000] = data_a[100:9100]
    assert b.mr.read(BUF, 0) == bytes(expected)

    b.qp.post_recv(RecvWR(wr_id=9, num_sge=1,
                          sg=[SGE(b.mr.buf, 0, b.mr.lkey)]))
    w = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, imm_data=77,
               num_sge=1, sg=[SGE(a.mr.buf, 50, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(b.mr.rkey, b.mr.buf + 5000)
    a.qp.post_send(w)
    a.poll()
    (rwc,) = b.poll()
    assert (rwc.opcode, rwc.imm_data, rwc.byte_len, rwc.wr_id) == \
        (e.IBV_WC_RECV_RDMA_WITH_IMM, 77, 50, 9)
    assert b.mr.read(50, 5000) == data_a[:50]

    r = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_READ, num_sge=2, sg=[
        SGE(a.mr.buf, 100, a.mr.lkey), SGE(a.mr.buf + 8000, 4000, a.mr.lkey)],
        send_flags=e.IBV_SEND_SIGNALED)
    r.set_wr_rdma(b.mr.rkey, b.mr.buf + 7000)
    a.qp.post_send(r)
    (wc,) = a.poll()
    assert (wc.status, wc.opcode, wc.byte_len) == \
        (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_READ, 4100)
    remote = b.mr.read(4100, 7000)
    assert a.mr.read(100, 0) == remote[:100]
    assert a.mr.read(4000, 8000) == remote[100:]


def test_unsignaled_writes_complete_in_order(pair):
    a, b = pair()
    fill(b, 0)
    for i in range(20):
        a.mr.write(bytes([i]) * 16, 16, i * 16)
        w = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                   sg=[SGE(a.mr.buf + i * 16, 16, a.mr.lkey)],
                   send_flags=e.IBV_SEND_SIGNALED if i == 19 else 0)
        w.set_wr_rdma(b.mr.rkey, b.mr.buf + i * 16)
        a.qp.post_send(w)
    (wc,) = a.poll()
    assert wc.wr_id == 19 and wc.status == e.IBV_WC_SUCCESS
    assert b.mr.read(320, 0) == b"".join(bytes([i]) * 16 for i in range(20))


def test_remote_access_error_moves_both_qps_to_error(pair):
    a, b = pair()
    fill(b, 8)
    w = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(a.mr.buf, 64, a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(b.mr.rkey ^ 0x100, b.mr.buf)   # another key
    a.qp.post_send(w)
    b.qp.post_recv(RecvWR(wr_id=5, num_sge=1, sg=[SGE(b.mr.buf, 64, b.mr.lkey)]))
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR
    # The responder went to the error state: its receive is flushed.
    (rwc,) = b.poll()
    assert (rwc.status, rwc.wr_id) == (e.IBV_WC_WR_FLUSH_ERR, 5)
    # And so did the requester: later posts are flushed.
    a.qp.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(a.mr.buf, 0, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    (wc,) = a.poll()
    assert (wc.status, wc.wr_id) == (e.IBV_WC_WR_FLUSH_ERR, 2)


def test_rnr_retry_exhaustion(pair):
    a, b = pair(a={"rnr_retry": 1})
    a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(a.mr.buf, 0, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR


def test_rnr_retries_wait_the_responders_rnr_timer(pair):
    """Each RNR retry waits the responder's min_rnr_timer (code 20: 10.24
    ms) first, and each RNR answer counts in rnr_naks_received."""
    a, b = pair(a={"rnr_retry": 2}, b={"min_rnr_timer": 20})
    dev = SimpleNamespace(name=a.ctx.name, cmd=lambda *argv: list(argv))
    before = link_counters(dev)["rnr_naks_received"]
    t0 = time.monotonic()
    a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(a.mr.buf, 0, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    (wc,) = a.poll()
    elapsed = time.monotonic() - t0
    assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR
    # Three tries (the first and rnr_retry = 2 more), two waits between.
    assert elapsed >= 2 * 0.01024, elapsed
    assert link_counters(dev)["rnr_naks_received"] - before == 3


def test_rnr_waits_for_a_late_receive(pair):
    a, b = pair()   # rnr_retry 7: retry forever
    a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(a.mr.buf, 8, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    b.qp.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(b.mr.buf, 8, b.mr.lkey)]))
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_SUCCESS
    assert b.poll()[0].wr_id == 3


def pingpong_listening(port=18515):
    """Whether a TCP socket listens on port (ibv_rc_pingpong's default)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


@pytest.mark.parametrize("size", [1, 4096, 65536, 1048576])
def test_ibv_rc_pingpong_checks_data(srnic, veth, size):
    (_, ga), (_, gb) = make_devices(veth, two=True)
    server = subprocess.Popen(["ibv_rc_pingpong", "-d", "srnic0", "-g", str(ga),
                               "-s", str(size), "-n", "20", "-c", "-e"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        # Not a fixed sleep: on a loaded host the server takes seconds to
        # open the device and listen (the client then cannot connect).
        wait_for(lambda: pingpong_listening() or server.poll() is not None,
                 timeout=30, what="ibv_rc_pingpong server to listen")
        client = run("ibv_rc_pingpong", "-d", "srnic1", "-g", str(gb), "-s",
                     str(size), "-n", "20", "-c", "127.0.0.1", timeout=60)
        assert "20 iters" in client.stdout
        out, _ = server.communicate(timeout=60)
        assert server.returncode == 0, out
    finally:
        if server.poll() is None:
            server.kill()
