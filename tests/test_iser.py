# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""iSER on srnic: the kernel's LIO target with the isert fabric (ib_isert,
configured through rtslib-fb) and open-iscsi's iser transport (ib_iser,
iscsid and iscsiadm; tests/iser.py), both on one srnic device in init_net
(the one-device topology; the ULPs' rdma_cm is in init_net).

The initiator registers each I/O's pages with IB_WR_REG_MR and the target
moves the data with RDMA READ and WRITE, invalidating with SEND with
invalidate (kernel/srnic_mr.c). fio writes with crc32c headers and reads
them back, and the LUN's backing file is compared byte for byte with what
was written.
"""
import re

import pytest

import harness
import iser as iser_ends
import nvme_rdma
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def iser(tmp_path_factory):
    """(disk, backing file, portal): a fileio LUN exported by LIO's isert
    on srnic0's address, logged into by open-iscsi over iser
    (tests/iser.py)."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("lio") / "lun0.img",
        iser_ends.LUN_MIB << 20)
    initiator = iser_ends.Initiator(topo.a.addr)
    try:
        iser_ends.Target(topo.a.addr, backing).start()
        yield initiator.login(), backing, initiator.portal
    finally:
        initiator.logout()
        iser_ends.Target.stop()
        topology.teardown(topo, veth)


def test_the_session_runs_over_iser(iser):
    _, _, portal = iser
    out = harness.run("iscsiadm", "-m", "session", "-P", "1").stdout
    assert re.search(r"Iface Transport:\s*iser", out), out
    assert portal in out, out


# make check's other platforms: the mixed line, reads and writes verified.
@pytest.mark.platform_subset(rw=["randrw"])
@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("512k", "randrw")])
def test_fio_crc32c_verify(iser, bs, rw):
    nvme_rdma.verify_fio(iser[0], bs, rw)


def test_what_the_initiator_writes_is_what_the_lun_file_holds(iser):
    nvme_rdma.direct_write_lands_in(iser[0], iser[1], 16 << 20)
