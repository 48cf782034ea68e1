# SPDX-License-Identifier: GPL-2.0
"""Memory windows through pyverbs over every topology (tests/topology.py):
type 1 windows bound with ibv_bind_mw(), type 2 windows bound with
IBV_WR_BIND_MW work requests, remote WRITE and READ through the window's
rkey (side a accesses side b's window), and what must be refused: an
access outside the window or beyond its rights (IBV_WC_REM_ACCESS_ERR,
nothing written), an access after LOCAL_INV, after a SEND with invalidate
(whose receive completion reports IBV_WC_WITH_INV and the rkey), after
dealloc_mw or after a type 1 window is unbound with length 0; a type 2
window serves only the QP it was bound through; binds that may not be made
(IBV_WC_MW_BIND_ERR) and invalidations that may not (IBV_WC_LOC_QP_OP_ERR).

In srnic-to-rxe the window is rxe's and srnic sends (SEND with invalidate
goes over the wire with an IETH); in rxe-to-srnic srnic's responder checks
rxe's requests. Run against rxe to validate the suite:
SRNIC_TEST_DEVICE_KIND=rxe.
"""
import errno

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.mr import MR, MW, MWBind, MWBindInfo  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.wr import SendWR  # noqa: E402

from rc_verbs import (RCPair, close_all, recv_wr, send_wr,  # noqa: E402
                      sge, status_name)
from topology import topology  # noqa: E402,F401 (fixture)

LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
MR_ACCESS = LW | e.IBV_ACCESS_MW_BIND   # no remote access of its own
MR_SIZE = 4096
WIN_OFF, WIN_LEN = 256, 1024            # the window inside b's MR
PATTERN = bytes((i * 7 + 3) & 0xff for i in range(MR_SIZE))


# Windows of the running test: deallocated before their contexts close,
# as rdma-core's tests do (a bound rxe window holds its QP: destroying the
# QP first makes rxe wait and warn).
WINDOWS = []


def close_windows():
    while WINDOWS:
        WINDOWS.pop().close()


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_windows()
    close_all()


def skip_if_rxe_window(rc, why):
    """For checks of srnic's responder that rxe (6.1) gets wrong."""
    if rc.b.end.kind != "srnic":
        pytest.skip(f"rxe: {why}")


@pytest.fixture
def rc(topology):
    p = RCPair(topology)
    p.connect()
    yield p
    close_windows()     # before the QPs they may be bound to
    p.close()


def inc_rkey(rkey):
    return (rkey & 0xffffff00) | ((rkey + 1) & 0xff)


def check_wc(wc, wr_id, opcode, status=e.IBV_WC_SUCCESS):
    assert wc.status == status, \
        f"wr_id {wc.wr_id}: {status_name(wc.status)}, " \
        f"expected {status_name(status)}"
    assert wc.wr_id == wr_id
    if status == e.IBV_WC_SUCCESS:
        assert wc.opcode == opcode


class Window:
    """b's MR (MW_BIND, no remote access of its own) filled with PATTERN,
    and a window of type mw_type on it."""

    def __init__(self, side, mw_type):
        self.side = side
        self.mr = side.mr(MR_SIZE, MR_ACCESS)
        self.mr.write(PATTERN, MR_SIZE, 0)
        self.mw = MW(side.pd, mw_type)
        WINDOWS.append(self.mw)
        self.type = mw_type
        self.rkey = self.mw.rkey
        self.base = self.mr.buf     # addresses stay those of the first MR

    @property
    def addr(self):
        return self.base + WIN_OFF

    def info(self, access=RW | RR, off=WIN_OFF, length=WIN_LEN):
        return MWBindInfo(self.mr, self.base + off, length, access)

    def bind(self, wr_id=900, access=RW | RR, off=WIN_OFF, length=WIN_LEN,
             qp=None, expect=e.IBV_WC_SUCCESS):
        """Bind (type 1: ibv_bind_mw; type 2: a BIND_MW WR) through qp
        (default: the side's) and wait for its completion."""
        qp = qp or self.side.qp
        info = self.info(access, off, length)
        # ibv_mw.rkey: updated by ibv_bind_mw() (type 1), never by a
        # BIND_MW WR (type 2), whose key pyverbs derives from it.
        expect_rkey = inc_rkey(self.mw.rkey)
        if self.type == e.IBV_MW_TYPE_1:
            qp.bind_mw(self.mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id))
            new_rkey = self.mw.rkey
        else:
            wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW)
            wr.set_bind_wr(self.mw, info)
            qp.post_send(wr)
            new_rkey = wr.rkey
        assert new_rkey == expect_rkey
        check_wc(self.side.poll()[0], wr_id, e.IBV_WC_BIND_MW, expect)
        if expect == e.IBV_WC_SUCCESS:
            self.rkey = new_rkey
        return new_rkey


