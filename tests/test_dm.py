# SPDX-License-Identifier: GPL-2.0
"""Device memory (ibv_alloc_dm, kernel/srnic_dm.c, userspace/dm.cpp).

The API on one device: the reported max_dm_size follows the max_dm_kib
module parameter; allocation and free of many sizes and alignments; the
errors of invalid requests; the device-wide budget (exhausted, released by
free and by a killed process); copies in and out (fresh memory reads as
zeroes, what was written reads back, unaligned or out-of-bounds copies fail
with EINVAL); DM MR registration and its errors; a DM imported into a
context on a dup()ed command fd.

Traffic over the topologies of tests/topology.py: zero-based DM MRs as
SEND source and receive target, RDMA WRITE target and READ source, an MR at
an offset into its DM, remote accesses beyond a DM MR refused without
touching the memory around it. On the interop topologies only the srnic end
uses device memory (rxe has none); against rxe alone everything skips.
"""
import errno
import os
import random
import signal
import subprocess
import sys

import pytest

from harness import link_add, wait_for

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.device import AllocDmAttr, Context, DM  # noqa: E402
from pyverbs.mr import DMMR, MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

from rc_verbs import (RCPair, check_ok, close_all, recv_wr,  # noqa: E402
                      send_wr, sge, status_name)
from topology import topology  # noqa: E402,F401 (fixture)

PAGE = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
ZB = e.IBV_ACCESS_ZERO_BASED
PARAM = "/sys/module/srnic/parameters/max_dm_kib"
rng = random.Random(0xd3)


def payload(n):
    return rng.randbytes(n)


def expect_errno(code, fn, *args, **kwargs):
    with pytest.raises(PyverbsRDMAError) as info:
        fn(*args, **kwargs)
    assert info.value.error_code == code, str(info.value)


def read_param():
    with open(PARAM) as f:
        return int(f.read())


def write_param(kib):
    with open(PARAM, "w") as f:
        f.write(str(kib))


# ---- the API on one device -------------------------------------------------

@pytest.fixture
def ctx(srnic, veth):
    link_add("dm0", veth.a)
    c = Context(name="dm0")
    yield c
    c.close()


@pytest.fixture
def max_dm(ctx):
    size = ctx.query_device_ex().max_dm_size
    assert size > 0
    return size


def alloc(ctx, length, log_align=0, comp_mask=0):
    return DM(ctx, AllocDmAttr(length=length, log_align_req=log_align,
                               comp_mask=comp_mask))


def test_max_dm_size_is_the_module_parameter(ctx):
    assert ctx.query_device_ex().max_dm_size == read_param() * 1024


def test_max_dm_kib_applies_to_new_devices(srnic, veth):
    old = read_param()
    try:
        write_param(64)
        link_add("dm1", veth.b)
        with Context(name="dm1") as c:
            assert c.query_device_ex().max_dm_size == 64 * 1024
            DM(c, AllocDmAttr(length=64 * 1024)).close()
            expect_errno(errno.EINVAL, DM, c, AllocDmAttr(length=64 * 1024 + 4))
        write_param(0)
        link_add("dm2", veth.a)
        with Context(name="dm2") as c:
            assert c.query_device_ex().max_dm_size == 0
    finally:
        write_param(old)


@pytest.mark.parametrize("length", [4, 100, PAGE - 4, PAGE, PAGE + 4,
                                    5 * PAGE + 12])
@pytest.mark.parametrize("log_align", [0, 2, 6, 12])
def test_alloc_and_free(ctx, length, log_align):
    dm = alloc(ctx, length, log_align)
    dm.close()
    dm.close()  # a second close does nothing


