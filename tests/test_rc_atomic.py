# SPDX-License-Identifier: GPL-2.0
"""RC atomics through pyverbs over every topology (tests/topology.py):
compare & swap (success and failure), fetch & add (wrapping modulo 2^64),
a stream of fetch & adds beyond max_rd_atomic, fetch & adds from two QPs
on one target summing exactly, and the errors: a misaligned target
(IBV_WC_REM_INV_REQ_ERR), an MR without REMOTE_ATOMIC
(IBV_WC_REM_ACCESS_ERR), a QP without it (IBV_WC_REM_INV_REQ_ERR). Then,
between two srnic devices over the wire with fault injection duplicating
and dropping packets: every fetch & add is applied exactly once (the
responder answers a duplicate from its saved result).

ATOMIC WRITE (ibv_wr_atomic_write, and ibv_post_send with
IBV_WR_ATOMIC_WRITE; IBTA's Atomic Write annex), where both ends are srnic
(rxe 6.1 has no ATOMIC WRITE: skipped on the interop topologies and the
rxe kind): the device cap; the 8 bytes land and nothing around them
changes; interleaved with fetch & adds on the same word; a misaligned
target (IBV_WC_REM_INV_REQ_ERR), an MR without REMOTE_WRITE, a bad R_Key
or a target past the MR (IBV_WC_REM_ACCESS_ERR), a QP without REMOTE_WRITE
(IBV_WC_REM_INV_REQ_ERR); and under duplication and loss, no duplicate
stores again.

Values are native 64-bit integers in the MRs (little-endian on x86), as
verbs define them. Run against rxe to validate the suite:
SRNIC_TEST_DEVICE_KIND=rxe.
"""
import errno
import struct

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx  # noqa: E402
from pyverbs.wr import SGE, SendWR  # noqa: E402

import harness  # noqa: E402
import topology as topo_mod  # noqa: E402
from faults import injected, set_knobs  # noqa: E402
from rc_verbs import (ACCESS_ALL, ERR, RCPair, close_all,  # noqa: E402
                      status_name)
from topology import topology  # noqa: E402,F401 (fixture)

CAS = e.IBV_WR_ATOMIC_CMP_AND_SWP
FAA = e.IBV_WR_ATOMIC_FETCH_AND_ADD
ACCESS_ATOMIC = ACCESS_ALL | e.IBV_ACCESS_REMOTE_ATOMIC
U64 = (1 << 64) - 1


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def connected(topology, qp_access=ACCESS_ATOMIC, timeout=14, **kw):
    p = RCPair(topology, qp_access=qp_access, **kw)
    p.connect(timeout=timeout)
    return p


@pytest.fixture
def rc(topology):
    p = connected(topology)
    yield p
    p.close()


def u64(mr, offset=0):
    return struct.unpack("=Q", mr.read(8, offset))[0]


def put_u64(mr, value, offset=0):
    mr.write(struct.pack("=Q", value & U64), 8, offset)


def atomic_wr(wr_id, opcode, result, remote, compare_add=0, swap=0,
              flags=e.IBV_SEND_SIGNALED, sgl=None):
    """An atomic WR: result=(mr, offset) receives the original value
    (or sgl, a list of SGEs, replaces it), remote=(mr, offset) is the
    target."""
    tmr, toff = remote
    if sgl is None:
        rmr, roff = result
        sgl = [SGE(rmr.buf + roff, 8, rmr.lkey)]
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sgl), sg=sgl,
                send_flags=flags)
    wr.set_wr_atomic(rkey=tmr.rkey, addr=tmr.buf + toff,
                     compare_add=compare_add & U64, swap=swap & U64)
    return wr


def check_ok(wc, wr_id, opcode):
    assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert wc.wr_id == wr_id
    assert wc.opcode == opcode
    assert wc.byte_len == 8


def test_atomic_caps(rc):
    for side in rc.sides():
        assert side.dev_attr.atomic_caps in (e.IBV_ATOMIC_HCA,
                                             e.IBV_ATOMIC_GLOB)


# ---- values ----------------------------------------------------------------

