# SPDX-License-Identifier: GPL-2.0
"""The RC test topologies, built for one device kind: srnic or rxe.

The kind under test comes from SRNIC_TEST_DEVICE_KIND ("srnic", the
default, or "rxe"): the same suites run against the kernel's soft-RoCE to
validate them, and against srnic to accept it.

Each topology is two ends, a and b, each an RDMA device with a RoCE v2
IPv4 GID, and the namespace its netdev lives in:

  one-device       a and b are one device, two QPs on it
  veth-one-netns   two devices on the two ends of a veth pair, one netns
  veth-two-netns   the same, each end in a netns of its own
  srnic-to-rxe     a: srnic in a netns, b: rxe in init_net, over a veth
  rxe-to-srnic     the same, ends swapped (rxe is the requester / client)

rxe binds UDP 4791 in init_net only, so for the rxe kind only one-device
works. Seen on 6.1 in the VM: with two rxe devices on the two ends of a
veth pair in one netns, ib_write_bw's client fails after the exchange (the
route between the two local addresses is lo); an rxe device can be created
in another netns (`ip netns exec NS rdma link add ...` succeeds, port
ACTIVE), but ib_write_bw between it and an rxe device in init_net times out
after the exchange. Those variants are skipped with the reason. An srnic device in
init_net cannot coexist with a loaded rdma_rxe (both want UDP 4791 there),
so rdma_rxe is unloaded for the srnic topologies that have one, and the
interop topologies keep srnic in a netns.

Devices in other netns are still usable from init_net (ib_core's default
"shared" netns mode), so one pyverbs process can drive both ends; the tool
tests run each end's program in its end's netns.
"""
import dataclasses
import os
from dataclasses import dataclass, field

import pytest

import harness

KIND = os.environ.get("SRNIC_TEST_DEVICE_KIND", "srnic")
if KIND not in ("srnic", "rxe"):
    raise pytest.UsageError(
        f"SRNIC_TEST_DEVICE_KIND={KIND!r}: expected srnic or rxe")

TOPOLOGIES = ("one-device", "veth-one-netns", "veth-two-netns",
              "srnic-to-rxe", "rxe-to-srnic")
INTEROP_TOPOLOGIES = ("srnic-to-rxe", "rxe-to-srnic")

# `make check` (scripts/check.sh: SRNIC_TEST_MATRIX=check) runs each suite's
# topology-parametrised tests on the topologies whose paths differ for it:
# local delivery on one device, srnic's wire between two netns, srnic as the
# requester to rxe. A suite whose own code differs on the others (the RC
# data path and its tools, rdma_cm) names them in a module-level
# CHECK_TOPOLOGIES; a test may narrow its suite's with
# @pytest.mark.check_topologies(...). The other two topologies (two devices
# in one netns, rxe as the requester) run there, in `make check-all` and in
# `make check PLATFORM=NAME`, which run every topology
# (SRNIC_TEST_MATRIX=full, the default). On make check's other platforms
# (SRNIC_TEST_MATRIX=platform) a test marked platform_subset runs with the
# parameters it names only, the ones whose code differs between kernels.
# tests/conftest.py deselects.
CHECK_TOPOLOGIES = ("one-device", "veth-two-netns", "srnic-to-rxe")
MATRIX = os.environ.get("SRNIC_TEST_MATRIX", "full")
if MATRIX not in ("check", "platform", "full"):
    raise pytest.UsageError(
        f"SRNIC_TEST_MATRIX: {MATRIX!r} is none of check, platform, full")

# SRNIC_TEST_TOPOLOGIES=one-device,srnic-to-rxe runs a subset.
SELECTED = [t for t in os.environ.get("SRNIC_TEST_TOPOLOGIES", "").split(",")
            if t]
for _t in SELECTED:
    if _t not in TOPOLOGIES:
        raise pytest.UsageError(
            f"SRNIC_TEST_TOPOLOGIES: {_t!r} is none of {TOPOLOGIES}")

# rdma_rxe gained network namespaces in Linux 7.1: an rxe device in any
# netns, RC between two of them in two netns (seen on 7.2). Before, it binds
# UDP 4791 in init_net only. (A version test: trying it would take an RC
# exchange.)
RXE_NETNS = harness.KERNEL >= (7, 1)

RXE_SKIP = {
    "veth-one-netns": "rxe: two rxe devices in one netns cannot exchange "
                      "traffic (the route between their addresses is lo)",
    "veth-two-netns": "rxe: binds UDP 4791 in init_net only; an rxe device "
                      "created in another netns does no RC (6.1 and 6.12)",
    "srnic-to-rxe": "interop topology: needs srnic (kind is rxe)",
    "rxe-to-srnic": "interop topology: needs srnic (kind is rxe)",
}
if RXE_NETNS:
    del RXE_SKIP["veth-two-netns"]


