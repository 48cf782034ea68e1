# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --smp 2
"""uverbs called directly, around the provider, with malformed driver data.

Each case writes a legacy uverbs command (tests/uverbs_raw.py) whose core
part is well formed and whose srnic driver data (srnic-abi.h) is not: wrong
sizes, a provider ABI version the kernel does not speak, non-zero reserved
or trailing bytes, huge queue depths, handles of nothing or of the wrong
object type, ring offsets and lengths that were never handed out. Each gets
the exact errno srnic's code (or ib_core, where it decides first) gives and
rdma-core expects, never a kernel splat (the VM console is checked).

The last part drives RC QPs made this way through their mapped rings and
scribbles on what the process owns: producer indexes far out of range,
garbage flags, garbage WQEs, a bogus CQ consumer index, all while traffic
runs (local delivery on one device, and over the wire between two netns).
The kernel must contain it: the QP may go to the error state, the CQ may
report an overrun, but nothing hangs and every object is destroyed.

Finally dereg_mr of an MR that a QP's outstanding or failed WQEs name,
before the QP is destroyed (legal, and what pyverbs' garbage collection
may do): it must return at once, whatever the QP waits for (a peer that
never answers, RNR NAKs forever, or nothing: the error state).
"""
import errno
import json
import mmap
import random
import struct
import threading
import time

import pytest

import harness
import topology
from conftest import module_roce_device
from uverbs_raw import (
    ACCESS_ALL, CTRL_CONSUMER, CTRL_FLAGS, CTRL_NOTIFY, CTRL_NOTIFY_SEQ,
    CTRL_PRODUCER, ERR, EVENT_CQ_ERR, INIT, QP_ACCESS_FLAGS, QP_PKEY_INDEX,
    QP_PORT, QP_STATE, QPT_RAW_PACKET, QPT_RC, QPT_UC, QPT_UD, QUEUE_ERROR,
    QUEUE_DESC_SHARED,
    RESET, RTS, SRNIC_ABI_VERSION, WC_LOC_PROT_ERR, WC_LOC_QP_OP_ERR,
    WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR, WC_SUCCESS, WC_WR_FLUSH_ERR,
    WQE_SIGNALED, WR_RDMA_READ, WR_RDMA_WRITE, WR_SEND, QueueDesc, RawContext,
    RecvWr, SendWr, errno_of, ipv4_gid_bytes)

EINVAL, EOPNOTSUPP, ENOENT = errno.EINVAL, errno.EOPNOTSUPP, errno.ENOENT
EBUSY, EBADF = errno.EBUSY, errno.EBADF
RNR_RETRY_EXC_ERR = 13

# The limits srnic.h sets and query_device reports.
MAX_CQE, MAX_QP_WR, MAX_SGE, MAX_INLINE = (1 << 19) - 1, 16384, 32, 512

OPEN = []


def close_all():
    while OPEN:
        OPEN.pop().close()


def assert_no_objects(names):
    """srnic's object counts, as `rdma resource show` reports them, are 0
    on every device in names (the kernel's own objects, ib_mad's QP1 and
    the like, left out: harness.rdma_user_counts())."""
    res = harness.rdma_user_counts()
    counts = {name: d for name, d in res.items() if name in names}
    assert set(counts) == set(names), res
    for d in counts.values():
        assert (d["pd"], d["cq"], d["qp"], d["mr"], d["ctx"]) == \
            (0, 0, 0, 0, 0), d


@pytest.fixture(scope="module")
def module_dev():
    """hostile0 on a veth end with an IPv4 GID, for the whole module (a
    device per test would cost seconds each in the VM)."""
    with module_roce_device("hostile0", "198.18.9.1") as dev:
        try:
            yield dev
        finally:
            close_all()


@pytest.fixture
def dev(module_dev):
    """The module's device; every raw context the test opened is closed
    afterwards, which must leave no object behind."""
    yield module_dev
    close_all()
    assert_no_objects([module_dev.name])


def raw(name, context=True):
    c = RawContext(name)
    OPEN.append(c)
    if context:
        c.get_context()
    return c


def uctx_req(version=SRNIC_ABI_VERSION, reserved=0, tail=b""):
    return struct.pack("<II", version, reserved) + tail


# ---- alloc_ucontext: the provider's ABI version and driver data ----------

@pytest.mark.parametrize("driver_in,code", [
    (b"", EINVAL),                                  # no driver data at all
    (struct.pack("<I", SRNIC_ABI_VERSION), EINVAL),  # shorter than the req
    (uctx_req(version=0), EINVAL),
    (uctx_req(version=SRNIC_ABI_VERSION + 1), EINVAL),  # newer provider
    (uctx_req(version=0xffffffff), EINVAL),
    (uctx_req(reserved=1), EINVAL),
    (uctx_req(tail=struct.pack("<Q", 1)), EOPNOTSUPP),  # unknown extension
    (uctx_req(tail=bytes(4088) + b"\x01" * 8), EOPNOTSUPP),
], ids=["empty", "short", "abi0", "abi_newer", "abi_ffffffff", "reserved",
        "trailing", "trailing_far"])
def test_get_context_bad_driver_data(dev, driver_in, code):
    c = raw(dev.name, context=False)
    assert errno_of(c.get_context, driver_in=driver_in) == code
    # The refusal left no context behind: a correct request succeeds.
    c.get_context()
    assert c.uctx_resp.abi_version == SRNIC_ABI_VERSION


