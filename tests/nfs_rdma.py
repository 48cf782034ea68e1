# SPDX-License-Identifier: GPL-2.0
"""NFS over RDMA's two ends, for tests/test_nfs_rdma.py (one kernel) and
tests/test_ulp_two_kernels.py (the server on the peer VM): the kernel's NFS
server (nfsd with svcrdma; nfs-kernel-server's rpc.nfsd, rpc.mountd and
exportfs, with rpcbind) listening on RDMA port 20049, exporting one
directory as NFSv4's root, and the kernel's NFS client (xprtrdma) mounting
it with -o proto=rdma.

Server.start() leaves its daemons running detached and Server.stop()
needs nothing of the Server that started it, so the peer agent can run
them as two commands.
"""
import hashlib
import os
import subprocess
from pathlib import Path

import harness

PORT = 20049
DAEMONS = ("rpc.mountd", "rpcbind")


class Server:
    """nfsd exporting directory export (NFSv4's root, fsid=0) over RDMA on
    PORT, NFSv4 only."""

    def __init__(self, export):
        self.export = export

    def start(self):
        for mod in ("nfsd", "rpcrdma"):
            harness.run("modprobe", mod)
        if not Path("/proc/fs/nfsd/portlist").exists():
            harness.run("mount", "-t", "nfsd", "nfsd", "/proc/fs/nfsd")
        for d in ("/var/lib/nfs/rpc_pipefs", "/var/lib/nfs/v4recovery"):
            os.makedirs(d, exist_ok=True)
        os.makedirs(self.export, exist_ok=True)
        # In the foreground of their own sessions: stop() signals them.
        subprocess.Popen(["rpcbind", "-f", "-w"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        harness.wait_for(lambda: harness.run("rpcinfo", "-p", check=False)
                         .returncode == 0, timeout=30, what="rpcbind")
        subprocess.Popen(["rpc.mountd", "-F", "-N", "2", "-N", "3"],
                         start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        # The export is NFSv4's root (fsid=0): the VM's own root, an
        # overlay over 9p, cannot be exported to reach it through.
        harness.run("exportfs", "-o",
                    "rw,no_root_squash,insecure,sync,fsid=0",
                    f"*:{self.export}")
        # NFSv4's grace period after a server start refuses OPENs (90 s
        # by default, seen on 6.12 and 7.2): the shortest one, set before.
        for knob in ("nfsv4gracetime", "nfsv4leasetime"):
            Path(f"/proc/fs/nfsd/{knob}").write_text("10\n")
        harness.run("rpc.nfsd", "-N", "3", "4", timeout=60)
        Path("/proc/fs/nfsd/portlist").write_text(f"rdma {PORT}\n")
        ports = Path("/proc/fs/nfsd/portlist").read_text()
        assert f"rdma {PORT}" in ports, ports

    @staticmethod
    def stop():
        """nfsd stopped, the exports and daemons gone, the modules
        unloaded."""
        harness.run("rpc.nfsd", "0", check=False, timeout=60)
        harness.run("exportfs", "-ua", check=False)
        for daemon in DAEMONS:
            harness.run("pkill", "-x", daemon, check=False)
        for daemon in DAEMONS:
            harness.wait_for(lambda: harness.run(
                "pgrep", "-x", daemon, check=False).returncode != 0,
                timeout=30, what=f"{daemon} gone")
        harness.run("umount", "/proc/fs/nfsd", check=False)
        for mod in ("rpcrdma", "nfsd", "nfsv4", "nfs"):
            harness.run("modprobe", "-r", mod, check=False, timeout=60)


def mount(addr, mnt, netns=None):
    """Mount the server's NFSv4 root (the export) over RDMA at mnt, from
    network namespace netns if given (the NFS client, unlike the other
    kernel ULPs, connects in the namespace of the process that mounts;
    nsenter keeps the mount in the VM's own mount namespace)."""
    enter = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
    harness.run("modprobe", "rpcrdma")
    p = harness.run(*enter, "mount", "-t", "nfs", "-o",
                    f"vers=4.2,proto=rdma,port={PORT}",
                    f"{addr}:/", str(mnt), check=False, timeout=120)
    assert p.returncode == 0, (
        f"mount -o proto=rdma {addr}:/ failed ({p.returncode})\n"
        f"{p.stdout}{p.stderr}\n"
        + harness.run("dmesg", check=False).stdout[-3000:])
    proc = Path("/proc/mounts").read_text()
    line = next(line for line in proc.splitlines() if f" {mnt} " in line)
    assert "proto=rdma" in line and f"port={PORT}" in line, line


def tree_digests(root):
    """{relative path: sha256} of every file under root."""
    out = {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return out


SIZES = [0, 1, 4095, 4096, 65536, 1 << 20, (3 << 20) + 17]


def write_tree(mnt, sizes=SIZES):
    """A tree of files of sizes (random bytes) under mnt, synced; its
    tree_digests()."""
    for i, size in enumerate(sizes):
        d = Path(mnt) / f"dir{i % 3}" / f"sub{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i}").write_bytes(os.urandom(size))
    os.sync()
    written = tree_digests(mnt)
    assert len(written) == len(sizes), written
    return written