@dataclass
class End:
    """One end: an RDMA device on a netdev with one IPv4 address."""
    name: str
    kind: str
    netdev: str
    addr: str
    netns: str = None
    gid: str = ""
    gid_index: int = -1

    def resolve_gid(self):
        self.gid = harness.ipv4_gid(self.addr)
        self.gid_index = harness.wait_for(
            lambda: [i for i, g, t in harness.port_gids(self.name)
                     if g == self.gid and t == "RoCE v2"],
            timeout=20, what=f"RoCE v2 GID of {self.addr} on {self.name}")[0]

    def cmd(self, *argv):
        """argv run in this end's netns."""
        if self.netns:
            return ["ip", "netns", "exec", self.netns] + list(argv)
        return list(argv)


@dataclass
class Topology:
    id: str
    a: End
    b: End
    links: list = field(default_factory=list)

    @property
    def same_device(self):
        return self.a.name == self.b.name


def link_local_end(end):
    """end, addressed by its RoCE v2 IPv6 link-local GID instead."""
    def ready():
        out = harness.run(*end.cmd("ip", "-6", "addr", "show", "dev",
                                   end.netdev, "scope", "link")).stdout
        return "inet6 fe80" in out and "tentative" not in out
    harness.wait_for(ready, timeout=20, what=f"link-local of {end.netdev}")
    gids = [(i, g) for i, g, t in harness.port_gids(end.name)
            if g.startswith("fe80") and t == "RoCE v2"]
    assert gids, harness.port_gids(end.name)
    return dataclasses.replace(end, gid=gids[0][1], gid_index=gids[0][0])


def rdma_link_add(name, kind, netdev, netns=None):
    harness.run("rdma", "link", "add", name, "type", kind, "netdev", netdev,
                netns=netns)


def rxe_loaded():
    return harness.module_loaded("rdma_rxe")


def load_rxe():
    if not rxe_loaded():
        harness.run("modprobe", "rdma_rxe")


def unload_rxe():
    """rdma_rxe out, so that an srnic device may bind UDP 4791 in init_net."""
    if not rxe_loaded():
        return
    for name, link in harness.rdma_links().items():
        if name.startswith("rxe") or link.get("type") == "rxe":
            harness.run("rdma", "link", "delete", name, check=False)
    harness.run("modprobe", "-r", "rdma_rxe", timeout=60)


def load_srnic():
    if not harness.module_loaded("srnic"):
        harness.run("modprobe", "srnic")


# Each topology gets its own /24 so addresses never collide between them.
SUBNET = {t: i + 20 for i, t in enumerate(TOPOLOGIES)}


def build(topo_id, kind=KIND, names=None):
    """Build topo_id for kind; returns (Topology, veth). Skips (pytest.skip)
    the combinations that cannot work; the caller tears down with
    teardown(). names: the two devices' names for veth-one-netns, when
    srnic0 and srnic1 are taken."""
    if kind == "rxe" and topo_id in RXE_SKIP:
        pytest.skip(RXE_SKIP[topo_id])
    net = f"198.18.{SUBNET[topo_id]}"
    veth = harness.Veth()
    topo = None
    try:
        if topo_id == "one-device":
            if kind == "rxe":
                load_rxe()
            else:
                unload_rxe()
                load_srnic()
            harness.run("ip", "addr", "add", f"{net}.1/24", "dev", veth.a)
            end = End(f"{kind}0", kind, veth.a, f"{net}.1")
            rdma_link_add(end.name, kind, veth.a)
            topo = Topology(topo_id, end, end, [end.name])
        elif topo_id == "veth-one-netns":
            unload_rxe()
            load_srnic()
            # ib_core resolves the peer's MAC by ARP between two local
            # addresses, which Linux drops as martian without accept_local
            # (srnic's README; without it the move to RTR fails, ETIMEDOUT).
            harness.run("sysctl", "-qw",
                        f"net.ipv4.conf.{veth.a}.accept_local=1",
                        f"net.ipv4.conf.{veth.b}.accept_local=1")
            harness.run("ip", "addr", "add", f"{net}.1/24", "dev", veth.a)
            harness.run("ip", "addr", "add", f"{net}.2/24", "dev", veth.b)
            a_name, b_name = names or ("srnic0", "srnic1")
            a = End(a_name, kind, veth.a, f"{net}.1")
            b = End(b_name, kind, veth.b, f"{net}.2")
            rdma_link_add(a.name, kind, a.netdev)
            rdma_link_add(b.name, kind, b.netdev)
            topo = Topology(topo_id, a, b, [a.name, b.name])
        elif topo_id == "veth-two-netns":
            if kind == "rxe":
                # Only with RXE_NETNS (RXE_SKIP); its own namespaces and
                # subnet, so that it can stand beside srnic's (make bench).
                # Device names are global (ib_core answers a taken one
                # with ENFILE): rxe1 and rxe2 leave rxe0 to one-device.
                load_rxe()
                ns, net = ("rcnsa-rxe", "rcnsb-rxe"), "198.18.40"
                names = ("rxe1", "rxe2")
            else:
                unload_rxe()
                load_srnic()
                ns = ("rcnsa", "rcnsb")
                names = ("srnic0", "srnic1")
            veth.move_to_netns(veth.a, ns[0])
            veth.move_to_netns(veth.b, ns[1])
            a = End(names[0], kind, veth.a, f"{net}.1", ns[0])
            b = End(names[1], kind, veth.b, f"{net}.2", ns[1])
            for end in (a, b):
                harness.run("ip", "addr", "add", f"{end.addr}/24", "dev",
                            end.netdev, netns=end.netns)
                rdma_link_add(end.name, kind, end.netdev, end.netns)
            topo = Topology(topo_id, a, b, [a.name, b.name])
        elif topo_id in ("srnic-to-rxe", "rxe-to-srnic"):
            load_rxe()
            load_srnic()
            veth.move_to_netns(veth.a, "rcnss")
            s = End("srnic0", "srnic", veth.a, f"{net}.1", "rcnss")
            r = End("rxe0", "rxe", veth.b, f"{net}.2")
            harness.run("ip", "addr", "add", f"{s.addr}/24", "dev", s.netdev,
                        netns=s.netns)
            harness.run("ip", "addr", "add", f"{r.addr}/24", "dev", r.netdev)
            rdma_link_add(s.name, "srnic", s.netdev, s.netns)
            rdma_link_add(r.name, "rxe", r.netdev)
            if topo_id == "srnic-to-rxe":
                topo = Topology(topo_id, s, r, [s.name, r.name])
            else:
                topo = Topology(topo_id, r, s, [s.name, r.name])
        else:
            raise ValueError(topo_id)
        topo.a.resolve_gid()
        if not topo.same_device:
            topo.b.resolve_gid()
        return topo, veth
    except BaseException:
        teardown(topo, veth)
        raise