def test_get_context_zero_tail_and_response(dev):
    c = raw(dev.name, context=False)
    c.get_context(driver_in=uctx_req(tail=bytes(64)))
    r = c.uctx_resp
    # queue_ctrl_size: struct srnic_queue_ctrl's three cache lines.
    assert (r.abi_version, r.max_inline_data, r.queue_ctrl_size,
            r.page_size) == (SRNIC_ABI_VERSION, MAX_INLINE, 192,
                             mmap.PAGESIZE)
    # A second context on one file is ib_core's EINVAL.
    assert errno_of(c.get_context) == EINVAL


def test_get_context_short_response_buffer(dev):
    """A provider that expects less response data gets what fits."""
    c = raw(dev.name, context=False)
    c.get_context(driver_out_len=0)
    raw_pd = c.alloc_pd()
    c.dealloc_pd(raw_pd)


def test_commands_before_get_context(dev):
    c = raw(dev.name, context=False)
    assert errno_of(c.alloc_pd) == EINVAL
    assert errno_of(c.create_cq, 4) == EINVAL
    with pytest.raises(OSError) as ex:
        mmap.mmap(c.fd, mmap.PAGESIZE, offset=0)
    assert ex.value.errno == EINVAL


# ---- PD ------------------------------------------------------------------

def test_alloc_pd_driver_data(dev):
    c = raw(dev.name)
    assert errno_of(c.alloc_pd, driver_in=struct.pack("<Q", 1)) == EOPNOTSUPP
    assert errno_of(c.alloc_pd, driver_in=bytes(7) + b"\x80") == EOPNOTSUPP
    c.dealloc_pd(c.alloc_pd(driver_in=bytes(16)))


# ---- CQ ------------------------------------------------------------------

@pytest.mark.parametrize("cqe", [0, MAX_CQE + 1, 1 << 31, 0xffffffff])
def test_create_cq_bad_depth(dev, cqe):
    c = raw(dev.name)
    assert errno_of(c.create_cq, cqe) == EINVAL


@pytest.mark.parametrize("driver_in,code", [
    (struct.pack("<Q", 1), EINVAL),                 # reserved
    (struct.pack("<Q", 1 << 63), EINVAL),
    (struct.pack("<I", 7), EINVAL),                 # half a reserved field
    (struct.pack("<QQ", 0, 1), EOPNOTSUPP),         # unknown trailing
    (bytes(8) + bytes(1000) + b"\x01" * 8, EOPNOTSUPP),
    (b"", None), (bytes(4), None), (bytes(8), None), (bytes(64), None),
], ids=["reserved", "reserved_high", "half_reserved", "trailing",
        "trailing_far", "none", "half_zero", "exact", "zero_tail"])
def test_create_cq_driver_data(dev, driver_in, code):
    c = raw(dev.name)
    assert errno_of(c.create_cq, 4, driver_in=driver_in) == code


def test_create_cq_limits_and_core_checks(dev):
    c = raw(dev.name)
    cq = c.create_cq(MAX_CQE)
    assert cq.cqe == MAX_CQE and cq.drv.ring.num_entries == MAX_CQE + 1
    assert cq.drv.ring.entry_size == 64
    assert cq.drv.ring.mmap_size == mmap.PAGESIZE + (MAX_CQE + 1) * 64
    assert c.create_cq(1).cqe == 1
    # ib_core's checks, before srnic is asked.
    assert errno_of(c.create_cq, 4, comp_vector=1000) == EINVAL
    assert errno_of(c.create_cq, 4, comp_channel=999) == EBADF
    assert errno_of(c.create_cq, 4, comp_channel=c.async_fd) == EBADF
    # No room for srnic's response: the CQ exists, the provider could not
    # map it (it would not get the offset); destroying it works.
    cq = c.create_cq(4, driver_out_len=0)
    c.destroy_cq(cq)


# ---- QP ------------------------------------------------------------------

@pytest.fixture
def qpenv(dev):
    c = raw(dev.name)
    pd = c.alloc_pd()
    cq = c.create_cq(64)
    return c, pd, cq


@pytest.mark.parametrize("field,value", [
    ("max_send_wr", MAX_QP_WR + 1), ("max_send_wr", 0xffffffff),
    ("max_recv_wr", MAX_QP_WR + 1), ("max_recv_wr", 1 << 31),
    ("max_send_sge", MAX_SGE + 1), ("max_send_sge", 0xffffffff),
    ("max_recv_sge", MAX_SGE + 1),
    ("max_inline_data", MAX_INLINE + 1), ("max_inline_data", 0xffffffff),
])
def test_create_qp_huge_caps(qpenv, field, value):
    c, pd, cq = qpenv
    assert errno_of(c.create_qp, pd, cq, **{field: value}) == EINVAL


def test_create_qp_largest(qpenv):
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq, max_send_wr=MAX_QP_WR, max_recv_wr=MAX_QP_WR,
                     max_send_sge=MAX_SGE, max_recv_sge=MAX_SGE,
                     max_inline_data=MAX_INLINE)
    r = qp.resp
    assert (r.max_send_wr, r.max_recv_wr, r.max_send_sge, r.max_recv_sge,
            r.max_inline_data) == (MAX_QP_WR, MAX_QP_WR, MAX_SGE, MAX_SGE,
                                   MAX_INLINE)
    assert qp.drv.sq.num_entries == MAX_QP_WR
    assert qp.drv.sq.entry_size == 1024
    assert qp.drv.rq.entry_size == 1024
    assert qp.drv.qpn == r.qpn
    c.destroy_qp(qp)