def test_cmp_swap_success(rc):
    a, b = rc.a, rc.b
    target, result = b.mr(64, ACCESS_ATOMIC), a.mr(16)
    guard = bytes(range(64))
    target.write(guard, 64, 0)
    put_u64(target, 0x0123456789abcdef, 16)
    put_u64(result, 0x5a5a5a5a5a5a5a5a, 8)
    a.qp.post_send(atomic_wr(1, CAS, (result, 8), (target, 16),
                             compare_add=0x0123456789abcdef,
                             swap=0xfedcba9876543210))
    check_ok(a.poll()[0], 1, e.IBV_WC_COMP_SWAP)
    assert u64(result, 8) == 0x0123456789abcdef
    assert u64(target, 16) == 0xfedcba9876543210
    # Nothing else written, on either side.
    assert target.read(16, 0) == guard[:16]
    assert target.read(40, 24) == guard[24:]
    assert result.read(8, 0) == bytes(8)
    assert b.drain() == []


def test_cmp_swap_failure(rc):
    a, b = rc.a, rc.b
    target, result = b.mr(8, ACCESS_ATOMIC), a.mr(8)
    put_u64(target, 41)
    a.qp.post_send(atomic_wr(2, CAS, (result, 0), (target, 0),
                             compare_add=42, swap=7))
    check_ok(a.poll()[0], 2, e.IBV_WC_COMP_SWAP)
    assert u64(result) == 41
    assert u64(target) == 41, "compare failed: nothing swapped"


@pytest.mark.parametrize("start,add", [(0, 1), (1000, 0xffffffff),
                                       (U64, 2), (0x8000000000000000, U64)],
                         ids=["one", "32bit", "wrap", "minus-one"])
def test_fetch_add(rc, start, add):
    a, b = rc.a, rc.b
    target, result = b.mr(24, ACCESS_ATOMIC), a.mr(8)
    put_u64(target, 0x1111111111111111, 0)
    put_u64(target, start, 8)
    put_u64(target, 0x2222222222222222, 16)
    a.qp.post_send(atomic_wr(3, FAA, (result, 0), (target, 8),
                             compare_add=add))
    check_ok(a.poll()[0], 3, e.IBV_WC_FETCH_ADD)
    assert u64(result) == start
    assert u64(target, 8) == (start + add) & U64
    assert u64(target, 0) == 0x1111111111111111
    assert u64(target, 16) == 0x2222222222222222


def test_fetch_add_stream(rc):
    """More fetch & adds than max_rd_atomic at once, unsignaled but the
    last: each returns the sum of those before it, in posting order."""
    a, b = rc.a, rc.b
    n = 48
    target, results = b.mr(8, ACCESS_ATOMIC), a.mr(8 * n)
    put_u64(target, 5)
    for i in range(n):
        a.qp.post_send(atomic_wr(100 + i, FAA, (results, 8 * i), (target, 0),
                                 compare_add=i + 1,
                                 flags=e.IBV_SEND_SIGNALED if i == n - 1
                                 else 0))
    check_ok(a.poll()[0], 100 + n - 1, e.IBV_WC_FETCH_ADD)
    expect = 5
    for i in range(n):
        assert u64(results, 8 * i) == expect, i
        expect += i + 1
    assert u64(target) == expect


def test_atomics_between_other_opcodes(rc):
    """Atomics in a stream of WRITEs and READs, fenced and not: each sees
    the target as the WQEs before it left it."""
    a, b = rc.a, rc.b
    target, local = b.mr(16, ACCESS_ATOMIC), a.mr(64)
    put_u64(local, 100, 0)
    wrs = [
        SendWR(wr_id=10, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(local.buf, 8, local.lkey)]),
        atomic_wr(11, FAA, (local, 8), (target, 0), compare_add=5),
        atomic_wr(12, CAS, (local, 16), (target, 0), compare_add=105,
                  swap=7, flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_FENCE),
        SendWR(wr_id=13, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
               sg=[SGE(local.buf + 24, 8, local.lkey)],
               send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_FENCE),
    ]
    wrs[0].set_wr_rdma(target.rkey, target.buf)
    wrs[0].send_flags = e.IBV_SEND_SIGNALED
    wrs[3].set_wr_rdma(target.rkey, target.buf)
    for wr in wrs:
        a.qp.post_send(wr)
    wcs = a.poll(4)
    assert [w.status for w in wcs] == [e.IBV_WC_SUCCESS] * 4, \
        [status_name(w.status) for w in wcs]
    assert [w.wr_id for w in wcs] == [10, 11, 12, 13]
    assert [w.opcode for w in wcs] == [e.IBV_WC_RDMA_WRITE,
                                       e.IBV_WC_FETCH_ADD,
                                       e.IBV_WC_COMP_SWAP, e.IBV_WC_RDMA_READ]
    assert u64(local, 8) == 100
    assert u64(local, 16) == 105
    assert u64(local, 24) == 7
    assert u64(target) == 7