def rdma(side, wr_id, opcode, local, rkey, addr, length, offset=0):
    """An RDMA WRITE (from) or READ (into) local at offset, length bytes,
    to or from addr under rkey; returns its completion."""
    wr = send_wr(wr_id, opcode, [sge(local, offset, length)])
    wr.set_wr_rdma(rkey, addr)
    side.qp.post_send(wr)
    return side.poll()[0]


def expect_rem_access_err(rc, win, opcode=e.IBV_WR_RDMA_WRITE, off=0,
                          length=16, rkey=None):
    """An access by a through win fails remotely, nothing written."""
    a = rc.a
    before = win.mr.read(MR_SIZE, 0)
    local = a.mr(MR_SIZE)
    local.write(b"\xee" * MR_SIZE, MR_SIZE, 0)
    wc = rdma(a, 77, opcode, local, win.rkey if rkey is None else rkey,
              win.addr + off, length)
    check_wc(wc, 77, None, e.IBV_WC_REM_ACCESS_ERR)
    assert win.mr.read(MR_SIZE, 0) == before, "nothing written"


# ---- the device -------------------------------------------------------------

def test_caps(rc):
    for side in rc.sides():
        flags = side.dev_attr.device_cap_flags
        assert flags & e.IBV_DEVICE_MEM_WINDOW
        assert flags & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B
        assert side.dev_attr.max_mw > 0


def test_alloc_types(rc):
    b = rc.b
    mr = b.mr(MR_SIZE, MR_ACCESS)
    mws = [MW(b.pd, t) for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2,
                                 e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2)]
    WINDOWS.extend(mws)
    keys = [mw.rkey for mw in mws]
    assert len(set(k >> 8 for k in keys)) == len(keys), keys
    assert mr.rkey >> 8 not in {k >> 8 for k in keys}
    with pytest.raises(PyverbsRDMAError) as ex:
        MW(b.pd, 3)
    assert ex.value.error_code == errno.EINVAL
    for mw in mws:
        mw.close()


# ---- binding and access ---------------------------------------------------

@pytest.mark.parametrize("mw_type", [e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2],
                         ids=["type1", "type2"])
def test_write_read_through_window(rc, mw_type):
    a, b = rc.a, rc.b
    win = Window(b, mw_type)
    old = win.rkey
    win.bind()
    assert win.rkey == inc_rkey(old)
    assert win.rkey >> 8 == old >> 8, "the index stays, the key byte moves"

    data = bytes(range(200))
    src = a.mr(MR_SIZE)
    src.write(data, len(data), 0)
    # The window's first and last bytes, and a span in between.
    for i, (off, n) in enumerate([(0, 200), (WIN_LEN - 200, 200)]):
        check_wc(rdma(a, 10 + i, e.IBV_WR_RDMA_WRITE, src, win.rkey,
                      win.addr + off, n), 10 + i, e.IBV_WC_RDMA_WRITE)
        assert win.mr.read(n, WIN_OFF + off) == data[:n]
    expect = bytearray(PATTERN)
    expect[WIN_OFF:WIN_OFF + 200] = data
    expect[WIN_OFF + WIN_LEN - 200:WIN_OFF + WIN_LEN] = data
    assert win.mr.read(MR_SIZE, 0) == bytes(expect), "only the window"

    dst = a.mr(MR_SIZE)
    wc = rdma(a, 20, e.IBV_WR_RDMA_READ, dst, win.rkey, win.addr, WIN_LEN)
    check_wc(wc, 20, e.IBV_WC_RDMA_READ)
    assert dst.read(WIN_LEN, 0) == bytes(expect[WIN_OFF:WIN_OFF + WIN_LEN])
    # The MR's own rkey grants nothing (the MR has no remote access).
    expect_rem_access_err(rc, win, rkey=win.mr.rkey)


@pytest.mark.parametrize("mw_type", [e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2],
                         ids=["type1", "type2"])