@pytest.mark.parametrize("qp_type,code", [
    (QPT_UC, None), (QPT_UD, None), (QPT_RAW_PACKET, None),
    (99, EINVAL)])
def test_create_qp_type(qpenv, qp_type, code):
    c, pd, cq = qpenv
    assert errno_of(c.create_qp, pd, cq, qp_type=qp_type) == code


@pytest.mark.parametrize("driver_in,code", [
    (struct.pack("<Q", 1), EINVAL),
    (struct.pack("<I", 1), EINVAL),
    (struct.pack("<QQ", 0, 1), EOPNOTSUPP),
    (bytes(8) + bytes(200) + b"\xff" * 8, EOPNOTSUPP),
    (b"", None), (bytes(8), None), (bytes(32), None),
], ids=["reserved", "half_reserved", "trailing", "trailing_far", "none",
        "exact", "zero_tail"])
def test_create_qp_driver_data(qpenv, driver_in, code):
    c, pd, cq = qpenv
    assert errno_of(c.create_qp, pd, cq, driver_in=driver_in) == code


@pytest.mark.parametrize("driver_in,code", [
    (struct.pack("<Q", 1), EINVAL),
    (struct.pack("<I", 1), EINVAL),
    (struct.pack("<QQ", 0, 1), EOPNOTSUPP),
    (bytes(8) + bytes(200) + b"\xff" * 8, EOPNOTSUPP),
    (b"", None), (bytes(8), None), (bytes(32), None),
], ids=["reserved", "half_reserved", "trailing", "trailing_far", "none",
        "exact", "zero_tail"])
def test_create_srq_driver_data(qpenv, driver_in, code):
    c, pd, cq = qpenv
    assert errno_of(c.create_srq, pd, driver_in=driver_in) == code


def test_srq_ring_and_qp_on_srq(qpenv):
    """An SRQ's ring is described like an RQ's and asks for no doorbell;
    a QP on it gets an all-zero RQ descriptor and no receive capacity; the
    SRQ cannot go while the QP uses it (ib_core: EBUSY)."""
    c, pd, cq = qpenv
    handle, resp, drv = c.create_srq(pd, max_wr=100, max_sge=3)
    assert resp.max_wr == drv.rq.num_entries == 128
    assert resp.max_sge == 3
    assert drv.rq.entry_size == 64
    ring = c.ring(drv.rq)
    assert ring.flags == 0
    qp = c.create_qp(pd, cq, max_recv_wr=16, max_recv_sge=2, is_srq=1,
                     srq_handle=handle)
    assert bytes(qp.drv.rq) == bytes(len(bytes(QueueDesc())))
    assert (qp.resp.max_recv_wr, qp.resp.max_recv_sge) == (0, 0)
    assert errno_of(c.destroy_srq, handle) == EBUSY
    c.destroy_qp(qp)
    c.destroy_srq(handle)


def test_create_qp_bad_handles(qpenv, dev):
    c, pd, cq = qpenv
    other = raw(dev.name)
    other.alloc_pd()
    # Handles of nothing: ib_core's lookup fails with ENOENT.
    assert errno_of(c.create_qp, 12345, cq) == ENOENT
    assert errno_of(c.create_qp, pd, 12345) == ENOENT
    assert errno_of(c.create_qp, pd, cq, recv_cq=777) == ENOENT
    # A handle of another type: EINVAL.
    assert errno_of(c.create_qp, cq.handle, cq) == EINVAL
    assert errno_of(c.create_qp, pd, pd) == EINVAL
    # The CQ's handle as an SRQ's: EINVAL.
    assert errno_of(c.create_qp, pd, cq, is_srq=1, srq_handle=cq.handle) == \
        EINVAL
    # Handles are per file: another context's objects are not ours (its
    # later handles name nothing here).
    other_cqs = [other.create_cq(4) for _ in range(4)]
    assert errno_of(c.create_qp, pd, other_cqs[-1].handle) == ENOENT


def test_destroy_order_refused_while_in_use(qpenv):
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq)
    mr = c.reg_mr(pd, 4096)
    assert errno_of(c.destroy_cq, cq) == EBUSY
    assert errno_of(c.dealloc_pd, pd) == EBUSY
    c.destroy_qp(qp)
    assert errno_of(c.dealloc_pd, pd) == EBUSY      # the MR still holds it
    c.dereg_mr(mr)
    c.destroy_cq(cq)
    c.dealloc_pd(pd)
    for fn, obj in ((c.destroy_qp, qp), (c.dereg_mr, mr), (c.destroy_cq, cq),
                    (c.dealloc_pd, pd)):
        assert errno_of(fn, obj) == ENOENT