def test_concurrent_fetch_add_two_qps(rc):
    """Two QPs (on two QPNs, so possibly two engines) fetch & add on one
    target at once: the sum is exact, and the original values seen, sorted,
    step by one add at a time (no two saw the same value)."""
    other = rc.sibling()
    other.connect()
    n, window = 300, 24
    adds = {rc.a.qp.qp_num: 1, other.a.qp.qp_num: 1 << 32}
    target = rc.b.mr(8, ACCESS_ATOMIC)
    results = rc.a.mr(8 * 2 * n)
    qps = {rc.a.qp.qp_num: rc.a.qp, other.a.qp.qp_num: other.a.qp}
    slot = {qpn: i for i, qpn in enumerate(adds)}
    posted = {qpn: 0 for qpn in adds}
    done_of = {qpn: 0 for qpn in adds}
    done = 0
    # Up to window WRs outstanding on each QP; both share side a's CQ.
    while done < 2 * n:
        for qpn, qp in qps.items():
            while posted[qpn] < n and posted[qpn] - done_of[qpn] < window:
                i = posted[qpn]
                off = 8 * (slot[qpn] * n + i)
                qp.post_send(atomic_wr(qpn << 16 | i, FAA, (results, off),
                                       (target, 0), compare_add=adds[qpn]))
                posted[qpn] += 1
        for wc in rc.a.poll(1):
            assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
            assert wc.opcode == e.IBV_WC_FETCH_ADD
            qpn = wc.wr_id >> 16
            assert wc.qp_num == qpn
            assert wc.wr_id & 0xffff == done_of[qpn], "in order per QP"
            done_of[qpn] += 1
            done += 1
    assert u64(target) == n * (1 + (1 << 32))
    seen = sorted(u64(results, 8 * k) for k in range(2 * n))
    assert seen[0] == 0
    steps = {y - x for x, y in zip(seen, seen[1:])}
    assert steps <= {1, 1 << 32}, sorted(steps)[:4]
    # Per QP, each saw a larger value than its previous one.
    for s in range(2):
        mine = [u64(results, 8 * (s * n + i)) for i in range(n)]
        assert mine == sorted(mine)


# ---- errors ----------------------------------------------------------------

# IBTA 11.6.3.1: the affiliated event of a responder that refused a request
# with the NAK behind the requester's status.
RESPONDER_EVENT = {e.IBV_WC_REM_ACCESS_ERR: e.IBV_EVENT_QP_ACCESS_ERR,
                   e.IBV_WC_REM_INV_REQ_ERR: e.IBV_EVENT_QP_REQ_ERR}


def expect_error(side, wr_id, statuses, responder):
    """The requester's error completion; then the responder's QP is in
    the error state with the event RESPONDER_EVENT gives, where it is
    srnic: its responder over the wire and local delivery follow one set
    of rules (rxe 6.1's responder reports no event)."""
    wc = side.poll()[0]
    assert wc.wr_id == wr_id
    assert wc.status in statuses, status_name(wc.status)
    side.wait_state(ERR)
    if responder.end.kind == "srnic":
        responder.wait_state(ERR)
        event = responder.async_event()
        assert event == RESPONDER_EVENT[wc.status], \
            f"responder event {event}, expected " \
            f"{RESPONDER_EVENT[wc.status]} for {status_name(wc.status)}"
    return wc


