# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""NFS over RDMA on srnic: the kernel's NFS server (nfsd with svcrdma,
nfs-kernel-server's rpc.nfsd, rpc.mountd and exportfs) listening on RDMA
port 20049, and the kernel's NFS client mounting with `-o proto=rdma`
(xprtrdma): both on one srnic device in init_net (the one-device
topology), and the server on that kernel's rxe in init_net with the client
on srnic in another network namespace (the srnic-to-rxe topology: the NFS
client, unlike the other kernel ULPs, connects in the namespace of the
process that mounts, here entered with nsenter so that the mount stays in
the VM's own mount namespace).

Both sides are kernel verbs consumers: xprtrdma registers the client's
pages with IB_WR_REG_MR (FRWR) and invalidates them (LOCAL_INV, or the
server's SEND with invalidate); svcrdma moves bulk data with RDMA READ and
WRITE (kernel/srnic_mr.c). A tree of files is written through the mount,
compared byte for byte with what the server's export holds, and read back
through a fresh mount.
"""
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

import harness
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)

NFS_RDMA_PORT = 20049


def tree_digests(root):
    """{relative path: sha256} of every file under root."""
    out = {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return out


def nfs_mount(addr, mnt, netns=None):
    """Mount the server's NFSv4 root (the export) over RDMA at mnt, from
    network namespace netns if given."""
    enter = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
    p = harness.run(*enter, "mount", "-t", "nfs", "-o",
                    f"vers=4.2,proto=rdma,port={NFS_RDMA_PORT}",
                    f"{addr}:/", str(mnt), check=False, timeout=120)
    assert p.returncode == 0, (
        f"mount -o proto=rdma {addr}:/ failed ({p.returncode})\n"
        f"{p.stdout}{p.stderr}\n"
        + harness.run("dmesg", check=False).stdout[-3000:])


@pytest.fixture(scope="module", params=["one-device", "srnic-to-rxe"])
def nfs(request, tmp_path_factory):
    """(topology, export dir, mount point): nfsd exporting a tmpfs
    directory over RDMA on the topology's b end (srnic0, or rxe0 beside
    srnic), the client not mounted."""
    topo, veth = topology.build(request.param, "srnic")
    export = tmp_path_factory.mktemp("export")
    mnt = tmp_path_factory.mktemp("mnt")
    daemons = []
    try:
        for mod in ("nfsd", "rpcrdma"):
            harness.run("modprobe", mod)
        if not Path("/proc/fs/nfsd/portlist").exists():
            harness.run("mount", "-t", "nfsd", "nfsd", "/proc/fs/nfsd")
        for d in ("/var/lib/nfs/rpc_pipefs", "/var/lib/nfs/v4recovery"):
            os.makedirs(d, exist_ok=True)
        # In the foreground, so that they can be stopped.
        daemons.append(subprocess.Popen(["rpcbind", "-f", "-w"]))
        harness.wait_for(lambda: harness.run("rpcinfo", "-p", check=False)
                         .returncode == 0, timeout=30, what="rpcbind")
        daemons.append(subprocess.Popen(["rpc.mountd", "-F", "-N", "2",
                                         "-N", "3"]))
        # The export is NFSv4's root (fsid=0): the VM's own root, an
        # overlay over 9p, cannot be exported to reach it through.
        harness.run("exportfs", "-o",
                    "rw,no_root_squash,insecure,sync,fsid=0",
                    f"*:{export}")
        # NFSv4's grace period after a server start refuses OPENs (90 s
        # by default, seen on 6.12 and 7.2): the shortest one, set before.
        for knob in ("nfsv4gracetime", "nfsv4leasetime"):
            Path(f"/proc/fs/nfsd/{knob}").write_text("10\n")
        harness.run("rpc.nfsd", "-N", "3", "4", timeout=60)
        Path("/proc/fs/nfsd/portlist").write_text(
            f"rdma {NFS_RDMA_PORT}\n")
        ports = Path("/proc/fs/nfsd/portlist").read_text()
        assert f"rdma {NFS_RDMA_PORT}" in ports, ports
        yield topo, export, mnt
    finally:
        harness.run("umount", "-f", str(mnt), check=False, timeout=60)
        harness.run("rpc.nfsd", "0", check=False, timeout=60)
        harness.run("exportfs", "-ua", check=False)
        for d in daemons:
            d.terminate()
            d.wait(timeout=30)
        harness.run("umount", "/proc/fs/nfsd", check=False)
        for mod in ("rpcrdma", "nfsd", "nfsv4", "nfs"):
            harness.run("modprobe", "-r", mod, check=False, timeout=60)
        topology.teardown(topo, veth)


def test_a_file_tree_written_over_rdma_is_on_the_server(nfs):
    topo, export, mnt = nfs
    addr, netns = topo.b.addr, topo.a.netns
    nfs_mount(addr, mnt, netns)
    try:
        # the client's QP on srnic (a), the server's on b's device
        assert harness.kernel_qps(topo.a.name, "RC"), \
            "no RC QP of xprtrdma on srnic"
        if not topo.same_device:
            assert harness.kernel_qps(topo.b.name, "RC"), \
                "no RC QP of svcrdma on rxe"
        proc = Path("/proc/mounts").read_text()
        line = next(line for line in proc.splitlines()
                    if f" {mnt} " in line)
        assert "proto=rdma" in line and f"port={NFS_RDMA_PORT}" in line, line
        sizes = [0, 1, 4095, 4096, 65536, 1 << 20, (3 << 20) + 17]
        for i, size in enumerate(sizes):
            d = Path(mnt) / f"dir{i % 3}" / f"sub{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"file{i}").write_bytes(os.urandom(size))
        written = tree_digests(mnt)
        os.sync()
    finally:
        harness.run("umount", str(mnt), timeout=60)
    assert len(written) == len(sizes)
    assert tree_digests(export) == written

    # A fresh mount reads the tree back from the server, not from a cache.
    nfs_mount(addr, mnt, netns)
    try:
        assert tree_digests(mnt) == written
    finally:
        harness.run("umount", str(mnt), timeout=60)
