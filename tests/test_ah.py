# SPDX-License-Identifier: GPL-2.0
"""Address handles through the provider: RoCE v2 AHs to the device's own
IPv4 and IPv6 GIDs and to its veth peer, the refusals (no GRH, a source GID
that does not exist), many AHs, and the
cleanup of a killed process's AHs before the device goes away (a leaked AH
would trip srnic's WARN_ON at dealloc, which fails the VM run).
"""
import errno
import signal
import subprocess
import sys
import textwrap

import pytest

from harness import link_delete, port_gids, run, wait_for

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

MAX_AH = (1 << 16) - 1  # SRNIC_MAX_AH


@pytest.fixture
def ctx(roce_dev):
    with Context(name=roce_dev.name) as c:
        yield c


def ah_attr(sgid_index, dgid, is_global=1):
    gr = GlobalRoute(dgid=GID(dgid), sgid_index=sgid_index)
    return AHAttr(gr=gr, is_global=is_global, port_num=1, dlid=0)


def test_max_ah_reported(ctx):
    assert ctx.query_device().max_ah == MAX_AH


def test_ah_to_own_gid(ctx, roce_dev):
    with PD(ctx) as pd:
        ah = AH(pd, attr=ah_attr(roce_dev.gid_index, roce_dev.gid))
        ah.close()


def test_ah_to_peer_and_ipv6(ctx, roce_dev, veth):
    # ib_core resolves the peer's MAC by ARP between two local addresses,
    # which Linux drops as martian without accept_local (README).
    run("sysctl", "-qw", f"net.ipv4.conf.{veth.a}.accept_local=1",
        f"net.ipv4.conf.{veth.b}.accept_local=1")
    run("ip", "addr", "add", "198.18.0.2/24", "dev", veth.b)
    peer = "0000:0000:0000:0000:0000:ffff:c612:0002"
    # The netdev's IPv6 link-local address is a RoCE v2 GID too.
    v6 = wait_for(lambda: [(i, g) for i, g, t in port_gids(roce_dev.name)
                           if t == "RoCE v2" and g.startswith("fe80:")],
                  what="link-local RoCE v2 GID")[0]
    with PD(ctx) as pd:
        ahs = [AH(pd, attr=ah_attr(roce_dev.gid_index, peer)),
               AH(pd, attr=ah_attr(v6[0], v6[1]))]
        for ah in ahs:
            ah.close()


def test_ah_without_grh_is_einval(ctx):
    with PD(ctx) as pd:
        with pytest.raises(PyverbsRDMAError) as info:
            AH(pd, attr=AHAttr(is_global=0, port_num=1))
        assert info.value.error_code == errno.EINVAL


def test_ah_with_missing_sgid_fails(ctx, roce_dev):
    used = {i for i, _, _ in port_gids(roce_dev.name)}
    free = next(i for i in range(ctx.query_port(1).gid_tbl_len)
                if i not in used)
    with PD(ctx) as pd:
        with pytest.raises(PyverbsRDMAError) as info:
            AH(pd, attr=ah_attr(free, roce_dev.gid))
        # ib_core's answer (rdma_get_gid_attr()), before srnic is called.
        assert info.value.error_code == errno.ENODATA, str(info.value)


def test_many_ahs(ctx, roce_dev):
    with PD(ctx) as pd:
        ahs = [AH(pd, attr=ah_attr(roce_dev.gid_index, roce_dev.gid))
               for _ in range(2000)]
        for ah in ahs[::2]:
            ah.close()
        ahs = ahs[1::2] + [AH(pd, attr=ah_attr(roce_dev.gid_index,
                                               roce_dev.gid))
                           for _ in range(1000)]
        for ah in ahs:
            ah.close()


def test_killed_process_ahs_cleaned_up(roce_dev):
    script = textwrap.dedent(f"""
        import sys
        from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
        from pyverbs.device import Context
        from pyverbs.pd import PD
        ctx = Context(name={roce_dev.name!r})
        pd = PD(ctx)
        gr = GlobalRoute(dgid=GID({roce_dev.gid!r}),
                         sgid_index={roce_dev.gid_index})
        ahs = [AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
               for _ in range(100)]
        print("ready", flush=True)
        sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", script], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # srnic_dev_dealloc() warns if an AH is left in the table.
    link_delete(roce_dev.name)