def test_misaligned_target(rc):
    """A target not 8-byte aligned (inside the MR): the responder refuses
    it, IBV_WC_REM_INV_REQ_ERR, and nothing is written. rxe's provider
    refuses it earlier, at post time (EINVAL)."""
    a, b = rc.a, rc.b
    target, result = b.mr(16, ACCESS_ATOMIC), a.mr(8)
    put_u64(target, 0x0101010101010101, 0)
    put_u64(target, 0x0202020202020202, 8)
    put_u64(result, 0x3333333333333333)
    wr = atomic_wr(20, FAA, (result, 0), (target, 1), compare_add=1)
    if rc.topo.a.kind == "rxe":
        with pytest.raises(PyverbsRDMAError) as ex:
            a.qp.post_send(wr)
        assert ex.value.error_code == errno.EINVAL, ex.value
        return
    a.qp.post_send(wr)
    expect_error(a, 20, (e.IBV_WC_REM_INV_REQ_ERR,), b)
    assert u64(target, 0) == 0x0101010101010101
    assert u64(target, 8) == 0x0202020202020202
    assert u64(result) == 0x3333333333333333


@pytest.mark.parametrize("opcode", [CAS, FAA], ids=["cas", "faa"])
def test_mr_without_remote_atomic(rc, opcode):
    """An MR granting remote read and write but not atomic:
    IBV_WC_REM_ACCESS_ERR, the target untouched."""
    a, b = rc.a, rc.b
    target, result = b.mr(8, ACCESS_ALL), a.mr(8)
    put_u64(target, 77)
    a.qp.post_send(atomic_wr(21, opcode, (result, 0), (target, 0),
                             compare_add=77, swap=1))
    expect_error(a, 21, (e.IBV_WC_REM_ACCESS_ERR,), b)
    assert u64(target) == 77


def test_bad_rkey(rc):
    a, b = rc.a, rc.b
    target, result = b.mr(8, ACCESS_ATOMIC), a.mr(8)
    put_u64(target, 9)
    wr = atomic_wr(22, FAA, (result, 0), (target, 0), compare_add=1)
    wr.set_wr_atomic(rkey=(target.rkey + 1) & 0xffffffff, addr=target.buf,
                     compare_add=1, swap=0)
    a.qp.post_send(wr)
    expect_error(a, 22, (e.IBV_WC_REM_ACCESS_ERR,), b)
    assert u64(target) == 9


def test_target_past_mr_end(rc):
    a, b = rc.a, rc.b
    target, result = b.mr(16, ACCESS_ATOMIC), a.mr(8)
    a.qp.post_send(atomic_wr(23, FAA, (result, 0), (target, 16),
                             compare_add=1))
    expect_error(a, 23, (e.IBV_WC_REM_ACCESS_ERR,), b)


def test_qp_without_remote_atomic(topology):
    """The responder QP does not grant REMOTE_ATOMIC (the MR does): an
    invalid request, IBV_WC_REM_INV_REQ_ERR, as rxe answers it and as
    srnic answers READs and WRITEs its QP does not enable (a remote access
    error is the MR's and the R_Key's: test_mr_without_remote_atomic)."""
    p = connected(topology, qp_access=ACCESS_ALL)
    try:
        target, result = p.b.mr(8, ACCESS_ATOMIC), p.a.mr(8)
        put_u64(target, 3)
        p.a.qp.post_send(atomic_wr(24, FAA, (result, 0), (target, 0),
                                   compare_add=1))
        expect_error(p.a, 24, (e.IBV_WC_REM_INV_REQ_ERR,), p.b)
        assert u64(target) == 3
    finally:
        p.close()


def test_result_sge_checks(rc):
    """The local side: exactly one SGE of 8 bytes (EINVAL otherwise, as
    rxe), and a result MR without LOCAL_WRITE fails locally."""
    a, b = rc.a, rc.b
    target = b.mr(8, ACCESS_ATOMIC)
    result = a.mr(16)
    bad_sgls = [[SGE(result.buf, 4, result.lkey)]]
    if rc.topo.a.kind == "srnic":
        # rxe 6.1 accepts any SGL of 8 bytes or more.
        bad_sgls += [[SGE(result.buf, 16, result.lkey)],
                     [SGE(result.buf, 8, result.lkey),
                      SGE(result.buf + 8, 8, result.lkey)]]
    for sgl in bad_sgls:
        with pytest.raises(PyverbsRDMAError) as ex:
            a.qp.post_send(atomic_wr(25, FAA, None, (target, 0),
                                     compare_add=1, sgl=sgl))
        assert ex.value.error_code == errno.EINVAL, (ex.value, len(sgl))

    readonly = a.mr(8, e.IBV_ACCESS_REMOTE_READ)
    put_u64(target, 50)
    a.qp.post_send(atomic_wr(26, FAA, (readonly, 0), (target, 0),
                             compare_add=1))
    wc = a.poll()[0]
    assert wc.wr_id == 26
    assert wc.status in (e.IBV_WC_LOC_PROT_ERR,), status_name(wc.status)


