# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 300
"""srnic's CNPs to an rxe peer (tests/test_ecn.py has srnic to srnic): rxe
(the requester, in init_net) writes to srnic (ECN on, in a netns) over a
veth whose rxe end marks every RoCEv2 packet it sends Congestion
Experienced (tc pedit; rxe sends none ECN-capable), so srnic answers with
CNPs, which rxe does not know (it has no congestion control) and must drop
without harm: every WRITE lands, and the kernel reports nothing (the VM
runner checks the console).
"""
import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import RCPair, check_ok, send_wr, sge

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(topology.KIND != "srnic", reason="srnic's ECN"),
]


def np_counters(end):
    c = harness.link_counters(end)
    return c["np_ecn_marked_roce_packets"], c["np_cnp_sent"]


def test_cnps_to_rxe():
    topo, veth = topology.build("rxe-to-srnic", "srnic")
    rxe, srnic = topo.a, topo.b
    try:
        # Everything rxe sends to UDP 4791 leaves marked CE.
        harness.run("tc", "qdisc", "add", "dev", rxe.netdev, "clsact")
        harness.run("tc", "filter", "add", "dev", rxe.netdev, "egress",
                    "protocol", "ip", "flower", "ip_proto", "udp",
                    "dst_port", "4791", "action", "pedit", "ex", "munge",
                    "ip", "dsfield", "set", "3", "retain", "3", "pipe",
                    "action", "csum", "ip")
        harness.set_device_switch(srnic, "ecn", 1)
        marked0, sent0 = np_counters(srnic)
        pair = RCPair(topology.Topology("rxe-writes-srnic", rxe, srnic))
        try:
            pair.connect()
            size = 8192
            src, dst = pair.a.mr(size), pair.b.mr(size)
            for n in range(20):
                data = bytes((n * 7 + i) & 0xff for i in range(size))
                src.write(data, size)
                pair.a.qp.post_send(send_wr(n, e.IBV_WR_RDMA_WRITE,
                                            [sge(src)], remote=(dst, 0)))
                check_ok(pair.a.poll(timeout=60)[0], n,
                         e.IBV_WC_RDMA_WRITE)
                assert dst.read(size, 0) == data, f"WRITE {n}"
        finally:
            pair.close()
        marked, sent = np_counters(srnic)
        assert marked - marked0 >= 20, (marked0, marked)
        assert sent - sent0 > 0, (sent0, sent)
    finally:
        harness.set_device_switch(srnic, "ecn", 0)
        harness.run("tc", "qdisc", "del", "dev", rxe.netdev, "clsact",
                    check=False)
        topology.teardown(topo, veth)
