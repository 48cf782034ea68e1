# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""SRP on srnic: the kernel's LIO target with the SRP fabric (ib_srpt,
listening on RDMA/CM) and the SRP initiator (ib_srp, logged in through its
add_target sysfs file with an RDMA/CM destination), both on one srnic
device in init_net (the one-device topology).

The initiator registers each I/O's pages with IB_WR_REG_MR and the target
moves the data with RDMA READ and WRITE, invalidating with SEND with
invalidate (kernel/srnic_mr.c). fio writes with crc32c headers and reads
them back, and the LUN's backing file is compared byte for byte with what
was written. How the target is set up through LIO's configfs:
tests/srp.py.
"""
from pathlib import Path

import pytest

import harness
import nvme_rdma
import srp as srp_ends
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def srp(tmp_path_factory):
    """(disk, backing file): a fileio LUN exported by ib_srpt on srnic0,
    logged into by ib_srp over RDMA/CM (tests/srp.py)."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("lio") / "lun0.img", srp_ends.LUN_MIB << 20)
    dev = topo.a.name
    try:
        srp_ends.Target(dev, topo.a.addr, backing).start()
        yield (srp_ends.login(dev, topo.a.addr, srp_ends.service_guid()),
               backing)
    finally:
        srp_ends.logout()
        srp_ends.Target.stop()
        topology.teardown(topo, veth)


def test_the_lun_is_reached_through_ib_srp(srp):
    disk = srp[0]
    size = int(Path(f"/sys/block/{disk.name}/size").read_text()) * 512
    assert size == srp_ends.LUN_MIB << 20
    ports = list(Path("/sys/class/srp_remote_ports").glob("port-*"))
    assert ports, "no SRP remote port"


# make check's other platforms: the mixed line, reads and writes verified.
@pytest.mark.platform_subset(rw=["randrw"])
@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("512k", "randrw")])
def test_fio_crc32c_verify(srp, bs, rw):
    nvme_rdma.verify_fio(srp[0], bs, rw)


def test_what_the_initiator_writes_is_what_the_lun_file_holds(srp):
    nvme_rdma.direct_write_lands_in(srp[0], srp[1], 16 << 20)


@pytest.fixture(scope="module")
def srp_two_devices(tmp_path_factory, srp):
    """(disk, backing file, topology): a second LUN, exported by ib_srpt on
    srnic2 to ib_srp on srnic3, both in init_net (the veth-one-netns
    topology), beside the one-device session on srnic0; ib_srp's src=
    binds the initiator's connection to srnic3's address. The module's
    last test: its teardown ends every session, srnic0's too, in the order
    tests/srp.py's logout() says."""
    topo, veth = topology.build("veth-one-netns", "srnic",
                                names=("srnic2", "srnic3"))
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("lio2") / "lun1.img", 16 << 20)
    try:
        srp_ends.Target(topo.a.name, topo.a.addr, backing, size_mib=16,
                        name="lun1").start()
        disk = srp_ends.login(topo.b.name, topo.a.addr,
                              srp_ends.service_guid(), src_addr=topo.b.addr)
        assert disk != srp[0]
        yield disk, backing, topo
    finally:
        srp_ends.logout()
        srp_ends.Target.stop()
        topology.teardown(topo, veth)


def test_two_devices_initiator_on_one_target_on_the_other(srp_two_devices):
    disk, backing, topo = srp_two_devices
    # ib_srp's RC QPs on srnic3, ib_srpt's on srnic2 (rdma_cm owns both).
    initiator = harness.kernel_qps(topo.b.name, "RC")
    target = harness.kernel_qps(topo.a.name, "RC")
    assert initiator and len(initiator) == len(target), (initiator, target)
    nvme_rdma.verify_fio(disk, "128k", "randrw", size="8M")
    nvme_rdma.direct_write_lands_in(disk, backing, 2 << 20, 4 << 20)