# ---- replay under duplication and loss (srnic over the wire) --------------


FAULTS = {
    # Every request may arrive twice: duplicates must not execute again.
    "duplicate": ({"tx_duplicate": 300000}, {"rx_duplicate": 200000}),
    # ATOMIC_ACKs lost: the requester sends the atomic again after its
    # timeout, and the responder answers from its saved result.
    "ack-loss": ({}, {"tx_drop": 200000, "tx_duplicate": 100000}),
}


def fault_wire(topology):
    """The topology, if fault injection can run on it (srnic at both ends
    of the wire); skips the test otherwise."""
    if topology.id != "veth-two-netns" or topo_mod.KIND != "srnic":
        pytest.skip("fault injection needs srnic at both ends of the wire")
    return topology


def complete_in_order_under_faults(wire, fault, seed, side, total, window,
                                   post):
    """With FAULTS[fault]'s knobs set on both ends, post(i) posts WR i of
    total on side's QP, at most window outstanding; each must complete
    successfully and in order. Returns how many duplicate requests the
    responder (end b) saw meanwhile."""
    a_knobs, b_knobs = FAULTS[fault]
    before = harness.link_counters(wire.b)
    try:
        for end, knobs in ((wire.a, a_knobs), (wire.b, b_knobs)):
            set_knobs(end.name, seed=seed, **knobs)
        posted = done = 0
        while done < total:
            while posted < total and posted - done < window:
                post(posted)
                posted += 1
            for wc in side.poll(1, timeout=60):
                assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
                assert wc.wr_id == done
                done += 1
    finally:
        for end, knobs in ((wire.a, a_knobs), (wire.b, b_knobs)):
            set_knobs(end.name, **{k: 0 for k in knobs})
    after = harness.link_counters(wire.b)
    return after["rx_duplicate_requests"] - before["rx_duplicate_requests"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fetch_add_exactly_once_under_faults(topology, fault):
    """Fetch & adds in a window of 8 while packets are duplicated or
    lost: the target ends at exactly their number, each saw its
    predecessors' sum, and duplicates did reach the responder."""
    wire = fault_wire(topology)
    # 4.096 us * 2^10 ~ 4 ms (srnic waits 10 ms at least): quick retries.
    p = connected(wire, timeout=10)
    n = 400
    try:
        target, results = p.b.mr(8, ACCESS_ATOMIC), p.a.mr(8 * n)
        put_u64(target, 0)
        injected_before = sum(injected(wire.a.name).values()) + \
            sum(injected(wire.b.name).values())
        dups = complete_in_order_under_faults(
            wire, fault, 1234, p.a, n, 8,
            lambda i: p.a.qp.post_send(atomic_wr(i, FAA, (results, 8 * i),
                                                 (target, 0), compare_add=1)))
        assert u64(target) == n, "each fetch & add applied exactly once"
        assert [u64(results, 8 * i) for i in range(n)] == list(range(n))
        faults = sum(injected(wire.a.name).values()) + \
            sum(injected(wire.b.name).values())
        assert faults > injected_before, "no fault injected"
        assert dups > 0, "no duplicate atomic reached the responder"
    finally:
        p.close()


# ---- ATOMIC WRITE (srnic at both ends: rxe 6.1 has none) -------------------

AW_OPS = (e.IBV_QP_EX_WITH_ATOMIC_WRITE |
          e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
# IBV_DEVICE_ATOMIC_WRITE of device_cap_flags_ex (IB_UVERBS_DEVICE_*).
DEVICE_ATOMIC_WRITE = 1 << 40


def srnic_both(topology):
    for end in (topology.a, topology.b):
        if end.kind != "srnic":
            pytest.skip(f"{end.name} is {end.kind}: rxe 6.1 has no "
                        "ATOMIC WRITE")


def aw_connected(topology, qp_access=ACCESS_ATOMIC, timeout=14):
    """A pair whose side a posts through the extended API (ibv_wr_*), with
    ATOMIC WRITE and fetch & add."""
    srnic_both(topology)
    p = RCPair(topology, qp_access=qp_access)
    a = p.a
    cap = QPCap(max_send_wr=64, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1)
    attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=a.cq, rcq=a.cq, cap=cap,
                        pd=a.pd, send_ops_flags=AW_OPS,
                        comp_mask=e.IBV_QP_INIT_ATTR_PD |
                        e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    a.qp = QPEx(a.ctx, attr)
    p.connect(timeout=timeout)
    return p


@pytest.fixture
def aw(topology):
    p = aw_connected(topology)
    yield p
    p.close()


def post_atomic_write(side, wr_id, target, offset, value, rkey=None):
    """ibv_wr_atomic_write of the native 64-bit value to target + offset."""
    qp = side.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_atomic_write(target.rkey if rkey is None else rkey,
                       target.buf + offset, struct.pack("=Q", value & U64))
    qp.wr_complete()


def post_fetch_add(side, wr_id, target, offset, result, roff, add):
    qp = side.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_atomic_fetch_add(target.rkey, target.buf + offset, add)
    qp.wr_set_sge(SGE(result.buf + roff, 8, result.lkey))
    qp.wr_complete()


def check_aw_ok(wc, wr_id):
    assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert wc.wr_id == wr_id
    assert wc.opcode == e.IBV_WC_ATOMIC_WRITE


def test_atomic_write_cap(topology):
    srnic_both(topology)
    p = RCPair(topology)
    try:
        for side in p.sides():
            flags = side.ctx.query_device_ex().device_cap_flags_ex
            assert flags & DEVICE_ATOMIC_WRITE, hex(flags)
    finally:
        p.close()


def test_atomic_write_value_lands(aw):
    """The 8 bytes land at the target, nothing around them changes, the
    target needs REMOTE_WRITE only, and no receive WQE is involved."""
    a, b = aw.a, aw.b
    target = b.mr(64, ACCESS_ALL)
    guard = bytes(range(64))
    target.write(guard, 64, 0)
    post_atomic_write(a, 1, target, 16, 0x0123456789abcdef)
    check_aw_ok(a.poll()[0], 1)
    assert u64(target, 16) == 0x0123456789abcdef
    assert target.read(16, 0) == guard[:16]
    assert target.read(40, 24) == guard[24:]
    post_atomic_write(a, 2, target, 56, U64)
    check_aw_ok(a.poll()[0], 2)
    assert u64(target, 56) == U64
    assert u64(target, 16) == 0x0123456789abcdef
    assert target.read(32, 24) == guard[24:56]
    assert b.drain() == []


def test_atomic_write_post_send(aw):
    """ibv_post_send with IBV_WR_ATOMIC_WRITE: the 8 bytes its one SGE
    points at, wr.rdma the target; EINVAL for another SGE length."""
    a, b = aw.a, aw.b
    target, src = b.mr(8, ACCESS_ALL), a.mr(16)
    put_u64(target, 5)
    put_u64(src, 0xfeedfacecafebeef, 8)
    wr = SendWR(wr_id=3, opcode=e.IBV_WR_ATOMIC_WRITE, num_sge=1,
                sg=[SGE(src.buf + 8, 8, src.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(target.rkey, target.buf)
    a.qp.post_send(wr)
    check_aw_ok(a.poll()[0], 3)
    assert u64(target) == 0xfeedfacecafebeef
    bad = SendWR(wr_id=4, opcode=e.IBV_WR_ATOMIC_WRITE, num_sge=1,
                 sg=[SGE(src.buf, 16, src.lkey)],
                 send_flags=e.IBV_SEND_SIGNALED)
    bad.set_wr_rdma(target.rkey, target.buf)
    with pytest.raises(PyverbsRDMAError) as ex:
        a.qp.post_send(bad)
    assert ex.value.error_code == errno.EINVAL, ex.value


def test_atomic_write_with_fetch_add(aw):
    """ATOMIC WRITEs and fetch & adds on one word, in one stream: each
    fetch & add sees the value the write before it stored."""
    a, b = aw.a, aw.b
    target, results = b.mr(8, ACCESS_ATOMIC), a.mr(8 * 16)
    n = 16
    for i in range(n):
        post_atomic_write(a, 100 + 2 * i, target, 0, 1000 * i + (i << 40))
        post_fetch_add(a, 101 + 2 * i, target, 0, results, 8 * i, 3)
    wcs = a.poll(2 * n)
    for i, wc in enumerate(wcs):
        assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
        assert wc.wr_id == 100 + i
        assert wc.opcode == (e.IBV_WC_ATOMIC_WRITE if i % 2 == 0 else
                             e.IBV_WC_FETCH_ADD)
    assert [u64(results, 8 * i) for i in range(n)] == \
        [1000 * i + (i << 40) for i in range(n)]
    assert u64(target) == 1000 * (n - 1) + ((n - 1) << 40) + 3


def test_atomic_write_misaligned(aw):
    """A target not 8-byte aligned: IBV_WC_REM_INV_REQ_ERR, nothing
    written."""
    a, b = aw.a, aw.b
    target = b.mr(16, ACCESS_ALL)
    put_u64(target, 0x0101010101010101, 0)
    put_u64(target, 0x0202020202020202, 8)
    post_atomic_write(a, 5, target, 4, 0x7777777777777777)
    expect_error(a, 5, (e.IBV_WC_REM_INV_REQ_ERR,), b)
    assert u64(target, 0) == 0x0101010101010101
    assert u64(target, 8) == 0x0202020202020202


def test_atomic_write_mr_without_remote_write(aw):
    """An MR granting remote read and atomics but not write:
    IBV_WC_REM_ACCESS_ERR, the target untouched."""
    a, b = aw.a, aw.b
    target = b.mr(8, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ |
                  e.IBV_ACCESS_REMOTE_ATOMIC)
    put_u64(target, 77)
    post_atomic_write(a, 6, target, 0, 1)
    expect_error(a, 6, (e.IBV_WC_REM_ACCESS_ERR,), b)
    assert u64(target) == 77


def test_atomic_write_bad_rkey_and_bounds(topology):
    for case in ("rkey", "bounds"):
        p = aw_connected(topology)
        try:
            target = p.b.mr(16, ACCESS_ALL)
            put_u64(target, 9, 8)
            if case == "rkey":
                post_atomic_write(p.a, 7, target, 8, 1,
                                  rkey=(target.rkey + 1) & 0xffffffff)
            else:
                post_atomic_write(p.a, 7, target, 16, 1)
            expect_error(p.a, 7, (e.IBV_WC_REM_ACCESS_ERR,), p.b)
            assert u64(target, 8) == 9
        finally:
            p.close()


def test_atomic_write_qp_without_remote_write(topology):
    """The responder QP grants READ and atomics, not WRITE (the MR does):
    an invalid request, IBV_WC_REM_INV_REQ_ERR, as for a WRITE."""
    p = aw_connected(topology, qp_access=e.IBV_ACCESS_LOCAL_WRITE |
                     e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
    try:
        target = p.b.mr(8, ACCESS_ALL)
        put_u64(target, 3)
        post_atomic_write(p.a, 8, target, 0, 4)
        expect_error(p.a, 8, (e.IBV_WC_REM_INV_REQ_ERR,), p.b)
        assert u64(target) == 3
    finally:
        p.close()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_atomic_write_exactly_once_under_faults(topology, fault):
    """Rounds of ATOMIC WRITE, fetch & add, fetch & add on one word while
    packets are duplicated or lost: a duplicate ATOMIC WRITE is ACKed,
    never stored again, so each round's two fetch & adds see the value
    written and the value plus one."""
    wire = fault_wire(topology)
    p = aw_connected(wire, timeout=10)
    rounds = 100
    try:
        target, results = p.b.mr(8, ACCESS_ATOMIC), p.a.mr(16 * rounds)
        put_u64(target, 0)

        def post(i):
            r, k = divmod(i, 3)
            if k == 0:
                post_atomic_write(p.a, i, target, 0, 1000 * r)
            else:
                post_fetch_add(p.a, i, target, 0, results,
                               16 * r + 8 * (k - 1), 1)

        dups = complete_in_order_under_faults(wire, fault, 4321, p.a,
                                              3 * rounds, 9, post)
        got = [(u64(results, 16 * r), u64(results, 16 * r + 8))
               for r in range(rounds)]
        assert got == [(1000 * r, 1000 * r + 1) for r in range(rounds)]
        assert u64(target) == 1000 * (rounds - 1) + 2
        assert dups > 0, "no duplicate request reached the responder"
    finally:
        p.close()
