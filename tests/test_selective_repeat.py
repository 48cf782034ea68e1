# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""Selective repeat (issue 23, item 1): between two srnic devices an RC
requester offers selective repeat (a reserved BTH bit on its requests,
sysfs /sys/class/infiniband/DEV/selective_repeat, on by default); the
responder keeps the requests that arrive beyond a loss and reports them in
selective NAKs, and the requester sends again only what is missing
(kernel/srnic_resp.c, kernel/srnic_req.c). With rxe on either end both
stay IBTA go-back-N. Counters: rx_out_of_sequence_kept, tx_nak_selective,
rx_nak_selective, selective_retransmits (and go-back-N's retransmits).

Multipath (item 3): with sysfs multipath N > 1 and a peer that does
selective repeat (its ACKs carry the bit), a requester spreads its
requests over N UDP source ports, 16 PSNs each in turn; here the odd
ports go through a queue 2 ms slower, so the responder sees the packets
out of order and must keep them; with rxe as the peer, nothing is sprayed.

A stream of distinct 64 KiB RDMA WRITEs, STREAM_DEPTH in flight, goes
from a to b over a veth whose a end drops LOSS of what it sends (netem;
ACKs and NAKs are not lost); every byte is compared at the end.
"""
import contextlib

import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import ACCESS_ALL, RCPair, check_ok, send_wr, sge

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(topology.KIND != "srnic", reason="srnic's protocol"),
]

LOSS = "3%"
TAIL_LOSS = "10%"
STREAM_WRITES = 120
READS = 40
MIXED_COUNT = 300
MIXED_SIZE = 4096
STREAM_DEPTH = 8
STREAM_SIZE = 64 * 1024
# After a timeout in a loss episode, the passes that may follow at once
# (kernel/srnic_req.c: SRNIC_REQ_PROBE_PASSES).
PROBE_PASSES = 4
COUNTERS = ("tx_packets", "rx_duplicate_requests", "rx_out_of_sequence",
            "rx_out_of_sequence_kept", "tx_errors",
            "tx_nak_psn_sequence", "tx_nak_selective", "rx_nak_selective",
            "selective_retransmits", "retransmits", "local_ack_timeouts",
            "rx_read_responses_kept")


def sr_path(end):
    return harness.device_switch_path(end, "selective_repeat")


def set_sr(end, on):
    harness.set_device_switch(end, "selective_repeat", on)


def counters(end):
    if end.kind != "srnic":
        return {}
    c = harness.link_counters(end)
    return {k: c[k] for k in COUNTERS}


def lossy(topo, end):
    """netem drops LOSS of what end sends; the two ends know each other's
    MAC for good (netem would drop ARP too)."""
    for x, peer in ((topo.a, topo.b), (topo.b, topo.a)):
        mac = harness.run(*peer.cmd("cat", f"/sys/class/net/"
                                    f"{peer.netdev}/address")).stdout.strip()
        harness.run(*x.cmd("ip", "neigh", "replace", peer.addr, "lladdr", mac,
                           "dev", x.netdev, "nud", "permanent"))
    harness.run(*end.cmd("tc", "qdisc", "add", "dev", end.netdev, "root",
                         "netem", "loss", LOSS))


def set_loss(end, loss):
    harness.run(*end.cmd("tc", "qdisc", "change", "dev", end.netdev, "root",
                         "netem", "loss", loss))


@pytest.fixture(scope="module")
def wire():
    topo, veth = topology.build("veth-two-netns", "srnic")
    try:
        # A veth delivers from the sending CPU's backlog: a requester that
        # moves between CPUs overtakes its own packets, which the
        # responder reports like losses (a NIC's RSS keeps a flow's
        # packets in order).
        topology.steer_flows_in_order(topo)
        lossy(topo, topo.a)
        yield topo
    finally:
        for end in (topo.a, topo.b):
            set_sr(end, 1)
        topology.teardown(topo, veth)


def stream(topo, depth=STREAM_DEPTH, opcodes=(e.IBV_WR_RDMA_WRITE,),
           count=STREAM_WRITES, size=STREAM_SIZE):
    """count distinct RDMA WRITEs of size by a to b's MR, READs by a from
    it, or fetch-and-adds of 1 on its first 8 bytes, the n-th one
    opcodes[n % len(opcodes)], depth in flight, each to its own place;
    every one completes successfully and every byte lands (an atomic
    executed once: its original value at a, one more at b). Returns (a's,
    b's) counter deltas and the data packets (WRITEs) and READ responses
    the stream needs without loss."""
    before = {end.name: counters(end) for end in (topo.a, topo.b)}
    access = ACCESS_ALL | e.IBV_ACCESS_REMOTE_ATOMIC
    pair = RCPair(topo, qp_access=access, max_send_wr=depth)
    try:
        pair.connect()
        total = count * size
        local, remote = pair.a.mr(total), pair.b.mr(total, access)
        base = bytes((i * 7) & 0xff for i in range(size))
        data = [n.to_bytes(4, "little") * 16 + base[64:] for n in range(count)]
        zero = bytes(size)

        def op(n):
            return opcodes[n % len(opcodes)]

        def added(d):
            return (int.from_bytes(d[:8], "little") + 1).to_bytes(
                8, "little") + d[8:]

        # A READ's data starts at b, a WRITE's at a, an atomic's target at
        # b; both end with all, b with the atomics' targets one more.
        start = {e.IBV_WR_RDMA_READ: (zero, None),
                 e.IBV_WR_RDMA_WRITE: (None, zero),
                 e.IBV_WR_ATOMIC_FETCH_AND_ADD: (bytes(8), None)}
        local.write(b"".join(
            (start[op(n)][0] or b"") + d[len(start[op(n)][0] or b""):]
            for n, d in enumerate(data)), total)
        remote.write(b"".join(start[op(n)][1] or d
                              for n, d in enumerate(data)), total)
        expect_b = [added(d) if op(n) == e.IBV_WR_ATOMIC_FETCH_AND_ADD
                    else d for n, d in enumerate(data)]

        def post(n):
            atomic = op(n) == e.IBV_WR_ATOMIC_FETCH_AND_ADD
            wr = send_wr(n, op(n), [sge(local, n * size, 8 if atomic
                                        else size)],
                         remote=None if atomic else (remote, n * size))
            if atomic:
                wr.set_wr_atomic(rkey=remote.rkey, addr=remote.buf + n * size,
                                 compare_add=1, swap=0)
            pair.a.qp.post_send(wr)

        posted = 0
        while posted < depth:
            post(posted)
            posted += 1
        wc_opcode = {e.IBV_WR_RDMA_READ: e.IBV_WC_RDMA_READ,
                     e.IBV_WR_RDMA_WRITE: e.IBV_WC_RDMA_WRITE,
                     e.IBV_WR_ATOMIC_FETCH_AND_ADD: e.IBV_WC_FETCH_ADD}
        for n in range(count):
            check_ok(pair.a.poll(timeout=60)[0], n, wc_opcode[op(n)])
            if posted < count:
                post(posted)
                posted += 1
        for mr, where, expect in ((local, "a", data), (remote, "b", expect_b)):
            got = mr.read(total, 0)
            bad = next((n for n in range(count)
                        if got[n * size:(n + 1) * size] != expect[n]), None)
            assert bad is None, f"WR {bad} (opcode {op(bad)}) is wrong at " \
                                f"{where}"
        need = count * -(-size // (128 << pair.mtu))
    finally:
        pair.close()
    after = {end.name: counters(end) for end in (topo.a, topo.b)}
    d = {name: {k: v - before[name][k] for k, v in after[name].items()}
         for name in after}
    return d[topo.a.name], d[topo.b.name], need


@pytest.mark.parametrize("topo_id", ["srnic-to-rxe", "rxe-to-srnic"])
def test_with_rxe_it_is_go_back_n(topo_id):
    """(Before the tests of the module's wire, as the next: these
    topologies name their device srnic0, as the wire does, which lives
    from its first test to the end.)
    srnic to rxe: rxe ignores the SR bit and NAKs as IBTA says; rxe to
    srnic: rxe offers nothing, srnic keeps nothing. Every WRITE lands
    whole through the loss on the requester's side."""
    topo, veth = topology.build(topo_id, "srnic")
    try:
        lossy(topo, topo.a)
        a, b, _ = stream(topo)
    finally:
        topology.teardown(topo, veth)
    srnic = a if topo.a.kind == "srnic" else b
    print(f"{topo_id}: srnic {srnic}")
    if topo.a.kind == "srnic":
        assert a["selective_retransmits"] == a["rx_nak_selective"] == 0, a
        assert a["retransmits"] > 0, a
    else:
        assert b["rx_out_of_sequence"] > 0, b
        assert b["rx_out_of_sequence_kept"] == b["tx_nak_selective"] == 0, b


def two_paths(end):
    """end's packets with an odd UDP source port wait 2 ms more (a slower
    ECMP path): prio band 2, netem delay, chosen by a u32 filter."""
    tc = ("tc",)
    harness.run(*end.cmd(*tc, "qdisc", "add", "dev", end.netdev, "root",
                         "handle", "1:", "prio", "bands", "2", "priomap",
                         *["0"] * 16))
    harness.run(*end.cmd(*tc, "qdisc", "add", "dev", end.netdev, "parent",
                         "1:2", "handle", "20:", "netem", "delay", "2ms"))
    harness.run(*end.cmd(*tc, "filter", "add", "dev", end.netdev, "parent",
                         "1:", "protocol", "ip", "prio", "1", "u32", "match",
                         "ip", "protocol", "17", "0xff", "match", "ip",
                         "sport", "1", "0x1", "flowid", "1:2"))


def set_multipath(end, paths):
    harness.set_device_switch(end, "multipath", paths)


@pytest.mark.parametrize("topo_id", ["srnic-to-rxe", "veth-two-netns"])
def test_multipath_sprays_only_to_selective_repeat_peers(topo_id):
    """a sprays over 4 source ports, two of them slower: between srnic
    devices b keeps what the fast paths bring early (no loss here), and
    every WRITE lands whole; to rxe a sends on one port, so rxe sees no
    sequence error."""
    topo, veth = topology.build(topo_id, "srnic")
    try:
        topology.steer_flows_in_order(topo)
        two_paths(topo.a)
        with pytest.raises(OSError):
            set_multipath(topo.a, 0)
        with pytest.raises(OSError):
            set_multipath(topo.a, 17)
        assert harness.sysfs_read(
            harness.device_switch_path(topo.a, "multipath")) == "1"
        set_multipath(topo.a, 4)
        rxe = topo.b.kind == "rxe"
        seq_err = (lambda: harness.link_counters(topo.b)["out_of_seq_request"]
                   if rxe else 0)
        before = seq_err()
        a, b, _ = stream(topo)
        rxe_seq_err = seq_err() - before
    finally:
        topology.teardown(topo, veth)
    print(f"{topo_id}: a {a}, b {b}, rxe sequence errors {rxe_seq_err}")
    assert a["retransmits"] == 0, (a, b)
    if rxe:
        assert rxe_seq_err == 0
        assert a["rx_nak_selective"] == 0, a
    else:
        # Out of order, kept, and never a go-back-N NAK.
        assert b["rx_out_of_sequence_kept"] > 0, (a, b)
        assert b["tx_nak_psn_sequence"] == 0, (a, b)


def test_selective_repeat_is_on_by_default_and_takes_only_booleans(wire):
    for end in (wire.a, wire.b):
        assert harness.sysfs_read(sr_path(end)) == "1"
    with pytest.raises(OSError):
        set_sr(wire.a, "maybe")
    assert harness.sysfs_read(sr_path(wire.a)) == "1"


def test_only_lost_packets_are_sent_again(wire):
    """Selective repeat on, then off at a (go-back-N), through the same
    loss: with it, b keeps what comes after each loss and tells a, a sends
    again only the missing packets (at least a few times fewer extra
    packets than go-back-N sends), and every WRITE lands whole."""
    a, b, need = stream(wire)
    print(f"selective repeat: a {a}, b {b}, {need} packets needed")
    assert b["rx_out_of_sequence_kept"] > 0, (a, b)
    assert b["tx_nak_selective"] > 0, (a, b)
    assert a["rx_nak_selective"] == b["tx_nak_selective"], (a, b)
    assert a["selective_retransmits"] > 0, (a, b)
    # Every go-back-N rewind (a timeout: the loss of a burst's tail) is
    # rarer than the losses sent again alone, and what a sent again had
    # not arrived: b saw next to no duplicate.
    assert a["retransmits"] < a["selective_retransmits"], (a, b)
    assert b["rx_duplicate_requests"] * 10 <= a["selective_retransmits"], \
        (a, b)
    extra_sr = a["tx_packets"] - need

    set_sr(wire.a, 0)
    try:
        ga, gb, need = stream(wire)
    finally:
        set_sr(wire.a, 1)
    print(f"go-back-N: a {ga}, b {gb}, {need} packets needed")
    # a offered nothing: b kept nothing and sent no selective NAK.
    assert gb["rx_out_of_sequence"] > 0, (ga, gb)
    assert gb["rx_out_of_sequence_kept"] == gb["tx_nak_selective"] == 0, \
        (ga, gb)
    assert ga["selective_retransmits"] == 0 and ga["retransmits"] > 0, \
        (ga, gb)
    extra_gbn = ga["tx_packets"] - need
    print(f"extra packets: selective repeat {extra_sr}, go-back-N "
          f"{extra_gbn}")
    # Go-back-N sent again what b had received and dropped as out of
    # sequence, which selective repeat kept: more extra packets.
    assert 0 < extra_sr < extra_gbn, (extra_sr, extra_gbn)


def test_a_timeout_asks_what_arrived_before_going_back(wire):
    """One WRITE at a time: a loss near a WRITE's end leaves nothing after
    it to be kept and reported, only the local ACK timeout tells, and b
    has received, unacknowledged, what came before the loss (a responder
    ACKs every 64 packets and at a message's end). a then sends the oldest
    unacknowledged packet alone, and goes back N only from what b's answer
    acknowledges: b sees a few packets again per timeout, where going back
    from the oldest sends again up to 64 (without the probe: 352 and 576
    duplicates for 15 and 18 timeouts). In a loss episode each pass sends
    the oldest and the probe after it, and a pass whose probe tells the
    oldest is still missing is followed by another, up to PROBE_PASSES of
    them per timeout: at most 1 + PROBE_PASSES copies b already has per
    timeout. (With more loss, for a dozen timeouts.)"""
    set_loss(wire.a, TAIL_LOSS)
    try:
        a, b, _ = stream(wire, depth=1)
    finally:
        set_loss(wire.a, LOSS)
    print(f"one at a time: a {a}, b {b}")
    assert a["local_ack_timeouts"] > 0, (a, b)
    assert b["rx_duplicate_requests"] <= \
        (1 + PROBE_PASSES) * a["local_ack_timeouts"], (a, b)


def test_a_responder_with_selective_repeat_off_goes_back_n(wire):
    """a offers selective repeat, b has it off: b keeps nothing and NAKs
    as IBTA says; a goes back N, and every WRITE lands whole."""
    set_sr(wire.b, 0)
    try:
        a, b, _ = stream(wire)
    finally:
        set_sr(wire.b, 1)
    assert b["rx_out_of_sequence"] > 0, (a, b)
    assert b["rx_out_of_sequence_kept"] == b["tx_nak_selective"] == 0, (a, b)
    assert b["tx_nak_psn_sequence"] > 0, (a, b)
    assert a["selective_retransmits"] == 0 and a["retransmits"] > 0, (a, b)


@contextlib.contextmanager
def responses_lost(wire):
    """b's packets (READ responses, ACKs) lose LOSS on the way, a's
    requests nothing; one skb per packet: netem drops a batch (one GSO
    skb) whole, where a wire loses packets one by one."""
    set_loss(wire.a, "0%")
    harness.run(*wire.b.cmd("tc", "qdisc", "add", "dev", wire.b.netdev,
                            "root", "netem", "loss", LOSS))
    try:
        with harness.module_param("tx_batch", 0):
            yield
    finally:
        harness.run(*wire.b.cmd("tc", "qdisc", "del", "dev",
                                wire.b.netdev, "root"), check=False)
        set_loss(wire.a, LOSS)


def with_and_without(wire, *args):
    """stream(wire, *args) with selective repeat, then with it off at a."""
    sr = stream(wire, *args)
    set_sr(wire.a, 0)
    try:
        return sr, stream(wire, *args)
    finally:
        set_sr(wire.a, 1)


def kept_and_asked(a, b, ga, gb):
    """a's and b's counter deltas with selective repeat (a, b) and going
    back N (ga, gb): with it a kept responses and asked again; without it
    neither, and it went back N."""
    print(f"selective repeat: a {a}, b {b}")
    print(f"go-back-N: a {ga}, b {gb}")
    assert a["rx_read_responses_kept"] > 0, (a, b)
    assert a["selective_retransmits"] > 0, (a, b)
    assert ga["rx_read_responses_kept"] == ga["selective_retransmits"] == 0, \
        (ga, gb)
    assert ga["retransmits"] > 0, (ga, gb)


@pytest.mark.parametrize("depth", [1, 4])
def test_read_responses_lost_are_asked_again_selectively(wire, depth):
    """READs one or four at a time, b's responses losing LOSS on the way
    (a's requests do not): a keeps the responses that come beyond a loss,
    of the oldest READ and of later ones, and asks again, with a READ of
    just their range, only for the missing ones; with selective repeat off
    at a it goes back N. Every byte lands either way, and b sends fewer
    responses again with it."""
    with responses_lost(wire):
        (a, b, need), (ga, gb, _) = with_and_without(
            wire, depth, (e.IBV_WR_RDMA_READ,), READS)
    print(f"{need} responses needed")
    kept_and_asked(a, b, ga, gb)
    # b's packets beyond what the READs need: the responses sent again.
    extra_sr, extra_gbn = b["tx_packets"] - need, gb["tx_packets"] - need
    print(f"responses sent again: selective repeat {extra_sr}, "
          f"go-back-N {extra_gbn}")
    assert extra_sr < extra_gbn, (extra_sr, extra_gbn)


def test_reads_and_atomics_between_writes_are_asked_again_selectively(wire):
    """WRITEs, READs and fetch-and-adds of MIXED_SIZE in turn, STREAM_DEPTH
    in flight, b's responses and ACKs losing LOSS on the way: a response
    tells that b executed every request before its READ, and an ACK or
    response beyond a READ or atomic that misses its answer tells it lost,
    so a keeps what comes beyond a loss across the WRITEs and asks again
    only for the missing responses, and an atomic's alone (b replays it,
    executing it once); with selective repeat off at a it goes back N, and
    b receives those WRITEs and READs again."""
    with responses_lost(wire):
        (a, b, _), (ga, gb, _) = with_and_without(
            wire, STREAM_DEPTH, (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ,
                                 e.IBV_WR_ATOMIC_FETCH_AND_ADD),
            MIXED_COUNT, MIXED_SIZE)
    kept_and_asked(a, b, ga, gb)
    # Only an ACK timeout (a range asked for lost again, the last ACK
    # lost) goes back N; short of one, b receives again only the READs
    # of the ranges asked for, where going back N sends WRITEs again too.
    assert a["retransmits"] <= a["local_ack_timeouts"], (a, b)
    if not a["local_ack_timeouts"]:
        assert b["rx_duplicate_requests"] == a["selective_retransmits"], \
            (a, b)
