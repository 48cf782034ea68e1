# SPDX-License-Identifier: GPL-2.0
"""Two kernels on one wire: a suite that asks for "# srnic-vm-run: --peer"
runs in a VM joined by a virtual Ethernet wire (two QEMU stream netdevs on a Unix socket) to
a second VM with its own kernel, where tests/peer_agent.py runs the
commands this module's Peer sends (scripts/vm-run --peer).

The wire is the NIC whose MAC vm-run gives in SRNIC_VM_WIRE_MAC; this VM is
LOCAL_ADDR on it and the peer PEER_ADDR. It is a real wire between two
hosts, the way srnic meets rxe or a hardware RNIC: every packet crosses
it, each kernel's ULPs run in its own initial namespace, and either end
may be srnic or rxe.
"""
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import harness
import topology

LOCAL_ADDR = "198.18.99.1/24"
PEER_ADDR = "198.18.99.2/24"
AGENT_PORT = 7099


def wire_netdev():
    """The wire's netdev (its MAC is SRNIC_VM_WIRE_MAC), virtio_net loaded
    first."""
    mac = os.environ.get("SRNIC_VM_WIRE_MAC")
    assert mac, "no wire: run with scripts/vm-run --peer (# srnic-vm-run)"
    harness.run("modprobe", "virtio_net")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for dev in Path("/sys/class/net").iterdir():
            try:
                if (dev / "address").read_text().strip() == mac:
                    return dev.name
            except OSError:
                continue
        time.sleep(0.1)
    raise AssertionError(f"no netdev with the wire's MAC {mac}")


def wire_up(addr):
    """The wire's netdev up with addr (a.b.c.d/len); its name."""
    dev = wire_netdev()
    harness.run("ip", "addr", "replace", addr, "dev", dev)
    harness.run("ip", "link", "set", dev, "up")
    return dev


class Peer:
    """The agent on the other VM: run() a command there. This VM's end of
    the wire comes up first, at LOCAL_ADDR."""

    def __init__(self, timeout=180, wire=True):
        """Connect to the agent within timeout seconds; wire=False: this
        VM's end is already up (a process of a test that holds a Peer)."""
        if wire:
            wire_up(LOCAL_ADDR)
        self.addr = PEER_ADDR.split("/")[0]
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection((self.addr, AGENT_PORT),
                                                     timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"no peer agent at {self.addr}:{AGENT_PORT} after "
                        f"{timeout} s (its console: the .peer.log)")
                time.sleep(0.5)
        self.sock.settimeout(None)
        self.file = self.sock.makefile("rwb")

    def _ask(self, req):
        self.file.write(json.dumps(req).encode() + b"\n")
        self.file.flush()
        line = self.file.readline()
        assert line, "the peer agent went away"
        return json.loads(line)

    def run(self, *argv, check=True, timeout=60, input=""):
        """argv on the peer; a CompletedProcess. With check, a non-zero exit
        raises AssertionError with the output."""
        reply = self._ask({"argv": list(argv), "timeout": timeout,
                           "input": input})
        p = subprocess.CompletedProcess(list(argv), reply["rc"],
                                        reply["stdout"], reply["stderr"])
        if check and p.returncode != 0:
            raise AssertionError(
                f"peer: {' '.join(argv)} exited {p.returncode}\n"
                f"stdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def python(self, code, check=True, timeout=60):
        """Python code on the peer, with tests/ importable."""
        return self.run("/usr/bin/python3", "-c", code, check=check,
                        timeout=timeout)

    def listening(self, port):
        """True once a process on the peer listens on TCP port."""
        return bool(self.run("ss", "-Hltn", f"sport = :{port}").stdout
                    .strip())

    def gid_index(self, name, addr):
        """The index of addr's RoCE v2 GID on the peer's device name."""
        return int(self.python(
            "import harness; print(next(i for i, g, t in "
            f"harness.port_gids({name!r}) if g == "
            f"harness.ipv4_gid({addr!r}) and t == 'RoCE v2'))").stdout)

    def close(self):
        """Tell the agent to end (the peer VM then powers off)."""
        try:
            self._ask({"exit": True})
        except (OSError, AssertionError):
            pass
        self.sock.close()


def make_device(kind, addr):
    """The only RDMA device of this kernel: kind (srnic or rxe) on the
    wire's netdev, named kind + "0", its RoCE v2 GID of addr ready. Runs on
    either VM (the peer's: Peer.python("import peer; peer.make_device(...)")).
    The other kind's module goes first: both bind UDP 4791 here."""
    dev = wire_up(addr)
    for name in harness.rdma_links():
        harness.run("rdma", "link", "delete", name, timeout=120)
    other = {"srnic": "rdma_rxe", "rxe": "srnic"}[kind]
    if harness.module_loaded(other):
        harness.run("modprobe", "-r", other, timeout=120)
    harness.run("modprobe", {"srnic": "srnic", "rxe": "rdma_rxe"}[kind])
    name = f"{kind}0"
    harness.run("rdma", "link", "add", name, "type", kind, "netdev", dev)
    gid = harness.ipv4_gid(addr.split("/")[0])
    harness.wait_for(lambda: any(g == gid and t == "RoCE v2" for _, g, t in
                                 harness.port_gids(name)),
                     timeout=20, what=f"the RoCE v2 GID of {addr} on {name}")
    return name


@dataclasses.dataclass
class RemoteEnd(topology.End):
    """A topology.End on the peer VM: its cmd() runs argv there through
    `python3 tests/peer.py run` (this module's main), a local process that
    relays the command's output and exit status, so that the suites'
    tool runners (tests/perftools.py's run_pair) drive either end alike.
    Killing that process leaves the command to the agent's timeout."""
    timeout: int = 120

    def cmd(self, *argv):
        return [sys.executable, str(Path(__file__).resolve()), "run",
                str(self.timeout), "--", *argv]


def two_kernel_topology(peer, local_name, remote_name, server="peer"):
    """A topology.Topology of the two VMs' devices, the server end (a) on
    the peer or (server="local") here, the client end (b) on the other."""
    local = topology.End(local_name, local_name.rstrip("0123456789"),
                         wire_netdev(), LOCAL_ADDR.split("/")[0])
    local.resolve_gid()
    remote = RemoteEnd(remote_name, remote_name.rstrip("0123456789"), "",
                       PEER_ADDR.split("/")[0])
    remote.gid = harness.ipv4_gid(remote.addr)
    remote.gid_index = peer.gid_index(remote_name, remote.addr)
    a, b = (remote, local) if server == "peer" else (local, remote)
    return topology.Topology(f"two-kernels-{server}-server", a, b,
                             [local_name])


def main(argv):
    """peer.py run TIMEOUT -- ARGV...: ARGV on the peer, its output on
    stdout, its exit status (the agent's: -9 when it ran out of time)
    as this process's."""
    if len(argv) < 4 or argv[0] != "run" or argv[2] != "--":
        print(main.__doc__, file=sys.stderr)
        return 2
    peer = Peer(timeout=30, wire=False)
    try:
        reply = peer.run(*argv[3:], check=False, timeout=int(argv[1]))
    except AssertionError as e:
        print(f"peer.py: {e}", file=sys.stderr)
        return 125
    finally:
        peer.sock.close()
    sys.stdout.write(reply.stdout + reply.stderr)
    rc = reply.returncode
    return rc if 0 <= rc < 256 else 124


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