def test_alloc_half_the_budget(ctx, max_dm):
    with alloc(ctx, max_dm // 2) as dm:
        data = payload(max_dm // 2)
        dm.copy_to_dm(0, data, len(data))
        assert dm.copy_from_dm(0, len(data)) == data


def test_alloc_errors(ctx, max_dm):
    expect_errno(errno.EINVAL, alloc, ctx, max_dm + 1)
    expect_errno(errno.EINVAL, alloc, ctx, 0)
    expect_errno(errno.EINVAL, alloc, ctx, 64, comp_mask=1)
    expect_errno(errno.EINVAL, alloc, ctx, 64, comp_mask=0x80)
    # Allocations are page aligned, no more.
    expect_errno(errno.EINVAL, alloc, ctx, 64, log_align=13)
    expect_errno(errno.EINVAL, alloc, ctx, 64, log_align=64)


def test_budget(ctx, max_dm):
    quarter = max_dm // 4
    dms = [alloc(ctx, quarter) for _ in range(4)]
    # Charged by pages: a 4-byte DM takes a page the budget no longer has.
    expect_errno(errno.ENOMEM, alloc, ctx, 4)
    dms.pop().close()
    dms.append(alloc(ctx, quarter))
    expect_errno(errno.ENOMEM, alloc, ctx, 4)
    for dm in dms:
        dm.close()
    alloc(ctx, max_dm).close()


def test_budget_is_per_device(ctx, max_dm, veth):
    link_add("dm1", veth.b)
    with alloc(ctx, max_dm), Context(name="dm1") as other:
        alloc(other, max_dm).close()


def test_budget_of_a_killed_process_is_released(ctx, max_dm):
    """A process that dies holding all of the budget gives it back."""
    script = (
        "import sys, time\n"
        "from pyverbs.device import AllocDmAttr, Context, DM\n"
        "c = Context(name='dm0')\n"
        f"dm = DM(c, AllocDmAttr(length={max_dm}))\n"
        f"dm.copy_to_dm(0, b'x' * 4096, 4096)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        expect_errno(errno.ENOMEM, alloc, ctx, 4)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()

    def full_alloc():
        try:
            alloc(ctx, max_dm).close()
            return True
        except PyverbsRDMAError as ex:
            assert ex.error_code == errno.ENOMEM, str(ex)
            return False
    wait_for(full_alloc, what="the killed process's device memory freed")


def test_fresh_memory_reads_as_zeroes(ctx):
    for _ in range(3):
        with alloc(ctx, 3 * PAGE) as dm:
            assert dm.copy_from_dm(0, 3 * PAGE) == bytes(3 * PAGE)
            dm.copy_to_dm(0, b"\xff" * 3 * PAGE, 3 * PAGE)


@pytest.mark.parametrize("offset,length", [(0, 4), (8, 100), (PAGE - 8, 16),
                                           (0, 3 * PAGE), (PAGE + 4, PAGE)])
def test_copy_round_trip(ctx, offset, length):
    with alloc(ctx, 3 * PAGE) as dm:
        data = payload(length)
        dm.copy_to_dm(offset, data, length)
        assert dm.copy_from_dm(offset, length) == data
        # Nothing around the range changed.
        whole = dm.copy_from_dm(0, 3 * PAGE)
        assert whole[:offset] == bytes(offset)
        assert whole[offset + length:] == bytes(3 * PAGE - offset - length)


@pytest.mark.parametrize("offset,length", [
    (3, 4),        # unaligned offset
    (4, 3),        # unaligned length
    (100, 4),      # past the length asked for (the page is there)
    (96, 8),       # crosses the end
    (0, 104),      # longer than the DM
    (PAGE, 4),     # past the mapping
    ((1 << 64) - 4, 8),  # wraps
])
def test_copy_out_of_bounds_is_einval(ctx, offset, length):
    with alloc(ctx, 100) as dm:
        dm.copy_to_dm(0, b"\x5a" * 100, 100)
        expect_errno(errno.EINVAL, dm.copy_to_dm, offset, b"\x00" * length,
                     length)
        expect_errno(errno.EINVAL, dm.copy_from_dm, offset, length)
        assert dm.copy_from_dm(0, 100) == b"\x5a" * 100


def test_dm_mr_registration(ctx):
    with alloc(ctx, 4 * PAGE) as dm, PD(ctx) as pd:
        for offset, length in [(0, 4 * PAGE), (0, 0), (100, 200),
                               (PAGE + 8, 2 * PAGE), (4 * PAGE, 0)]:
            mr = DMMR(pd, length, ZB | LW | RW | RR, dm, offset)
            assert mr.length == length
            assert mr.buf == 0
            assert mr.lkey == mr.rkey != 0
            mr.close()


def test_dm_mr_errors(ctx):
    with alloc(ctx, 100) as dm, PD(ctx) as pd:
        # libibverbs refuses a DM MR that is not zero based.
        expect_errno(errno.EINVAL, DMMR, pd, 100, LW, dm, 0)
        expect_errno(errno.EINVAL, DMMR, pd, 104, ZB | LW, dm, 0)
        expect_errno(errno.EINVAL, DMMR, pd, 4, ZB | LW, dm, 100)
        expect_errno(errno.EINVAL, DMMR, pd, 8, ZB | LW, dm, 96)
        # Remote write needs local write.
        expect_errno(errno.EINVAL, DMMR, pd, 100, ZB | RW, dm, 0)


def test_dm_mr_rereg_is_refused(ctx):
    """rereg_mr of a DM MR fails (uverbs answers EINVAL for an MR on device
    memory before the driver, whose rereg_user_mr would say EOPNOTSUPP) and
    leaves the MR as it was."""
    with alloc(ctx, 2 * PAGE) as dm, PD(ctx) as pd:
        mr = DMMR(pd, PAGE, ZB | LW, dm, 0)
        keys = (mr.lkey, mr.rkey)
        for flags, access in [(e.IBV_REREG_MR_CHANGE_ACCESS, ZB | LW | RW),
                              (e.IBV_REREG_MR_CHANGE_PD, 0)]:
            expect_errno(errno.EINVAL, mr.rereg, flags, pd, 0, 0, access)
        assert (mr.lkey, mr.rkey) == keys
        assert mr.length == PAGE
        mr.close()


def test_dm_mr_keeps_working_while_registered_twice(ctx):
    """Two MRs on one DM, closed in either order, and the DM after them."""
    dm = alloc(ctx, 2 * PAGE)
    pd = PD(ctx)
    a = DMMR(pd, 2 * PAGE, ZB | LW, dm, 0)
    b = DMMR(pd, PAGE, ZB | LW, dm, PAGE)
    assert a.lkey != b.lkey
    a.close()
    b.close()
    dm.close()
    pd.close()


def test_import_dm(ctx):
    """A DM imported into a context on a dup()ed command fd
    (ibv_import_device(), ibv_import_dm()) is the same memory."""
    with alloc(ctx, 2 * PAGE + 8) as dm:
        with Context(cmd_fd=os.dup(ctx.cmd_fd)) as imported_ctx:
            assert imported_ctx.query_device_ex().max_dm_size == \
                ctx.query_device_ex().max_dm_size
            imported = DM(imported_ctx, handle=dm.handle)
            data = payload(2 * PAGE + 8)
            dm.copy_to_dm(0, data, len(data))
            assert imported.copy_from_dm(0, len(data)) == data
            imported.copy_to_dm(PAGE, b"\x11" * 8, 8)
            assert dm.copy_from_dm(PAGE, 8) == b"\x11" * 8
            # Bounded by the length the owner asked for.
            expect_errno(errno.EINVAL, imported.copy_from_dm, 2 * PAGE + 8, 4)
            expect_errno(errno.ENOENT, DM, imported_ctx, handle=dm.handle + 1000)
            imported.unimport()
        # The owner's DM is still there.
        assert dm.copy_from_dm(0, 8) == data[:8]


# ---- traffic ----------------------------------------------------------------

@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


class Buf:
    """A zero-based DM MR on the side's device (srnic), or a plain MR (rxe,
    which has no device memory); both read and written through
    write(data, length, offset) and read(length, offset)."""

    def __init__(self, side, length, access=LW | RW | RR, dm_extra=0,
                 dm_offset=0):
        self.side = side
        self.dm = None
        if side.ctx.query_device_ex().max_dm_size:
            self.dm = DM(side.ctx, AllocDmAttr(length=length + dm_extra))
            self.mr = DMMR(side.pd, length, ZB | access, self.dm, dm_offset)
        else:
            self.mr = MR(side.pd, length, access)
        side.mrs.append(self.mr)

    @property
    def is_dm(self):
        return self.dm is not None


@pytest.fixture
def rc(topology):
    p = RCPair(topology)
    if not any(s.ctx.query_device_ex().max_dm_size for s in p.sides()):
        p.close()
        pytest.skip("no end has device memory (rxe)")
    p.connect()
    yield p
    p.close()


SIZES = [4, 1024, PAGE + 8, 65536 + 4, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_send_dm_to_dm(rc, size):
    a, b = rc.a, rc.b
    src, dst = Buf(a, size), Buf(b, size + 64)
    data = payload(size)
    src.mr.write(data, size)
    b.qp.post_recv(recv_wr(1, [sge(dst.mr)]))
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(src.mr)]))
    check_ok(a.poll()[0], 2, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 1, e.IBV_WC_RECV, size)
    assert dst.mr.read(size, 0) == data
    assert dst.mr.read(64, size) == bytes(64)


def test_send_gather_scatter_at_offsets(rc):
    """SGEs at offsets inside zero-based DM MRs, mixed with a plain MR."""
    a, b = rc.a, rc.b
    src, dst = Buf(a, 3 * PAGE), Buf(b, 3 * PAGE)
    plain = a.mr(PAGE)
    d1, d2 = payload(PAGE + 100), payload(500)
    src.mr.write(d1, len(d1), 1000)
    plain.write(d2, len(d2))
    b.qp.post_recv(recv_wr(1, [sge(dst.mr, 8, 1000),
                               sge(dst.mr, 2 * PAGE, PAGE)]))
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND,
                           [sge(src.mr, 1000, len(d1)),
                            sge(plain, 0, len(d2))]))
    check_ok(a.poll()[0], 2, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 1, e.IBV_WC_RECV, len(d1) + len(d2))
    got = dst.mr.read(1000, 8) + dst.mr.read(PAGE, 2 * PAGE)
    assert got[:len(d1) + len(d2)] == d1 + d2


