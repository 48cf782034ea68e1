# SPDX-License-Identifier: GPL-2.0
"""`rdma resource show qp/cq/mr` with srnic's driver details (issue 25,
item 3; kernel/srnic_verbs.c's fill_res_*_entry callbacks, shown by
`rdma -dd`): a QP's ring occupancy, engine, PSNs and retry state, a CQ's
pending completions, an MR's type, pages, access and ODP faults, each
checked against what the suite did to them."""

import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import ACCESS_ALL, RCPair, check_ok, recv_wr, send_wr, sge

SEND = 64
ODP_SIZE = 4 * 4096
PAGE = 4096


@pytest.fixture(scope="module")
def wire():
    topo, veth = topology.build("veth-two-netns", "srnic")
    yield topo
    topology.teardown(topo, veth)


def resources(kind, end):
    """srnic's view of end's objects of kind (link DEV/1 for a QP, dev DEV
    otherwise)."""
    where = ["link", f"{end.name}/1"] if kind == "qp" else ["dev", end.name]
    return harness.rdma_resources(kind, *where)


def one(kind, end, key, value):
    found = [r for r in resources(kind, end) if r.get(key) == value]
    assert len(found) == 1, (kind, key, value, resources(kind, end))
    return found[0]


def test_qp_cq_and_mr_details(wire):
    pair = RCPair(wire, max_send_wr=8)
    try:
        pair.connect()
        a, b = pair.a, pair.b
        src, dst = a.mr(PAGE * 3), b.mr(PAGE)
        odp = a.mr(ODP_SIZE, ACCESS_ALL | e.IBV_ACCESS_ON_DEMAND)
        for n in range(3):
            b.qp.post_recv(recv_wr(n, [sge(dst, 0, SEND)]))
        a.qp.post_send(send_wr(7, e.IBV_WR_SEND, [sge(src, 0, SEND)]))
        check_ok(b.poll()[0], 0, e.IBV_WC_RECV, SEND)
        # b WRITEs into a's ODP MR: a's engine faults its pages in.
        b.qp.post_send(send_wr(8, e.IBV_WR_RDMA_WRITE,
                               [sge(dst, 0, PAGE)], remote=(odp, 0)))
        check_ok(b.poll()[0], 8, e.IBV_WC_RDMA_WRITE)

        # a's SEND's completion is not polled yet: one CQE pending.
        qa = one("qp", wire.a, "lqpn", a.qp.qp_num)
        qb = one("qp", wire.b, "lqpn", b.qp.qp_num)
        print(qa, qb, sep="\n")
        a_psn, b_psn = pair.psn[a], pair.psn[b]
        assert qa["next_psn"] == qa["una_psn"] == a_psn + 1, qa
        assert qb["epsn"] == a_psn + 1, qb
        assert qa["epsn"] == b_psn + PAGE // (128 << pair.mtu), qa  # WRITE
        assert qa["sq_posted"] == 0 and qa["sq_size"] >= 8, qa
        assert qb["rq_posted"] == 2, qb
        assert qa["retries_left"] == 7 and qa["rnr_retries_left"] == 7, qa
        assert qa["recovering"] == "no" and qa["rnr_waiting"] == "no", qa
        assert qa["peer_selective_repeat"] == "yes", qa
        assert qa["reads_outstanding"] == 0 and qa["cwnd"] > 0, qa
        assert "engine_cpu" in qa and qa["engine_polls"] in ("yes", "no")

        pending = [c.get("cqe_pending") for c in resources("cq", wire.a)
                   if c.get("cqe") is not None]
        assert 1 in pending, resources("cq", wire.a)
        check_ok(a.poll()[0], 7, e.IBV_WC_SEND)
        assert 1 not in [c.get("cqe_pending") for c in resources("cq", wire.a)]

        # MRs by length (rdma shows keys as hex text, or not at all
        # without CAP_NET_ADMIN).
        m = one("mr", wire.a, "mrlen", PAGE * 3)
        print(m)
        pages = -(-(src.buf % PAGE + PAGE * 3) // PAGE)
        assert m["type"] == "user" and m["pages"] == pages, m
        assert int(str(m["access"]), 0) & e.IBV_ACCESS_REMOTE_WRITE, m
        o = one("mr", wire.a, "mrlen", ODP_SIZE)
        print(o)
        assert o["type"] == "odp" and o["odp_faults"] >= 1, o
    finally:
        pair.close()
