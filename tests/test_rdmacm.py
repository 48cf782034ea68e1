# SPDX-License-Identifier: GPL-2.0
"""rdma_cm over srnic: librdmacm's tools between the two ends of a
topology (tests/topology.py), each in its end's netns, server on end a,
client on end b.

rdma_cm connects through the kernel's CM (ib_cm), whose MADs travel on
each device's GSI QP (QP1, created by ib_mad at registration); the
connected QPs are the tools' own user QPs. The tools:

  rping     RC; the client sends its buffer's address, the server RDMA
            READs it, prints it, and RDMA WRITEs it back, which the client
            validates (-V); every ping's text is checked here as well
  ucmatose  RC SENDs over several connections
  udaddy    UD SENDs, the addresses resolved by rdma_cm (SIDR REQ/REP)
  mckey     UD multicast: a receiver joined to an IPv4 group gets every
            message a sender sends to it
  rdma_server / rdma_client
            librdmacm's rdma_getaddrinfo/rdma_create_ep example: one RC
            SEND each way (16 bytes, inline where the QP allows)

Each pair must exit 0 within SRNIC_TEST_TOOL_TIMEOUT seconds. Also: every
srnic device has its GSI QP in RTS, and a connection to a port nobody
listens on is rejected rather than hanging.
"""
import itertools
import re

import pytest

import harness
from perftools import TOOL_TIMEOUT, Proc, run_pair
import topology

# The topologies rdma_cm is judged on: srnic to srnic (one device, and two
# devices in two netns) and both directions of srnic/rxe interop.
CM_TOPOLOGIES = ("one-device", "veth-two-netns", "srnic-to-rxe",
                 "rxe-to-srnic")

ports = itertools.count(19700)

# udaddy has no port option: it listens on rdma_cm's default port.
UDADDY_PORT = 7174


@pytest.fixture(scope="module",
                params=[t for t in CM_TOPOLOGIES
                        if not topology.SELECTED or t in topology.SELECTED])
def cm_topology(request):
    topo, veth = topology.build(request.param)
    yield topo
    topology.teardown(topo, veth)


def cm_listening(port):
    """True once an rdma_cm ID listens on port (any device, any netns:
    `rdma resource show cm_id` lists the IDs of every namespace)."""
    out = harness.run("rdma", "resource", "show", "cm_id").stdout
    return any("LISTEN" in line and re.search(rf":{port}\b", line)
               for line in out.splitlines())


def run_cm_pair(topo, server_argv, client_argv, port, tmp_path, tag):
    """Server on end a, then, once its rdma_cm ID listens on port, client
    on end b (its argv names a's address itself); both must exit 0.
    Returns (client log, server log), whole."""
    return run_pair(topo, server_argv, client_argv, port, tmp_path, tag,
                    ready=lambda server: cm_listening(port),
                    client_to_addr=False, whole_logs=True)


def rping_text(ping, size):
    """What rping puts in its buffer for ping number `ping` (rping.c): the
    header, then letters 'A'..'z' cycling from a start that advances by one
    per ping, NUL-terminated at size - 1."""
    head = f"rdma-ping-{ping}: "
    start = 65 + ping % 58
    body = []
    c = start
    for _ in range(len(head), size - 1):
        body.append(chr(c))
        c = 65 if c == 122 else c + 1
    return (head + "".join(body))[:size - 1]


def test_gsi_qp(cm_topology):
    """Every srnic end has ib_mad's QP1 (GSI), ready to send (RTS)."""
    for end in (cm_topology.a, cm_topology.b):
        if end.kind != "srnic":
            continue
        out = harness.run("rdma", "resource", "show", "qp", "link",
                          f"{end.name}/1").stdout
        assert re.search(r"lqpn 1 type GSI state RTS", out), out


@pytest.mark.parametrize("size", [64, 2000])
def test_rping(cm_topology, size, tmp_path):
    count = 10
    port = next(ports)
    a = cm_topology.a
    server = ["rping", "-s", "-a", a.addr, "-p", str(port), "-C",
              str(count), "-S", str(size), "-v"]
    client = ["rping", "-c", "-a", a.addr, "-p", str(port), "-C",
              str(count), "-S", str(size), "-V", "-v"]
    cout, sout = run_cm_pair(cm_topology, server, client, port, tmp_path,
                             f"rping-{size}")
    # The server printed each ping it RDMA READ from the client, in order;
    # the client validated each RDMA WRITE back (-V) and printed it too.
    got = [line[len("server ping data: "):]
           for line in sout.splitlines()
           if line.startswith("server ping data: ")]
    assert got == [rping_text(i, size) for i in range(count)], sout
    got = [line[len("ping data: "):] for line in cout.splitlines()
           if line.startswith("ping data: ")]
    assert got == [rping_text(i, size) for i in range(count)], cout


