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

import pytest

import harness
import nfs_rdma
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=["one-device", "srnic-to-rxe"])
def nfs(request, tmp_path_factory):
    """(topology, export dir, mount point): nfsd exporting a tmpfs
    directory over RDMA on the topology's b end (srnic0, or rxe0 beside
    srnic; tests/nfs_rdma.py), the client not mounted."""
    topo, veth = topology.build(request.param, "srnic")
    export = tmp_path_factory.mktemp("export")
    mnt = tmp_path_factory.mktemp("mnt")
    try:
        nfs_rdma.Server(export).start()
        yield topo, export, mnt
    finally:
        harness.run("umount", "-f", str(mnt), check=False, timeout=60)
        nfs_rdma.Server.stop()
        topology.teardown(topo, veth)


def test_a_file_tree_written_over_rdma_is_on_the_server(nfs):
    topo, export, mnt = nfs
    addr, netns = topo.b.addr, topo.a.netns
    nfs_rdma.mount(addr, mnt, netns)
    try:
        # the client's QP on srnic (a), the server's on b's device
        assert harness.kernel_qps(topo.a.name, "RC"), \
            "no RC QP of xprtrdma on srnic"
        if not topo.same_device:
            assert harness.kernel_qps(topo.b.name, "RC"), \
                "no RC QP of svcrdma on rxe"
        written = nfs_rdma.write_tree(mnt)
    finally:
        harness.run("umount", str(mnt), timeout=60)
    assert nfs_rdma.tree_digests(export) == written

    # A fresh mount reads the tree back from the server, not from a cache.
    nfs_rdma.mount(addr, mnt, netns)
    try:
        assert nfs_rdma.tree_digests(mnt) == written
    finally:
        harness.run("umount", str(mnt), timeout=60)