@pytest.mark.parametrize("case", ["past-end", "before-start", "no-read"])
def test_access_beyond_window_is_refused(rc, mw_type, case):
    if case != "no-read":
        skip_if_rxe_window(rc, "checks the MR's range, not the window's")
    win = Window(rc.b, mw_type)
    if case == "no-read":
        win.bind(access=RW)
        expect_rem_access_err(rc, win, opcode=e.IBV_WR_RDMA_READ)
    elif case == "past-end":
        win.bind()
        expect_rem_access_err(rc, win, off=WIN_LEN - 8, length=16)
    else:
        win.bind()
        expect_rem_access_err(rc, win, off=-8, length=16)


def test_stale_rkey_is_refused(rc):
    """After a rebind the old key byte no longer opens the window."""
    win = Window(rc.b, e.IBV_MW_TYPE_1)
    old = win.bind()
    win.bind()
    expect_rem_access_err(rc, win, rkey=old)


def test_type1_unbind_with_zero_length(rc):
    win = Window(rc.b, e.IBV_MW_TYPE_1)
    win.bind()
    win.bind(access=0, length=0)
    expect_rem_access_err(rc, win)


# ---- invalidation ---------------------------------------------------------

def test_local_invalidate(rc):
    b = rc.b
    win = Window(b, e.IBV_MW_TYPE_2)
    win.bind()
    b.qp.post_send(SendWR(wr_id=31, opcode=e.IBV_WR_LOCAL_INV,
                          imm_data=win.rkey))
    check_wc(b.poll()[0], 31, e.IBV_WC_LOCAL_INV)
    expect_rem_access_err(rc, win)


def test_local_invalidate_then_rebind(rc):
    """An invalidated type 2 window is free: it may be bound again, with a
    new key byte, and serves accesses again."""
    skip_if_rxe_window(rc, "names a type 2 MW by ibv_mw.rkey's stale key")
    a, b = rc.a, rc.b
    win = Window(b, e.IBV_MW_TYPE_2)
    win.bind()
    b.qp.post_send(SendWR(wr_id=32, opcode=e.IBV_WR_LOCAL_INV,
                          imm_data=win.rkey))
    check_wc(b.poll()[0], 32, e.IBV_WC_LOCAL_INV)
    win.bind()
    src = a.mr(64)
    src.write(b"\x42" * 64, 64, 0)
    check_wc(rdma(a, 33, e.IBV_WR_RDMA_WRITE, src, win.rkey, win.addr, 64),
             33, e.IBV_WC_RDMA_WRITE)
    assert win.mr.read(64, WIN_OFF) == b"\x42" * 64


def test_send_with_invalidate(rc):
    a, b = rc.a, rc.b
    win = Window(b, e.IBV_MW_TYPE_2)
    win.bind()
    rbuf = b.mr(256)
    b.qp.post_recv(recv_wr(41, [sge(rbuf)]))
    src = a.mr(64)
    src.write(b"invalidate me", 13, 0)
    wr = send_wr(42, e.IBV_WR_SEND_WITH_INV, [sge(src, 0, 13)],
                 imm=win.rkey)
    a.qp.post_send(wr)
    check_wc(a.poll()[0], 42, e.IBV_WC_SEND)
    wc = b.poll()[0]
    check_wc(wc, 41, e.IBV_WC_RECV)
    assert wc.byte_len == 13
    # rxe (6.1) copies the kernel's IB_WC_WITH_INVALIDATE (bit 2) into
    # the user CQE, where bit 2 means IBV_WC_IP_CSUM_OK.
    with_inv = e.IBV_WC_WITH_INV if b.end.kind == "srnic" else 1 << 2
    assert wc.wc_flags & with_inv
    assert not wc.wc_flags & e.IBV_WC_WITH_IMM
    assert wc.imm_data == win.rkey, "invalidated_rkey"
    assert rbuf.read(13, 0) == b"invalidate me"
    expect_rem_access_err(rc, win)


def test_send_with_invalidate_of_unknown_rkey(rc):
    """Invalidating what is no bound type 2 window is an invalid request
    (RC class J): the requester gets IBV_WC_REM_INV_REQ_ERR."""
    skip_if_rxe_window(rc, "invalidating a free MW oopses (NULL qp)")
    a, b = rc.a, rc.b
    win = Window(b, e.IBV_MW_TYPE_2)   # never bound: free
    rbuf = b.mr(256)
    b.qp.post_recv(recv_wr(43, [sge(rbuf)]))
    src = a.mr(64)
    a.qp.post_send(send_wr(44, e.IBV_WR_SEND_WITH_INV, [sge(src, 0, 8)],
                           imm=win.rkey))
    check_wc(a.poll()[0], 44, None, e.IBV_WC_REM_INV_REQ_ERR)