def test_rping_rejected(cm_topology, tmp_path):
    """A connect to a port nobody listens on fails (the peer's CM rejects
    the REQ) instead of hanging."""
    port = next(ports)
    client = Proc(cm_topology.b.cmd("rping", "-c", "-a", cm_topology.a.addr,
                                    "-p", str(port), "-C", "1"),
                  tmp_path / "rping-rejected.log")
    try:
        rc = client.wait(TOOL_TIMEOUT)
    finally:
        client.kill()
    assert rc not in (0, None), client.output()
    assert "REJECTED" in client.output(), client.output()


def test_ucmatose(cm_topology, tmp_path):
    port = next(ports)
    a = cm_topology.a
    args = ["-p", str(port), "-c", "4", "-C", "20", "-S", "1000"]
    cout, sout = run_cm_pair(cm_topology, ["ucmatose", "-b", a.addr] + args,
                             ["ucmatose", "-s", a.addr] + args, port,
                             tmp_path, "ucmatose")
    for out in (cout, sout):
        assert "data transfers complete" in out, out
        assert "return status 0" in out, out


def test_udaddy(cm_topology, tmp_path):
    port = UDADDY_PORT
    a = cm_topology.a
    args = ["-c", "4", "-C", "20", "-S", "1000"]
    cout, sout = run_cm_pair(cm_topology, ["udaddy", "-b", a.addr] + args,
                             ["udaddy", "-s", a.addr] + args, port,
                             tmp_path, "udaddy")
    for out in (cout, sout):
        assert "data transfers complete" in out, out
        assert "return status 0" in out, out


def test_rdma_server_client(cm_topology, tmp_path):
    port = next(ports)
    cout, sout = run_cm_pair(cm_topology, ["rdma_server", "-p", str(port)],
                             ["rdma_client", "-s", cm_topology.a.addr,
                              "-p", str(port)], port, tmp_path, "rdma-server")
    assert "rdma_client: end 0" in cout, cout
    assert "rdma_server: end 0" in sout, sout


def group_joined(end, group):
    """True once end's netdev is a member of IP multicast group (srnic
    joins it when a QP attaches to the group's GID)."""
    out = harness.run("ip", "maddr", "show", "dev", end.netdev,
                      netns=end.netns).stdout
    return re.search(rf"inet\s+{re.escape(group)}\b", out) is not None


def test_mckey(cm_topology, tmp_path):
    """UD multicast: the receiver (end a) joins an IPv4 group and its QP is
    attached; the sender (end b) joins and sends; every message must
    arrive. srnic joins the IP group for its attached QPs; rxe, at either
    end, does the same for its own."""
    a, b = cm_topology.a, cm_topology.b
    group = "230." + ".".join(a.addr.split(".")[1:])
    count = 10
    args = ["-m", group, "-C", str(count), "-S", "500"]
    receiver = Proc(a.cmd("stdbuf", "-oL", "mckey", "-b", a.addr, *args),
                    tmp_path / "mckey-receiver.log")
    sender = None
    try:
        harness.wait_for(lambda: group_joined(a, group) or
                         receiver.p.poll() is not None,
                         timeout=TOOL_TIMEOUT, what=f"{a.netdev} in {group}")
        assert receiver.p.poll() is None, receiver.output()
        sent_before = harness.link_counters(b).get("sent_pkts", 0)
        sender = Proc(b.cmd("stdbuf", "-oL", "mckey", "-s", "-b", b.addr,
                            *args), tmp_path / "mckey-sender.log")
        src = sender.wait(TOOL_TIMEOUT)
        rrc = receiver.wait(TOOL_TIMEOUT)
        if b.kind == "rxe" and src == 0 and rrc is None:
            # rxe on 6.12 and 7.2 reports multicast sends complete that it
            # never transmits (its sent_pkts grew by 1 of 10 in one run):
            # nothing reached srnic to receive.
            sent = harness.link_counters(b)["sent_pkts"] - sent_before
            if sent < count:
                pytest.skip(f"rxe completed mckey's {count} multicast "
                            f"sends but transmitted {sent} (its "
                            f"sent_pkts, kernel {harness.KERNEL})")
        counters = {end.name: {k: v for k, v in
                               harness.link_counters(end).items() if v}
                    for end in (a, b)}
        # What the netdevs saw: whether the datagrams left the sender.
        links = {end.netdev: harness.run(*end.cmd(
            "ip", "-s", "-s", "link", "show", end.netdev)).stdout
            for end in (a, b)}
        msg = (f"sender exit {src}, receiver exit {rrc}\n"
               f"counters: {counters}\nnetdevs: {links}\n"
               f"--- sender\n{sender.output()}\n"
               f"--- receiver\n{receiver.output()}")
        assert src == 0 and rrc == 0, msg
        assert "return status 0" in receiver.output(), msg
    finally:
        receiver.kill()
        if sender:
            sender.kill()
    # Detaching left the IP group.
    harness.wait_for(lambda: not group_joined(a, group), timeout=10,
                     what=f"{a.netdev} leaving {group}")

