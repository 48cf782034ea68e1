# SPDX-License-Identifier: GPL-2.0
"""The middleware people put on verbs, over srnic (issue 24, item 5):
libfabric's verbs provider and UCX's verbs transports, through their own
tools, between the two ends of a topology (tests/topology.py): one
device, and two devices in two netns.

  fi_pingpong       libfabric's ping-pong with its data checks (-c):
                    the msg endpoint (verbs: RC QPs through rdma_cm) and
                    the reliable-datagram endpoint (verbs;ofi_rxm, what
                    MPICH's ch4:ofi and Open MPI's mtl ofi ride on), 4 KiB
                    and 64 KiB
  ucx_info -d       lists the device with rc_verbs and ud_verbs
  ucx_perftest      UCP's tag and stream tests over rc_verbs (ud_verbs
                    for the connection setup) and over ud_verbs alone,
                    and UCT's active messages and puts on each transport
                    (one device: the server runs UCT's test on the device
                    the client names)

ucx_perftest moves data without checking it; the checked MPI job over the
same transports is tests/test_mpi_two_kernels.py. Here each UCX run must
pick the transport asked for (UCX_LOG_LEVEL=info names every endpoint's
lanes), and across two netns both devices' packet counters must grow by
what the run moved at least: the data went over srnic, not over TCP.

UCX_UD_VERBS_ETH_DGID_CHECK=n: UCX 1.13's ud_verbs drops a RoCE datagram
whose GRH destination differs from its own GID, which srnic's and rxe's
IPv4 GIDs always do (README.md). Where UCX is packaged without its
InfiniBand transports (sid's libucx0 1.23.0~rc1 has no libuct_ib.so) the
UCX tests skip with that reason.
"""
import itertools
import re
import shutil

import pytest

import harness
from perftools import run_pair, ucx_has_verbs_transports, ucx_version
import topology

# srnic to srnic: one device, and two devices in two netns.
MIDDLEWARE_TOPOLOGIES = ("one-device", "veth-two-netns")

ports = itertools.count(19800)

UCX_ENV = ("UCX_UD_VERBS_ETH_DGID_CHECK=n", "UCX_LOG_LEVEL=info")


@pytest.fixture(scope="module",
                params=[t for t in MIDDLEWARE_TOPOLOGIES
                        if not topology.SELECTED or t in topology.SELECTED])
def mw_topology(request):
    if topology.KIND != "srnic":
        pytest.skip("srnic's middleware suite")
    topo, veth = topology.build(request.param)
    yield topo
    topology.teardown(topo, veth)


def packets(end):
    c = harness.link_counters(end)
    return c["tx_packets"] + c["rx_packets"]


class PacketsMoved:
    """Packets through the topology's devices during a with block: at
    least `least` on each of two devices. One device serves both ends
    itself, through local delivery and the provider's direct path (which
    moves small messages without a packet): nothing to count there."""

    def __init__(self, topo, least):
        self.ends = [] if topo.same_device else [topo.a, topo.b]
        self.least = least

    def __enter__(self):
        self.before = [packets(e) for e in self.ends]
        return self

    def __exit__(self, kind, *rest):
        if kind:
            return False
        moved = [packets(e) - b for e, b in zip(self.ends, self.before)]
        assert all(m >= self.least for m in moved), \
            f"packets through {[e.name for e in self.ends]}: {moved}, " \
            f"expected at least {self.least} each"
        return False


# ---- libfabric ---------------------------------------------------------------

def fi_pingpong(topo, endpoint, size, iters, tmp_path):
    """fi_pingpong's server on end a, client on end b, data checked (-c);
    returns the client's output."""
    assert shutil.which("fi_pingpong"), \
        "fi_pingpong is missing: scripts/setup-deps.sh installs libfabric-bin"
    port = next(ports)
    provider = "verbs" if endpoint == "msg" else "verbs;ofi_rxm"

    def argv(end):
        return ["fi_pingpong", "-p", provider, "-e", endpoint, "-d",
                end.name, "-c", "-I", str(iters), "-S", str(size)]
    cout, sout = run_pair(topo, argv(topo.a) + ["-B", str(port)],
                          argv(topo.b) + ["-P", str(port)], port, tmp_path,
                          f"fi-{endpoint}-{size}")
    return cout


# rdm: 4 KiB goes eagerly (a SEND), 64 KiB by rendezvous (ofi_rxm's
# RDMA READ of the sender's buffer).
@pytest.mark.parametrize("endpoint,size", [("msg", 65536), ("rdm", 4096),
                                           ("rdm", 65536)])