def test_modify_qp_driver_data(qpenv):
    """struct srnic_modify_qp_req: a burst size without IBV_QP_RATE_LIMIT
    or a non-zero reserved field is EINVAL, a non-zero byte past it
    EOPNOTSUPP (a newer provider's field), zeros are taken; the QP stays
    as it was after a refusal."""
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq)
    init = dict(qp_state=INIT, port_num=1, qp_access_flags=ACCESS_ALL)
    mask = QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS
    for driver_in, err in ((struct.pack("<II", 1, 0), EINVAL),
                           (struct.pack("<II", 0, 1), EINVAL),
                           (struct.pack("<IIQ", 0, 0, 1), EOPNOTSUPP)):
        assert errno_of(c.modify_qp, qp, mask, driver_in=driver_in,
                        **init) == err, driver_in
    assert qp.state() == 0
    c.modify_qp(qp, mask, driver_in=bytes(16), **init)
    assert qp.state() == INIT
    assert errno_of(c.modify_qp, 4444, QP_STATE, qp_state=ERR) == ENOENT


def test_posts_with_work_requests_refused(qpenv):
    """A user QP's WQEs travel through its ring; a post carrying work
    requests is refused (EINVAL), an empty post is the doorbell."""
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq)
    mr = c.reg_mr(pd, 4096)
    wr = SendWr(wr_id=1, num_sge=1, opcode=WR_SEND)
    assert errno_of(c.post_send, qp, [wr], [(mr.addr, 64, mr.lkey)]) == EINVAL
    assert errno_of(c.post_recv, qp, [RecvWr(wr_id=1, num_sge=1)],
                    [(mr.addr, 64, mr.lkey)]) == EINVAL
    c.post_send(qp)
    c.post_recv(qp)
    assert errno_of(c.post_send, 4444) == ENOENT


# ---- mmap ----------------------------------------------------------------

def try_mmap(fd, length, offset, flags=mmap.MAP_SHARED):
    try:
        m = mmap.mmap(fd, length, flags, mmap.PROT_READ | mmap.PROT_WRITE,
                      offset=offset)
    except OSError as ex:
        return ex.errno
    m.close()
    return None


def test_mmap_offsets_and_lengths(qpenv, dev):
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq, max_send_wr=64)
    page = mmap.PAGESIZE
    for d in (cq.drv.ring, qp.drv.sq, qp.drv.rq):
        assert d.mmap_offset % page == 0 and d.mmap_size % page == 0
        assert try_mmap(c.fd, d.mmap_size, d.mmap_offset) is None
        assert try_mmap(c.fd, d.mmap_size - page, d.mmap_offset) == EINVAL
        assert try_mmap(c.fd, d.mmap_size + page, d.mmap_offset) == EINVAL
        if d.mmap_size > page:      # a one-page ring has no tail alone
            assert try_mmap(c.fd, d.mmap_size - page,
                            d.mmap_offset + page) == EINVAL
            assert try_mmap(c.fd, page, d.mmap_offset + d.mmap_size -
                            page) == EINVAL
        assert try_mmap(c.fd, d.mmap_size, d.mmap_offset,
                        mmap.MAP_PRIVATE) == EINVAL
    end = max(d.mmap_offset + d.mmap_size
              for d in (cq.drv.ring, qp.drv.sq, qp.drv.rq))
    assert try_mmap(c.fd, page, end) == EINVAL            # never handed out
    assert try_mmap(c.fd, page, 1 << 40) == EINVAL
    assert try_mmap(c.fd, page, (1 << 32) * page) == EINVAL  # pgoff > U32
    # Another context's ring: offsets are per context. This one has fewer
    # rings, so the QP's offsets name nothing in it.
    other = raw(dev.name)
    other.create_cq(4)
    for d in (qp.drv.sq, qp.drv.rq):
        assert try_mmap(other.fd, d.mmap_size, d.mmap_offset) == EINVAL


def test_mmap_after_destroy(qpenv):
    c, pd, cq = qpenv
    qp = c.create_qp(pd, cq)
    mapped = c.ring(qp.drv.sq)
    c.destroy_qp(qp)
    for d in (qp.drv.sq, qp.drv.rq):
        assert try_mmap(c.fd, d.mmap_size, d.mmap_offset) == EINVAL
    # A mapping made before destroy keeps harmless pages: writes work and
    # nothing else sees them.
    mapped.put32(CTRL_PRODUCER, 12345)
    mapped.map[-8:] = b"\xa5" * 8
    assert mapped.get32(CTRL_PRODUCER) == 12345
    mapped.close()
    ring = cq.map()
    c.destroy_cq(cq)
    assert try_mmap(c.fd, cq.drv.ring.mmap_size,
                    cq.drv.ring.mmap_offset) == EINVAL
    ring.put32(CTRL_CONSUMER, 7)
    ring.close()