def steer_flows_in_order(topo):
    """Receive packet steering (RPS) over every CPU on each end's netdev:
    the backlog a received packet waits in is then chosen by its flow's
    hash, not by the CPU that sent it, so one QP's packets stay in order.
    Without it a veth delivers from the sending CPU's backlog, and a sender
    that moves to another CPU while the first one's backlog waits for
    ksoftirqd overtakes its own earlier packets (the UC suites, which
    cannot recover from that; Documentation/reliability.rst, "Sixth
    run")."""
    mask = f"{(1 << os.cpu_count()) - 1:x}"
    for end in {topo.a.name: topo.a, topo.b.name: topo.b}.values():
        path = f"/sys/class/net/{end.netdev}/queues/rx-0/rps_cpus"
        harness.run(*end.cmd("sh", "-c", f"echo {mask} > {path}"))


class BridgeHosts:
    """count hosts on one Ethernet segment: host i (from 1) is network
    namespace {prefix}{i} with an srnic device of that name on a veth
    whose other end (bridge_port(i)) is on Linux bridge `bridge` in
    init_net, address {net}.{i}/24. A context manager: leaving it deletes
    the devices, the veths and the bridge."""

    def __init__(self, count, prefix, net, bridge):
        self.bridge = bridge
        self.veths, self.ends = [], []
        unload_rxe()
        load_srnic()
        harness.run("ip", "link", "add", bridge, "type", "bridge")
        harness.run("ip", "link", "set", bridge, "up")
        try:
            for i in range(1, count + 1):
                veth = harness.Veth()
                self.veths.append(veth)
                ns = f"{prefix}{i}"
                veth.move_to_netns(veth.a, ns)
                harness.run("ip", "link", "set", veth.b, "master", bridge)
                end = End(f"{prefix}{i}", "srnic", veth.a, f"{net}.{i}", ns)
                harness.run("ip", "addr", "add", f"{end.addr}/24", "dev",
                            end.netdev, netns=ns)
                rdma_link_add(end.name, "srnic", end.netdev, ns)
                self.ends.append(end)
            for end in self.ends:
                end.resolve_gid()
        except BaseException:
            self.close()
            raise

    def bridge_port(self, i):
        """The bridge's port to host i (its veth's end in init_net)."""
        return self.veths[i - 1].b

    def close(self):
        for end in self.ends:
            harness.run("rdma", "link", "delete", end.name, check=False)
        for veth in self.veths:
            veth.close()
        harness.run("ip", "link", "delete", self.bridge, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def teardown(topo, veth):
    if topo is not None:
        for name in topo.links:
            harness.run("rdma", "link", "delete", name, check=False)
    veth.close()


@pytest.fixture(scope="module",
                params=[t for t in TOPOLOGIES if not SELECTED or t in SELECTED])
def topology(request):
    """A built topology of the kind under test, one per module and param."""
    topo, veth = build(request.param)
    yield topo
    teardown(topo, veth)