def test_invalidate_type1_is_refused(rc):
    b = rc.b
    win = Window(b, e.IBV_MW_TYPE_1)
    win.bind()
    b.qp.post_send(SendWR(wr_id=51, opcode=e.IBV_WR_LOCAL_INV,
                          imm_data=win.rkey))
    check_wc(b.poll()[0], 51, None, e.IBV_WC_LOC_QP_OP_ERR)


def test_dealloc_bound_window(rc):
    win = Window(rc.b, e.IBV_MW_TYPE_2)
    win.bind()
    win.mw.close()
    expect_rem_access_err(rc, win)


# ---- binds that may not be made -------------------------------------------

def test_type2_bound_twice_is_refused(rc):
    win = Window(rc.b, e.IBV_MW_TYPE_2)
    win.bind()
    wr = SendWR(wr_id=61, opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(win.mw, win.info())
    rc.b.qp.post_send(wr)
    check_wc(rc.b.poll()[0], 61, None, e.IBV_WC_MW_BIND_ERR)


def test_bind_needs_mw_bind_access(rc):
    b = rc.b
    mr = b.mr(MR_SIZE, LW)
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    WINDOWS.append(mw)
    wr = SendWR(wr_id=62, opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(mw, MWBindInfo(mr, mr.buf, 64, RW))
    b.qp.post_send(wr)
    check_wc(b.poll()[0], 62, None, e.IBV_WC_MW_BIND_ERR)


def test_bind_outside_mr_is_refused(rc):
    win = Window(rc.b, e.IBV_MW_TYPE_2)
    win.bind(off=MR_SIZE - 64, length=128, expect=e.IBV_WC_MW_BIND_ERR)


def test_type1_bind_through_post_send_is_einval(rc):
    skip_if_rxe_window(rc, "its provider posts the bind")
    win = Window(rc.b, e.IBV_MW_TYPE_1)
    wr = SendWR(wr_id=63, opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(win.mw, win.info())
    with pytest.raises(PyverbsRDMAError) as ex:
        rc.b.qp.post_send(wr)
    assert ex.value.error_code == errno.EINVAL


# ---- ownership -------------------------------------------------------------

def test_type2_serves_only_its_qp(rc):
    """A type 2B window bound through one QP refuses the requests another
    QP of the same PD receives."""
    other = rc.sibling()
    other.connect()
    win = Window(rc.b, e.IBV_MW_TYPE_2)
    win.bind()
    expect_rem_access_err(other, win)


def test_type1_serves_any_qp_of_its_pd(rc):
    other = rc.sibling()
    other.connect()
    win = Window(rc.b, e.IBV_MW_TYPE_1)
    win.bind()
    src = other.a.mr(64)
    src.write(b"\x17" * 64, 64, 0)
    check_wc(rdma(other.a, 71, e.IBV_WR_RDMA_WRITE, src, win.rkey,
                  win.addr, 64), 71, e.IBV_WC_RDMA_WRITE)
    assert win.mr.read(64, WIN_OFF) == b"\x17" * 64


def test_dereg_mr_under_bound_window(rc):
    """srnic lets the MR go; its window then opens nothing (rxe refuses
    the dereg instead)."""
    if rc.b.end.kind != "srnic":
        pytest.skip("rxe refuses dereg_mr of an MR with bound windows")
    win = Window(rc.b, e.IBV_MW_TYPE_2)
    win.bind()
    old = win.mr
    rc.b.mrs.remove(old)
    mr_rkey = old.rkey
    old.close()
    # A new MR (maybe on the same pages): the window must not reach it.
    win.mr = rc.b.mr(MR_SIZE, MR_ACCESS)
    win.mr.write(PATTERN, MR_SIZE, 0)
    assert win.mr.rkey != mr_rkey
    expect_rem_access_err(rc, win, off=0)


def test_mr_with_mw_bind_only(rc):
    """MW_BIND alone (with local write) registers; its own rkey grants
    no remote access."""
    mr = MR(rc.b.pd, MR_SIZE, MR_ACCESS)
    assert mr.lkey
    mr.close()