def test_small_sqs_share_a_mapping(qpenv):
    """The SQs of 16 WQEs of one context share one mapping (the kernel's
    ring arena), each at its own cache-line-aligned offset, without
    overlap; a large SQ, RQs and CQs have mappings of their own."""
    c, pd, cq = qpenv
    qps = [c.create_qp(pd, cq) for _ in range(6)]
    sqs = [qp.drv.sq for qp in qps]
    assert all(d.flags == QUEUE_DESC_SHARED for d in sqs)
    assert len({(d.mmap_offset, d.mmap_size) for d in sqs}) == 1
    spans = sorted((d.ring_offset, d.ring_offset + 192 +
                    d.num_entries * d.entry_size) for d in sqs)
    assert all(start % 64 == 0 and end <= sqs[0].mmap_size
               for start, end in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    for d in [qp.drv.rq for qp in qps] + [cq.drv.ring]:
        assert (d.flags, d.ring_offset) == (0, 0)
    big = c.create_qp(pd, cq, max_send_wr=1024).drv.sq
    assert (big.flags, big.ring_offset) == (0, 0)
    assert big.mmap_offset != sqs[0].mmap_offset
    # Each ring where its descriptor says: the kernel's NEED_WAKEUP flag,
    # set in every new SQ's control record, and nothing else posted.
    rings = [c.ring(d) for d in sqs]
    for r in rings:
        assert r.flags != 0 and r.producer == 0 and r.consumer == 0


def test_reused_sq_memory_comes_back_zeroed(qpenv):
    """A new SQ that takes the place an old one left in a shared mapping
    starts from zero, whatever the process wrote there (a CQE-like owner
    bit or a stale producer index would be read as posted work)."""
    c, pd, cq = qpenv
    keep = c.create_qp(pd, cq)          # keeps the mapping alive
    old = c.create_qp(pd, cq)
    ring = c.ring(old.drv.sq)
    ring.put32(CTRL_PRODUCER, 5)
    start = ring.entry_offset(0)
    ring.map[start:start + 4 * ring.entry_size] = b"\xa5" * (4 * ring.entry_size)
    c.destroy_qp(old)
    new = c.create_qp(pd, cq)
    assert (new.drv.sq.mmap_offset, new.drv.sq.ring_offset) == \
        (old.drv.sq.mmap_offset, old.drv.sq.ring_offset)
    fresh = c.ring(new.drv.sq)
    assert fresh.producer == 0 and fresh.consumer == 0
    body = fresh.ring_bytes()[192:]
    assert body == bytes(len(body))
    # The QP still works: the mapping of the destroyed QP is the same
    # memory, so its writes now land in the new ring, which the kernel
    # validates like any other.
    c.modify_qp(new, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                qp_state=INIT, port_num=1, qp_access_flags=ACCESS_ALL)
    c.destroy_qp(new)
    c.destroy_qp(keep)


# ---- Rings scribbled on while traffic runs --------------------------------

class Loop:
    """Two raw RC QPs, a -> b, on one device (local delivery) or on the two
    ends of a topology, each with its own CQ and MR, rings mapped."""

    def __init__(self, end_a, end_b, max_send_wr=16, rnr_retry=7,
                 qp_type=QPT_RC):
        self.ends = (end_a, end_b)
        self.ctx = [raw(end_a.name), raw(end_b.name)]
        self.pd = [c.alloc_pd() for c in self.ctx]
        self.cq = [c.create_cq(256) for c in self.ctx]
        for cq in self.cq:
            cq.map()
        self.qp = [c.create_qp(pd, cq, max_send_wr=max_send_wr,
                               max_recv_wr=64, qp_type=qp_type)
                   for c, pd, cq in zip(self.ctx, self.pd, self.cq)]
        for qp in self.qp:
            qp.map()
        self.mr = [c.reg_mr(pd, 1 << 16) for c, pd in zip(self.ctx, self.pd)]
        for i in (0, 1):
            peer = 1 - i
            self.ctx[i].connect_rc(self.qp[i], self.qp[peer].qpn,
                                   ipv4_gid_bytes(self.ends[peer].addr),
                                   self.ends[i].gid_index,
                                   rnr_retry=rnr_retry,
                                   uc=qp_type == QPT_UC)

    def write(self, wr_id, length=1024, flags=WQE_SIGNALED, ring=True):
        a, mr_a, mr_b = self.qp[0], self.mr[0], self.mr[1]
        a.write_send(wr_id, WR_RDMA_WRITE, [(mr_a.addr, length, mr_a.lkey)],
                     flags=flags, remote_addr=mr_b.addr, rkey=mr_b.rkey)
        if ring:
            a.doorbell_sq()

    def send(self, wr_id, length=64):
        self.qp[0].write_send(wr_id, WR_SEND,
                              [(self.mr[0].addr, length, self.mr[0].lkey)])
        self.qp[0].doorbell_sq()

    def recv(self, wr_id, length=1024):
        self.qp[1].write_recv(wr_id, [(self.mr[1].addr, length,
                                       self.mr[1].lkey)])

    def wait_cqes(self, side, n, timeout=10):
        cqes = []
        deadline = time.monotonic() + timeout
        while len(cqes) < n and time.monotonic() < deadline:
            cqes += self.cq[side].poll()
            if len(cqes) < n:
                time.sleep(0.005)
        return cqes

    def wait_state(self, side, state, timeout=10):
        return harness.wait_for(
            lambda: self.qp[side].state() == state, timeout=timeout,
            what=f"QP {self.qp[side].qpn} in state {state}")


@pytest.fixture
def loop(dev):
    """QPs a -> b on one srnic device (local delivery)."""
    return Loop(dev, dev)


def test_raw_loop_works(loop):
    """The baseline the scribbling tests start from: WRITEs and a SEND."""
    for i in range(4):
        loop.write(i)
    cqes = loop.wait_cqes(0, 4)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(i, WC_SUCCESS) for i in range(4)]
    loop.recv(100)
    loop.send(5)
    assert [c["status"] for c in loop.wait_cqes(0, 1)] == [WC_SUCCESS]
    assert [(c["wr_id"], c["status"], c["byte_len"])
            for c in loop.wait_cqes(1, 1)] == [(100, WC_SUCCESS, 64)]