@pytest.mark.parametrize("size", [4, PAGE + 8, 1 << 20])
def test_rdma_write_into_dm(rc, size):
    a, b = rc.a, rc.b
    src, dst = a.mr(size), Buf(b, size + 8)
    data = payload(size)
    src.write(data, size)
    a.qp.post_send(send_wr(3, e.IBV_WR_RDMA_WRITE, [sge(src)],
                           remote=(dst.mr, 4)))
    check_ok(a.poll()[0], 3, e.IBV_WC_RDMA_WRITE)
    assert dst.mr.read(size, 4) == data
    assert dst.mr.read(4, 0) == bytes(4)
    assert dst.mr.read(4, size + 4) == bytes(4)


@pytest.mark.parametrize("size", [4, PAGE + 8, 1 << 20])
def test_rdma_read_from_dm_into_dm(rc, size):
    a, b = rc.a, rc.b
    src, dst = Buf(b, size), Buf(a, size)
    data = payload(size)
    src.mr.write(data, size)
    a.qp.post_send(send_wr(4, e.IBV_WR_RDMA_READ, [sge(dst.mr)],
                           remote=(src.mr, 0)))
    check_ok(a.poll()[0], 4, e.IBV_WC_RDMA_READ, size)
    assert dst.mr.read(size, 0) == data