def test_fi_pingpong(mw_topology, endpoint, size, tmp_path):
    iters = 50
    with PacketsMoved(mw_topology, iters * size // 4096):
        out = fi_pingpong(mw_topology, endpoint, size, iters, tmp_path)
    # bytes  #sent  #ack  total  time  MB/sec  usec/xfer  Mxfers/sec
    label = f"{size // 1024}k"
    rows = [line.split() for line in out.splitlines()
            if line.split()[:1] == [label]]
    assert rows, out
    assert rows[-1][1] == str(iters) and rows[-1][2] == f"={iters}", out


# ---- UCX ---------------------------------------------------------------------

@pytest.fixture
def ucx(mw_topology):
    if not ucx_has_verbs_transports():
        pytest.skip(f"this platform's UCX ({ucx_version()}) is packaged "
                    "without its InfiniBand transports (no libuct_ib.so)")
    return mw_topology


def test_ucx_info_lists_the_device(ucx):
    for end in {ucx.a.name: ucx.a, ucx.b.name: ucx.b}.values():
        out = harness.run(*end.cmd("ucx_info", "-d"), timeout=120).stdout
        # "#      Transport: rc_verbs" then "#         Device: srnic0:1"
        found = re.findall(r"Transport: (\S+)\n#\s+Device: (\S+)", out)
        for tl in ("rc_verbs", "ud_verbs"):
            assert (tl, f"{end.name}:1") in found, out


def ucx_perftest_socket_args():
    """ucx_perftest built with MPI (UCX 1.18 on trixie) runs as an MPI
    application unless -P 0 says otherwise ("This test should be run with
    exactly 2 processes"); UCX 1.13's has no -P."""
    out = harness.run("ucx_perftest", "-h", check=False, timeout=60)
    return ["-P", "0"] if "-P <0|1>" in out.stdout + out.stderr else []


def ucx_perftest(topo, test, tmp_path, tls=None, uct=None, size=4096,
                 iters=500):
    """ucx_perftest's server on end a, client on end b; UCP's test over
    the transports tls (UCX_TLS), or UCT's over transport uct. Returns the
    client's whole output."""
    port = next(ports)
    server = ["env", *UCX_ENV, f"UCX_NET_DEVICES={topo.a.name}:1"]
    client = ["env", *UCX_ENV, f"UCX_NET_DEVICES={topo.b.name}:1"]
    if tls:
        server.append(f"UCX_TLS={tls}")
        client.append(f"UCX_TLS={tls}")
    mode = ucx_perftest_socket_args()
    server += ["ucx_perftest", *mode, "-p", str(port)]
    client += ["ucx_perftest", *mode, "-p", str(port), "-t", test, "-n",
               str(iters), "-w", "20", "-s", str(size), "-f"]
    if uct:
        client += ["-x", uct, "-d", f"{topo.b.name}:1"]
    cout, sout = run_pair(topo, server, client, port, tmp_path,
                          f"ucx-{test}-{uct or tls}", whole_logs=True)
    # The final row: "  iterations  50%ile  average  overall ..."
    assert re.search(rf"^\s+{iters}\s+\d", cout, re.M), cout
    return cout


def uses_transport(log, tl, device):
    """Whether UCX's info log shows a lane of transport tl on device:
    "ep_cfg[0]: tag(rc_verbs/srnic1:1)" (1.13), "perftest inter-node
    cfg#0 tag(rc_verbs/srnic1:1)" (1.18)."""
    return re.search(rf"\w+\([^)]*\b{tl}/{re.escape(device)}:1\b", log)


# make check's other platforms: UCP's tag and stream tests once each.
@pytest.mark.platform_subset(test=["tag_lat"])
@pytest.mark.parametrize("test", ["tag_lat", "stream_bw"])
def test_ucx_perftest_rc_verbs(ucx, test, tmp_path):
    with PacketsMoved(ucx, 500):
        out = ucx_perftest(ucx, test, tmp_path, tls="rc_verbs,ud_verbs")
    # UCX's tag and stream lanes on srnic's RC QPs.
    assert uses_transport(out, "rc_verbs", ucx.b.name), out


@pytest.mark.platform_subset(test=["stream_lat"])
@pytest.mark.parametrize("test", ["tag_bw", "stream_lat"])
def test_ucx_perftest_ud_verbs(ucx, test, tmp_path):
    # 1 KiB: a UCX message in one datagram (the veth's MTU of 1500 makes
    # the port's active MTU 1024).
    with PacketsMoved(ucx, 500):
        out = ucx_perftest(ucx, test, tmp_path, tls="ud_verbs", size=1000)
    assert uses_transport(out, "ud_verbs", ucx.b.name), out


# UD has no RDMA WRITE: UCT's ud_verbs offers no put.
@pytest.mark.parametrize("uct,test", [("rc_verbs", "am_lat"),
                                      ("rc_verbs", "put_bw"),
                                      ("ud_verbs", "am_lat")])
def test_ucx_perftest_uct(ucx, uct, test, tmp_path):
    if not ucx.same_device:
        pytest.skip("ucx_perftest's server takes the client's UCT device "
                    "(-d): both ends on one device only")
    with PacketsMoved(ucx, 500):
        ucx_perftest(ucx, test, tmp_path, uct=uct, size=8)