def test_uc_ring_wqe_with_read_fails(dev):
    """A UC QP's ring WQE with a READ (which the provider would refuse
    with EINVAL) completes with LOC_QP_OP_ERR and moves the QP to the error
    state; the WRITE before it was executed."""
    loop = Loop(dev, dev, qp_type=QPT_UC)
    a, mr_a, mr_b = loop.qp[0], loop.mr[0], loop.mr[1]
    loop.write(1, ring=False)
    a.write_send(2, WR_RDMA_READ, [(mr_a.addr, 64, mr_a.lkey)],
                 remote_addr=mr_b.addr, rkey=mr_b.rkey)
    a.doorbell_sq()
    cqes = loop.wait_cqes(0, 2)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(1, WC_SUCCESS), (2, WC_LOC_QP_OP_ERR)]
    loop.wait_state(0, ERR)


@pytest.mark.parametrize("qp_type", [QPT_RC, QPT_UC], ids=["rc", "uc"])
def test_ring_atomic_write_not_inline_fails(dev, qp_type):
    """An ATOMIC WRITE ring WQE (IBV_WR_ATOMIC_WRITE, 15) whose value is an
    SGE instead of the 8 inline bytes the provider writes (or on UC, which
    has no ATOMIC WRITE) completes with LOC_QP_OP_ERR and the QP goes to
    the error state; the WRITE before it was executed."""
    loop = Loop(dev, dev, qp_type=qp_type)
    a, mr_a, mr_b = loop.qp[0], loop.mr[0], loop.mr[1]
    loop.write(1, length=64, ring=False)
    a.write_send(2, 15, [(mr_a.addr, 8, mr_a.lkey)],
                 remote_addr=mr_b.addr + 1024, rkey=mr_b.rkey)
    a.doorbell_sq()
    cqes = loop.wait_cqes(0, 2)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(1, WC_SUCCESS), (2, WC_LOC_QP_OP_ERR)]
    loop.wait_state(0, ERR)


@pytest.mark.parametrize("delta", [17, 1 << 20, 0x7fffffff, 0x80000000,
                                   0xfffffff0])
def test_sq_producer_out_of_range_is_ignored(loop, delta):
    """A producer index more than a ring ahead of the kernel's consumer is
    not believed: nothing is consumed until the index makes sense again."""
    a = loop.qp[0]
    for i in range(3):
        loop.write(i, ring=False)
    # 16-entry SQ, consumer 0: producer - consumer > 16 (0xfffffff0 puts
    # the producer behind the consumer).
    a.sq.put32(CTRL_PRODUCER, a.sq_prod + delta)
    a.doorbell_sq()
    time.sleep(0.3)
    assert loop.cq[0].poll() == []
    assert a.sq.consumer == 0
    a.sq.put32(CTRL_PRODUCER, a.sq_prod)
    a.doorbell_sq()
    cqes = loop.wait_cqes(0, 3)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(i, WC_SUCCESS) for i in range(3)]
    assert a.state() == RTS


def test_rq_producer_out_of_range_is_an_empty_rq(dev):
    """The responder's RQ with a bogus producer looks empty: the SEND is
    RNR NAKed until the sender's rnr_retry runs out."""
    lp = Loop(dev, dev, rnr_retry=1)
    b = lp.qp[1]
    lp.recv(100)
    b.rq.put32(CTRL_PRODUCER, b.rq_prod + 0x40000000)
    lp.send(1)
    cqes = lp.wait_cqes(0, 1)
    assert [c["status"] for c in cqes] == [RNR_RETRY_EXC_ERR]
    assert lp.cq[1].poll() == []


def test_garbage_send_wqes(loop):
    """A full ring of random bytes behind a valid producer index: the first
    WQE fails its checks, the QP goes to the error state, the rest flush."""
    a = loop.qp[0]
    n = a.sq.num_entries
    rnd = random.Random(6)
    start = a.sq.entry_offset(0)
    a.sq.map[start:start + n * a.sq.entry_size] = rnd.randbytes(
        n * a.sq.entry_size)
    a.sq.put32(CTRL_PRODUCER, n)
    a.doorbell_sq()
    cqes = loop.wait_cqes(0, n)
    statuses = [c["status"] for c in cqes]
    assert len(statuses) == n, statuses
    assert WC_SUCCESS not in statuses
    assert statuses[1:] == [WC_WR_FLUSH_ERR] * (n - 1)
    loop.wait_state(0, ERR)
    assert a.sq.consumer == n
    assert a.sq.flags & QUEUE_ERROR


def test_garbage_recv_wqes(loop):
    """A SEND landing on a receive WQE of random bytes (num_sge beyond the
    RQ's, bad keys) fails at the responder, never in the kernel."""
    b = loop.qp[1]
    rnd = random.Random(7)
    off = b.rq.entry_offset(0)
    b.rq.map[off:off + b.rq.entry_size] = rnd.randbytes(b.rq.entry_size)
    b.rq.put32(CTRL_PRODUCER, 1)
    loop.send(1)
    sender = loop.wait_cqes(0, 1)
    assert len(sender) == 1 and sender[0]["status"] != WC_SUCCESS
    receiver = loop.wait_cqes(1, 1)
    assert len(receiver) == 1 and receiver[0]["status"] != WC_SUCCESS
    loop.wait_state(1, ERR)


