# SPDX-License-Identifier: GPL-2.0
"""NVMe over RDMA on srnic: the kernel's nvmet-rdma target and nvme-rdma
host, driven by their own tools (configfs, nvme-cli's `nvme connect -t
rdma`) and checked with fio's crc32c verification and a byte-for-byte
comparison with the target's backing file.

Both ULPs are kernel verbs consumers: the host registers each I/O's pages
with IB_WR_REG_MR on its kernel QPs and the target invalidates them with
a SEND with invalidate (or the host with LOCAL_INV), which is srnic's fast
registration (kernel/srnic_mr.c, srnic_mr_fast_reg()). Both listen and
connect through the kernel's rdma_cm in init_net, so the srnic device is
there: the one-device topology, target and host on one srnic device.

The target's namespace is a file on the VM's tmpfs (nvmet's file backend,
buffered: tmpfs has no O_DIRECT on every kernel here).
"""
import hashlib
import mmap
import os
import re
import time
from pathlib import Path

import pytest

import harness
import topology

NQN = "nqn.2026-12.org.srnic:test-nvme-rdma"
PORT_ID = "1"
TRSVCID = "4420"
NS_MIB = 64
NVMET = Path("/sys/kernel/config/nvmet")
FIO_TIMEOUT = 300


def ensure_configfs():
    if not NVMET.parent.is_dir() or not os.listdir(NVMET.parent):
        harness.run("mount", "-t", "configfs", "none", "/sys/kernel/config",
                    check=False)


def write_attr(path, value):
    Path(path).write_text(f"{value}\n")


class Target:
    """An nvmet subsystem with one file-backed namespace, on an RDMA port."""

    def __init__(self, addr, backing):
        self.addr = addr
        self.backing = backing
        self.subsys = NVMET / "subsystems" / NQN
        self.ns = self.subsys / "namespaces" / "1"
        self.port = NVMET / "ports" / PORT_ID
        self.link = self.port / "subsystems" / NQN

    def start(self):
        for mod in ("nvmet", "nvmet-rdma"):
            harness.run("modprobe", mod)
        ensure_configfs()
        self.subsys.mkdir()
        write_attr(self.subsys / "attr_allow_any_host", 1)
        self.ns.mkdir()
        write_attr(self.ns / "device_path", self.backing)
        write_attr(self.ns / "buffered_io", 1)
        write_attr(self.ns / "enable", 1)
        self.port.mkdir()
        write_attr(self.port / "addr_trtype", "rdma")
        write_attr(self.port / "addr_adrfam", "ipv4")
        write_attr(self.port / "addr_traddr", self.addr)
        write_attr(self.port / "addr_trsvcid", TRSVCID)
        self.link.symlink_to(self.subsys)

    def stop(self):
        for step in (lambda: self.link.unlink(),
                     lambda: self.port.rmdir(),
                     lambda: write_attr(self.ns / "enable", 0),
                     lambda: self.ns.rmdir(),
                     lambda: self.subsys.rmdir()):
            try:
                step()
            except OSError:
                pass
        for mod in ("nvmet-rdma", "nvmet"):
            harness.run("modprobe", "-r", mod, check=False, timeout=120)


def nvme_block_device():
    """/dev/nvmeXnY of NQN's namespace, or None. Its device link leads to
    the controller, or with native multipath to the subsystem: both have
    subsysnqn."""
    for blk in sorted(Path("/sys/block").glob("nvme*n*")):
        # nvmeXcYnZ: one path of a multipath namespace, not for I/O
        if not re.fullmatch(r"nvme\d+n\d+", blk.name):
            continue
        try:
            if (blk / "device" / "subsysnqn").read_text().strip() == NQN:
                return Path("/dev") / blk.name
        except OSError:
            continue
    return None


