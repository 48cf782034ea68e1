# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --peer --timeout 600
"""An MPI job across two kernels over srnic (issue 23, item 5): this VM and
the peer VM (tests/peer.py), each with one srnic device on the wire
between them, run Debian's Open MPI, twice: with its UCX PML over UCX's
verbs transports (rc_verbs for the messages, ud_verbs for UCX's
connection setup), and with its cm PML over libfabric's reliable-datagram
endpoint on srnic's RC QPs (the ofi MTL, "verbs;ofi_rxm"; the road of
MPICH's ch4:ofi too, and the only one where UCX is packaged without its
verbs transports): a ping-pong of 1 byte to 1 MiB with every byte checked, and
allreduces with their sums checked (tests/mpi/pingpong_allreduce.c).
mpirun runs here; Open MPI starts its daemon on the peer through
tests/mpi/rsh_agent. Both devices' packet counters must grow by what the
job moved: the data went over RDMA, not over Open MPI's TCP.

Settings a user needs too (README.md, "Using it on a real host"):
- --bind-to none: Open MPI binds each rank to one core, where a rank that
  spins on its CQ competes with the kernel's work for it (two ranks in
  one VM, both on core 0: 8 ms per round trip).
- UCX_UD_VERBS_ETH_DGID_CHECK=n: UCX 1.13's ud_verbs checks a RoCE
  datagram's GRH destination against its own GID and drops srnic's and
  rxe's alike (its endpoint times out after 30 s without it).
"""
import re
import shutil
from pathlib import Path

import pytest

import harness
import peer as peer_vm
from perftools import ucx_has_verbs_transports, ucx_version

pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "mpi" / "pingpong_allreduce.c"
AGENT = HERE / "mpi" / "rsh_agent"
PROGRAM = "/tmp/srnic-mpi-pingpong-allreduce"
# The host names of this VM and of the peer during the job (both VMs boot
# the same root, with one name): tests/mpi/rsh_agent names the peer.
LOCAL_NAME, PEER_NAME = "srnic-mpi-local", "srnic-mpi-peer"


@pytest.fixture(scope="module")
def devices(peer):
    """srnic0 here and srnic0 on the peer, on the wire; the program built
    on both (each VM's /tmp is its own)."""
    assert shutil.which("mpicc") and shutil.which("mpirun"), \
        "Open MPI is missing: scripts/setup-deps.sh installs it"
    local = peer_vm.make_device("srnic", peer_vm.LOCAL_ADDR)
    remote = peer.python(
        "import peer; print(peer.make_device("
        f"'srnic', {peer_vm.PEER_ADDR!r}))", timeout=180).stdout.strip()
    # The nodes by name, as on a cluster: PRRTE (Open MPI 5 and later)
    # matches the names of --host against the names its daemons report,
    # and an address there stays a node apart, with no daemon and no slot.
    hosts = "".join(f"{addr.split('/')[0]} {name}\n" for addr, name in (
        (peer_vm.LOCAL_ADDR, LOCAL_NAME), (peer_vm.PEER_ADDR, PEER_NAME)))
    for run in (harness.run, peer.run):
        run("sh", "-c", f"printf '{hosts}' >>/etc/hosts", timeout=60)
    build = ("mpicc", "-O2", "-o", PROGRAM, str(SOURCE))
    harness.run(*build, timeout=120)
    peer.run(*build, timeout=120)
    yield local, remote
    for name in harness.rdma_links():
        harness.run("rdma", "link", "delete", name, check=False, timeout=120)


def open_mpi_major():
    """Open MPI's major version, from mpirun --version."""
    out = harness.run("mpirun", "--version", timeout=60).stdout
    m = re.search(r"\(Open MPI\) (\d+)\.", out)
    assert m, out
    return int(m.group(1))


def launcher_args(subnet):
    """How mpirun starts its daemon on the peer (through AGENT, one hop)
    and which network its daemons talk over. Open MPI 4 (bookworm) has its
    own runtime, whose rsh launcher takes plm_rsh_*; Open MPI 5 and 6
    (trixie, sid) run on PRRTE, whose launcher is "ssh" and whose
    parameters go through --prtemca; there openib is gone too."""
    major = open_mpi_major()
    if major < 5:
        return ["--mca", "plm_rsh_agent", str(AGENT),
                "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "oob_tcp_if_include", subnet,
                "--mca", "btl", "^openib"]
    # PRRTE 4 (Open MPI 6) renamed oob_tcp_if_include, with a warning.
    if_include = "oob_tcp_if_include" if major < 6 else "prte_if_include"
    return ["--prtemca", "plm_ssh_agent", str(AGENT),
            "--prtemca", "plm_ssh_no_tree_spawn", "1",
            "--prtemca", if_include, subnet]


def packets(peer, local, remote):
    """(this VM's, the peer's) srnic tx_packets + rx_packets."""
    def total(c):
        return c["tx_packets"] + c["rx_packets"]
    here = total(harness.link_counters(local))
    there = total(harness.link_counters(
        peer_vm.RemoteEnd(remote, "srnic", "", "")))
    return here, there


# How Open MPI's point-to-point messages reach srnic: its UCX PML over
# UCX's verbs transports, or its cm PML over libfabric's reliable-datagram
# endpoint on verbs (the ofi MTL; what MPICH's ch4:ofi uses too).
TRANSPORTS = {
    "ucx": ["--mca", "pml", "ucx", "--mca", "osc", "^ucx",
            "-x", "UCX_TLS=rc_verbs,ud_verbs,self",
            "-x", "UCX_NET_DEVICES=srnic0:1",
            "-x", "UCX_UD_VERBS_ETH_DGID_CHECK=n"],
    "ofi": ["--mca", "pml", "cm", "--mca", "mtl", "ofi",
            "--mca", "mtl_ofi_provider_include", "verbs;ofi_rxm",
            "--mca", "osc", "^ucx", "-x", "FI_PROVIDER=verbs;ofi_rxm"],
}


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_mpi_pingpong_and_allreduce_between_two_kernels(peer, devices,
                                                        transport):
    if transport == "ucx" and not ucx_has_verbs_transports():
        pytest.skip(f"this platform's UCX ({ucx_version()}) is packaged "
                    "without its InfiniBand transports (no libuct_ib.so): "
                    "no rc_verbs or ud_verbs to run Open MPI over")
    local, remote = devices
    subnet = "198.18.99.0/24"
    before = packets(peer, local, remote)
    mpirun = [
        "mpirun", "--host", f"{LOCAL_NAME},{PEER_NAME}", "-np", "2",
        *launcher_args(subnet),
        "--bind-to", "none",
        *TRANSPORTS[transport],
        PROGRAM]
    p = harness.run(
        "env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "unshare", "--uts", "sh", "-c",
        f'hostname {LOCAL_NAME} && exec "$@"', "sh", *mpirun,
        check=False, timeout=300)
    out = p.stdout + p.stderr
    print(out)
    assert p.returncode == 0, out
    assert "mpi job: every check passed" in out, out
    assert "pingpong 1048576 bytes x 10" in out, out
    assert "allreduce 262144 doubles over 2 ranks: sums right" in out, out
    after = packets(peer, local, remote)
    # 10 round trips of 1 MiB each way alone are 20 MiB: at least 5120
    # packets of 4 KiB through each device (both directions counted).
    moved = [a - b for a, b in zip(after, before)]
    print(f"srnic packets moved: here {moved[0]}, peer {moved[1]}")
    assert min(moved) >= 5120, moved