def test_garbage_flags_and_notify(loop):
    """flags is the kernel's to write, notify/notify_seq the provider's:
    garbage in them changes nothing the kernel relies on."""
    a, b = loop.qp
    for ring in (a.sq.map, a.rq.map, b.sq.map, b.rq.map,
                 loop.cq[0].ring.map, loop.cq[1].ring.map):
        struct.pack_into("<III", ring, CTRL_FLAGS, 0xffffffff, 0xdeadbeef,
                         0x12345678)
    for i in range(8):
        loop.write(i)
    loop.recv(100)
    loop.send(8)
    cqes = loop.wait_cqes(0, 9)
    assert [c["status"] for c in cqes] == [WC_SUCCESS] * 9
    assert [c["status"] for c in loop.wait_cqes(1, 1)] == [WC_SUCCESS]
    assert a.state() == RTS and b.state() == RTS


def test_cq_consumer_bogus_is_an_overrun(loop):
    """A CQ consumer index outside the ring is an overrun: no CQE is
    written, the CQ reports IB_EVENT_CQ_ERR and is marked in error, and
    the QP that lost the completion goes to the error state."""
    cq = loop.cq[0]
    cq.ring.put32(CTRL_CONSUMER, 0x80000000)
    loop.write(1)
    loop.wait_state(0, ERR)
    assert cq.ring.flags & QUEUE_ERROR
    events = loop.ctx[0].async_events(timeout=5)
    assert EVENT_CQ_ERR in [e for e, _ in events], events
    assert cq.poll() == []
    # The peer is untouched.
    assert loop.qp[1].state() == RTS


def test_mr_deregistered_under_a_write(loop):
    """The target MR goes away between two WRITEs: the second completes
    with IBV_WC_REM_ACCESS_ERR and the memory is not touched."""
    ctx_b, mr_b = loop.ctx[1], loop.mr[1]
    loop.mr[0].buf[0:1024] = b"\x11" * 1024
    loop.write(1)
    assert [c["status"] for c in loop.wait_cqes(0, 1)] == [WC_SUCCESS]
    assert mr_b.buf[0:1024] == b"\x11" * 1024
    ctx_b.dereg_mr(mr_b)
    mr_b.buf[0:1024] = b"\x22" * 1024
    loop.mr[0].buf[0:1024] = b"\x33" * 1024
    loop.write(2)
    cqes = loop.wait_cqes(0, 1)
    assert [c["status"] for c in cqes] == [WC_REM_ACCESS_ERR]
    assert mr_b.buf[0:1024] == b"\x22" * 1024
    loop.wait_state(0, ERR)


def _scribbler(rings, stop, seed):
    rnd = random.Random(seed)
    offsets = (CTRL_PRODUCER, CTRL_CONSUMER, CTRL_FLAGS, CTRL_NOTIFY,
               CTRL_NOTIFY_SEQ)
    values = (0, 1, 0x7fffffff, 0x80000000, 0xffffffff)
    while not stop.is_set():
        ring = rnd.choice(rings)
        off = rnd.choice(offsets)
        value = rnd.choice(values) if rnd.random() < 0.5 else \
            rnd.getrandbits(32)
        try:
            ring.put32(off, value)
        except ValueError:
            return          # unmapped under us: the test is ending
        time.sleep(0.0002)


def _traffic_under_scribbles(lp, seconds):
    """WRITEs and SENDs a -> b while another thread scribbles on every
    control record of both ends; then both QPs to ERR and destroyed. Every
    step is bounded; returns the statuses seen."""
    rings = [lp.qp[0].sq, lp.qp[0].rq, lp.qp[1].sq, lp.qp[1].rq,
             lp.cq[0].ring, lp.cq[1].ring]
    stop = threading.Event()
    t = threading.Thread(target=_scribbler, args=(rings, stop, 8))
    t.start()
    seen = {}
    try:
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            for _ in range(4):
                lp.recv(1000 + i)
                lp.qp[1].doorbell_rq()
                if i % 2:
                    lp.write(i, length=4096)
                else:
                    lp.send(i)
                i += 1
            for side in (0, 1):
                for c in lp.cq[side].poll():
                    seen[c["status"]] = seen.get(c["status"], 0) + 1
            time.sleep(0.002)
    finally:
        stop.set()
        t.join()
    for side in (0, 1):
        t0 = time.monotonic()
        lp.ctx[side].modify_qp(lp.qp[side], QP_STATE, qp_state=ERR)
        lp.ctx[side].destroy_qp(lp.qp[side])
        assert time.monotonic() - t0 < 10
    return seen


def test_scribbles_under_local_traffic(loop):
    seen = _traffic_under_scribbles(loop, 3)
    print("statuses", json.dumps(seen))


@pytest.fixture
def two_netns():
    topo, veth = topology.build("veth-two-netns", kind="srnic")
    yield topo
    close_all()
    assert_no_objects([topo.a.name, topo.b.name])
    topology.teardown(topo, veth)


def test_scribbles_under_wire_traffic(two_netns):
    """The same over the RoCEv2 wire (requester and responder of
    srnic_req.c/srnic_resp.c), devices in two netns."""
    lp = Loop(two_netns.a, two_netns.b)
    for i in range(4):
        lp.write(i)
    assert [c["status"] for c in lp.wait_cqes(0, 4)] == [WC_SUCCESS] * 4
    seen = _traffic_under_scribbles(lp, 4)
    print("statuses", json.dumps(seen))