def test_mr_at_an_offset_into_its_dm(rc):
    """Address 0 of a DM MR registered at dm_offset is byte dm_offset of
    the DM: an RDMA WRITE there shows in the DM at that offset."""
    a, b = rc.a, rc.b
    dm_offset = PAGE + 12
    dst = Buf(b, 2 * PAGE, dm_extra=2 * PAGE, dm_offset=dm_offset)
    src = a.mr(2 * PAGE)
    data = payload(2 * PAGE)
    src.write(data, len(data))
    a.qp.post_send(send_wr(5, e.IBV_WR_RDMA_WRITE, [sge(src)],
                           remote=(dst.mr, 0)))
    check_ok(a.poll()[0], 5, e.IBV_WC_RDMA_WRITE)
    if dst.is_dm:
        whole = dst.dm.copy_from_dm(0, 4 * PAGE)
        assert whole[dm_offset:dm_offset + len(data)] == data
        assert whole[:dm_offset] == bytes(dm_offset)
        assert whole[dm_offset + len(data):] == bytes(
            4 * PAGE - dm_offset - len(data))
    else:
        assert dst.mr.read(len(data), 0) == data


def test_remote_write_beyond_a_dm_mr_is_refused(rc):
    """A WRITE that ends past the DM MR fails with a remote access error
    and leaves the DM (also the part outside the MR) untouched."""
    a, b = rc.a, rc.b
    dst = Buf(b, PAGE, dm_extra=2 * PAGE, dm_offset=PAGE)
    if not dst.is_dm:
        pytest.skip("the responder end (rxe) has no device memory")
    src = a.mr(2 * PAGE)
    src.write(b"\xee" * 2 * PAGE, 2 * PAGE)
    a.qp.post_send(send_wr(6, e.IBV_WR_RDMA_WRITE, [sge(src, 0, PAGE + 4)],
                           remote=(dst.mr, 0)))
    wc = a.poll()[0]
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status_name(wc.status)
    assert dst.dm.copy_from_dm(0, 3 * PAGE) == bytes(3 * PAGE)


def test_remote_write_to_a_dm_mr_without_remote_write(rc):
    a, b = rc.a, rc.b
    dst = Buf(b, PAGE, access=LW | RR)
    if not dst.is_dm:
        pytest.skip("the responder end (rxe) has no device memory")
    src = a.mr(PAGE)
    a.qp.post_send(send_wr(7, e.IBV_WR_RDMA_WRITE, [sge(src)],
                           remote=(dst.mr, 0)))
    wc = a.poll()[0]
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status_name(wc.status)
    assert dst.mr.read(PAGE, 0) == bytes(PAGE)


def test_dm_mr_traffic_after_free_and_realloc(rc):
    """Keys of closed DM MRs miss; new DM MRs work (no stale pages)."""
    a, b = rc.a, rc.b
    old = Buf(b, PAGE)
    old_rkey = old.mr.rkey
    old.mr.close()
    if old.dm is not None:
        old.dm.close()
    new = Buf(b, PAGE)
    src = a.mr(PAGE)
    data = payload(PAGE)
    src.write(data, PAGE)
    a.qp.post_send(send_wr(8, e.IBV_WR_RDMA_WRITE, [sge(src)],
                           remote=(new.mr, 0)))
    check_ok(a.poll()[0], 8, e.IBV_WC_RDMA_WRITE)
    assert new.mr.read(PAGE, 0) == data
    if new.mr.rkey != old_rkey:
        wr = send_wr(9, e.IBV_WR_RDMA_WRITE, [sge(src)])
        wr.set_wr_rdma(old_rkey, 0)
        a.qp.post_send(wr)
        wc = a.poll()[0]
        assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status_name(wc.status)