@pytest.fixture(scope="module")
def nvme(tmp_path_factory):
    """(block device, backing file): srnic0 on one-device, an nvmet-rdma
    target on its address, and nvme-rdma connected to it."""
    topo, veth = topology.build("one-device", "srnic")
    backing = tmp_path_factory.mktemp("nvmet") / "ns1.img"
    with open(backing, "wb") as f:
        f.truncate(NS_MIB << 20)
    target = Target(topo.a.addr, backing)
    connected = False
    try:
        target.start()
        harness.run("modprobe", "nvme-rdma")
        p = harness.run("nvme", "connect", "-t", "rdma", "-a", topo.a.addr,
                        "-s", TRSVCID, "-n", NQN, check=False, timeout=120)
        assert p.returncode == 0, (
            f"nvme connect -t rdma to {topo.a.addr} failed ({p.returncode})"
            f"\nstdout: {p.stdout}\nstderr: {p.stderr}\n"
            + harness.run("dmesg", check=False).stdout[-3000:])
        connected = True
        dev = harness.wait_for(nvme_block_device, timeout=60,
                               what=f"the block device of {NQN}")
        yield dev, backing, topo
    finally:
        if connected:
            harness.run("nvme", "disconnect", "-n", NQN, check=False,
                        timeout=120)
        target.stop()
        harness.run("modprobe", "-r", "nvme-rdma", check=False, timeout=120)
        topology.teardown(topo, veth)


def fio(dev, *args):
    p = harness.run("fio", "--name=srnic", f"--filename={dev}",
                    "--ioengine=libaio", "--direct=1", "--output-format=normal",
                    *args, check=False, timeout=FIO_TIMEOUT)
    assert p.returncode == 0, f"fio {' '.join(args)}: {p.stdout}\n{p.stderr}"
    assert not re.search(r"verify: bad|crc32c: verify failed|err= *[1-9]",
                         p.stdout), p.stdout
    return p.stdout


def test_the_controller_is_an_rdma_one_on_srnic(nvme):
    dev, _, topo = nvme
    ctrl = next(c for c in Path("/sys/class/nvme").glob("nvme*")
                if (c / "subsysnqn").read_text().strip() == NQN)
    address = (ctrl / "address").read_text()
    assert f"traddr={topo.a.addr}" in address, address
    assert (ctrl / "state").read_text().strip() == "live"
    size = int(Path(f"/sys/block/{dev.name}/size").read_text()) * 512
    assert size == NS_MIB << 20


@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("128k", "randrw"), ("1m", "write")])
def test_fio_crc32c_verify(nvme, bs, rw):
    """Writes of each size with crc32c headers, read back and verified by
    fio; several in flight (iodepth 8), so registrations overlap."""
    dev = nvme[0]
    out = fio(dev, f"--bs={bs}", f"--rw={rw}", "--size=16M", "--iodepth=8",
              "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
    assert re.search(r"WRITE: bw=", out), out


def test_what_the_host_writes_is_what_the_target_file_holds(nvme):
    """A pattern written through the host is in the backing file, byte for
    byte (the target RDMA READ it from the host's registered pages), and
    reading it back through the host returns the same bytes (the target
    RDMA WRITEs into them)."""
    dev, backing, _ = nvme
    data = os.urandom(8 << 20)
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 4 << 20)
        os.fsync(fd)
    finally:
        os.close(fd)
    # nvmet's buffered file I/O: the page cache holds what it wrote.
    with open(backing, "rb") as f:
        f.seek(4 << 20)
        on_target = f.read(len(data))
    assert hashlib.sha256(on_target).hexdigest() == \
        hashlib.sha256(data).hexdigest()

    harness.run("blockdev", "--flushbufs", str(dev))
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, len(data))
        n = os.preadv(fd, [buf], 4 << 20)
        assert n == len(data)
        assert hashlib.sha256(buf).hexdigest() == \
            hashlib.sha256(data).hexdigest()
    finally:
        os.close(fd)


def test_reconnect_after_the_port_comes_back(nvme):
    """The target's port goes away (the host sees its connection drop and
    tries to reconnect) and comes back: the controller is live again and
    I/O verifies."""
    dev, _, _ = nvme
    target_port = NVMET / "ports" / PORT_ID / "subsystems" / NQN
    subsys = NVMET / "subsystems" / NQN
    ctrl = next(c for c in Path("/sys/class/nvme").glob("nvme*")
                if (c / "subsysnqn").read_text().strip() == NQN)
    target_port.unlink()
    harness.wait_for(lambda: (ctrl / "state").read_text().strip() != "live",
                     timeout=60, what="the host to notice the port gone")
    time.sleep(2)
    target_port.symlink_to(subsys)
    harness.wait_for(lambda: (ctrl / "state").read_text().strip() == "live",
                     timeout=120, what="the controller live again")
    fio(dev, "--bs=64k", "--rw=randwrite", "--size=8M", "--iodepth=4",
        "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