# ---- dereg_mr of an MR a QP still names ------------------------------------

# An address on the device's subnet that nobody has, with a static
# neighbour entry (a MAC nobody has either, so the AV resolves): RC packets
# to it are lost, the requester retransmits until its retries are exhausted.
NOBODY, NOBODY_MAC = "198.18.9.77", "02:00:5e:00:09:77"
# Generous: with srnic's references lasting one engine run, dereg_mr
# returns at once; a reference held across runs holds it for the seconds
# (or forever) the QP waits.
DEREG_BOUND = 30


def assert_dereg_returns(ctx, mr, qp):
    """ctx.dereg_mr(mr) returns within DEREG_BOUND seconds. It runs in a
    thread (write() releases the GIL); if it blocks, qp is moved to RESET,
    which makes an srnic without the fix drop its cached references, so
    the dereg ends and the suite can go on, and the test fails."""
    result = {}

    def dereg():
        try:
            ctx.dereg_mr(mr)
            result["ok"] = True
        except OSError as ex:
            result["errno"] = ex.errno

    thread = threading.Thread(target=dereg, daemon=True)
    thread.start()
    thread.join(DEREG_BOUND)
    if thread.is_alive():
        ctx.modify_qp(qp, QP_STATE, qp_state=RESET)
        thread.join(DEREG_BOUND)
        pytest.fail(f"dereg_mr blocked {DEREG_BOUND} s by QP {qp.qpn} "
                    f"(returned after its RESET: {not thread.is_alive()})")
    assert result == {"ok": True}


class Lone:
    """An RC QP of dev connected to QPN 0x123 at NOBODY, its CQ and a 4 KiB
    MR."""

    def __init__(self, dev, timeout, retry_cnt):
        harness.run("ip", "neigh", "replace", NOBODY, "lladdr", NOBODY_MAC,
                    "nud", "permanent", "dev", dev.netdev)
        self.ctx = raw(dev.name)
        self.pd = self.ctx.alloc_pd()
        self.cq = self.ctx.create_cq(64)
        self.cq.map()
        self.qp = self.ctx.create_qp(self.pd, self.cq)
        self.qp.map()
        self.mr = self.ctx.reg_mr(self.pd, 4096)
        self.ctx.connect_rc(self.qp, 0x123, ipv4_gid_bytes(NOBODY),
                            dev.gid_index, timeout=timeout,
                            retry_cnt=retry_cnt)

    def send(self, wr_id, length=2048):
        self.qp.write_send(wr_id, WR_SEND,
                           [(self.mr.addr, length, self.mr.lkey)])
        self.qp.doorbell_sq()

    def wait_cqes(self, n, timeout):
        cqes = []
        deadline = time.monotonic() + timeout
        while len(cqes) < n and time.monotonic() < deadline:
            cqes += self.cq.poll()
            time.sleep(0.01)
        return cqes

    def destroy(self):
        self.ctx.destroy_qp(self.qp)
        self.ctx.destroy_cq(self.cq)
        self.ctx.dealloc_pd(self.pd)


def test_dereg_after_retry_exceeded(dev):
    """The hang seen in test_srq.py's destroy orders against rxe: SENDs to
    a peer gone fail with IBV_WC_RETRY_EXC_ERR and flushes, the QP is in
    the error state and nothing schedules its task again; the requester
    had cached the SGL of the second SEND (sent, then flushed). dereg_mr
    of the source MR before destroy_qp waited for that reference forever
    (the process that would destroy the QP was the one blocked)."""
    lone = Lone(dev, timeout=1, retry_cnt=0)    # one 10 ms timeout
    lone.send(1)
    lone.send(2)
    cqes = lone.wait_cqes(2, 30)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(1, WC_RETRY_EXC_ERR), (2, WC_WR_FLUSH_ERR)]
    assert lone.qp.state() == ERR
    assert_dereg_returns(lone.ctx, lone.mr, lone.qp)
    lone.destroy()


def test_dereg_while_retransmitting(dev):
    """dereg_mr while the SEND from the MR is outstanding and retransmitted
    (timeouts of 1 s, doubling, 7 retries: minutes): dereg_mr returns, and
    the SEND completes with IBV_WC_LOC_PROT_ERR at its next retransmission,
    which finds the MR gone."""
    lone = Lone(dev, timeout=18, retry_cnt=7)
    lone.send(1)
    assert lone.qp.state() == RTS
    assert_dereg_returns(lone.ctx, lone.mr, lone.qp)
    cqes = lone.wait_cqes(1, 60)
    assert [(c["wr_id"], c["status"]) for c in cqes] == \
        [(1, WC_LOC_PROT_ERR)]
    lone.destroy()


def test_dereg_while_rnr_retrying_forever(two_netns):
    """dereg_mr of the source of a SEND that an srnic responder without
    receive WQEs answers with RNR NAKs, retried forever (rnr_retry 7): it
    returns, and the SEND completes with IBV_WC_LOC_PROT_ERR when it is
    sent again."""
    lp = Loop(two_netns.a, two_netns.b, rnr_retry=7)
    lp.send(1)
    assert_dereg_returns(lp.ctx[0], lp.mr[0], lp.qp[0])
    assert [(c["wr_id"], c["status"]) for c in lp.wait_cqes(0, 1, 30)] == \
        [(1, WC_LOC_PROT_ERR)]
