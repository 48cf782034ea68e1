# SPDX-License-Identifier: GPL-2.0
"""NVMe over RDMA with the kernel's own ULPs, for tests/test_nvme_rdma.py
and make bench (scripts/bench.py): an nvmet-rdma target configured through
configfs, with one namespace backed by a file, and nvme-rdma connected to
it with nvme-cli (`nvme connect -t rdma`).

Both ULPs listen and connect through the kernel's rdma_cm in init_net, so
the RDMA device they use must be there. The file is served buffered (nvmet's
buffered_io): tmpfs, where the VM keeps it, has no O_DIRECT on every kernel
here.

It also holds the block-device checks the other kernel ULPs' suites share
(tests/test_iser.py, test_srp.py): fio() and verify_fio(), crc32c-verified
I/O, and direct_write_lands_in(), a write compared with the target's file.
"""
import hashlib
import mmap
import os
import re
from pathlib import Path

import harness

NQN = "nqn.2026-12.org.srnic:test-nvme-rdma"
PORT_ID = "1"
TRSVCID = "4420"
NVMET = Path("/sys/kernel/config/nvmet")


def write_attr(path, value):
    Path(path).write_text(f"{value}\n")


class Target:
    """An nvmet subsystem nqn with one namespace, on RDMA port port_id at
    addr:TRSVCID (an IPv4 or an IPv6 address). The namespace is backing:
    a file (nvmet's file backend, through the page cache) or a block
    device (its bdev backend)."""

    def __init__(self, addr, backing, nqn=NQN, port_id=PORT_ID):
        self.addr = addr
        self.backing = backing
        self.nqn = nqn
        self.subsys = NVMET / "subsystems" / nqn
        self.ns = self.subsys / "namespaces" / "1"
        self.port = NVMET / "ports" / port_id
        self.link = self.port / "subsystems" / nqn

    def start(self):
        for mod in ("nvmet", "nvmet-rdma"):
            harness.run("modprobe", mod)
        if not NVMET.is_dir():
            harness.run("mount", "-t", "configfs", "none",
                        "/sys/kernel/config", check=False)
        self.subsys.mkdir()
        write_attr(self.subsys / "attr_allow_any_host", 1)
        self.ns.mkdir()
        write_attr(self.ns / "device_path", self.backing)
        if Path(self.backing).is_file():
            write_attr(self.ns / "buffered_io", 1)
        write_attr(self.ns / "enable", 1)
        self.port.mkdir()
        write_attr(self.port / "addr_trtype", "rdma")
        write_attr(self.port / "addr_adrfam",
                   "ipv6" if ":" in self.addr else "ipv4")
        write_attr(self.port / "addr_traddr", self.addr)
        write_attr(self.port / "addr_trsvcid", TRSVCID)
        self.link.symlink_to(self.subsys)

    def stop(self, unload=True):
        """Undo start() as far as it went; the modules too, with unload."""
        for step in (self.link.unlink, self.port.rmdir,
                     lambda: write_attr(self.ns / "enable", 0),
                     self.ns.rmdir, self.subsys.rmdir):
            try:
                step()
            except OSError:
                pass
        if unload:
            for mod in ("nvmet-rdma", "nvmet"):
                harness.run("modprobe", "-r", mod, check=False, timeout=120)


def block_device(nqn=NQN):
    """/dev/nvmeXnY of nqn's namespace, or None. Its device link leads to
    the controller, or with native multipath to the subsystem: both have
    subsysnqn."""
    for blk in sorted(Path("/sys/block").glob("nvme*n*")):
        # nvmeXcYnZ: one path of a multipath namespace, not for I/O
        if not re.fullmatch(r"nvme\d+n\d+", blk.name):
            continue
        try:
            if (blk / "device" / "subsysnqn").read_text().strip() == nqn:
                return Path("/dev") / blk.name
        except OSError:
            continue
    return None


def controller(nqn=NQN):
    """/sys/class/nvme/nvmeX of nqn's controller, or None."""
    for ctrl in Path("/sys/class/nvme").glob("nvme*"):
        try:
            if (ctrl / "subsysnqn").read_text().strip() == nqn:
                return ctrl
        except OSError:
            continue
    return None


def connect(addr, nqn=NQN, poll_queues=0, host_addr=None):
    """nvme connect -t rdma to nqn at addr (from host_addr's device, if
    given), with poll_queues polled I/O queues (IB_POLL_DIRECT CQs, for
    io_uring's hipri I/O) beside the interrupt-driven ones; the namespace's
    block device."""
    harness.run("modprobe", "nvme-rdma")
    # Reconnect attempts a second apart, not ten: the reconnect test waits
    # for one.
    p = harness.run("nvme", "connect", "-t", "rdma", "-a", addr, "-s",
                    TRSVCID, "-n", nqn, "--reconnect-delay=1",
                    f"--nr-poll-queues={poll_queues}",
                    *(["--host-traddr", host_addr] if host_addr else []),
                    check=False, timeout=120)
    assert p.returncode == 0, (
        f"nvme connect -t rdma to {addr} failed ({p.returncode})\n"
        f"stdout: {p.stdout}\nstderr: {p.stderr}\n"
        + harness.run("dmesg", check=False).stdout[-3000:])
    return harness.wait_for(lambda: usable_block_device(nqn), timeout=60,
                            what=f"the block device of {nqn}, open with "
                            "O_DIRECT")


def usable_block_device(nqn=NQN):
    """block_device(nqn) once it opens with O_DIRECT, as fio opens it: a
    namespace just listed may still be sized, and one of a controller that
    went with its device may linger in /sys/block for a moment."""
    dev = block_device(nqn)
    if dev is None:
        return None
    try:
        os.close(os.open(dev, os.O_RDONLY | os.O_DIRECT))
    except OSError:
        return None
    return dev


def disconnect(nqn=NQN, unload=True):
    harness.run("nvme", "disconnect", "-n", nqn, check=False, timeout=120)
    if unload:
        harness.run("modprobe", "-r", "nvme-rdma", check=False, timeout=120)


def make_backing_file(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def fio(dev, *args, ioengine="libaio", timeout=300):
    """fio on dev (O_DIRECT, libaio unless ioengine says) with args; its
    stdout. Fails on a non-zero exit or a verification error."""
    p = harness.run("fio", "--name=srnic", f"--filename={dev}",
                    f"--ioengine={ioengine}", "--direct=1", *args,
                    check=False, timeout=timeout)
    assert p.returncode == 0, f"fio {' '.join(args)}: {p.stdout}\n{p.stderr}"
    assert not re.search(r"verify: bad|crc32c: verify failed|err= *[1-9]",
                         p.stdout), p.stdout
    return p.stdout


def verify_fio(dev, bs, rw, *args, size="16M", ioengine="libaio"):
    """fio's crc32c-verified writes (and reads, for rw's read part) of size
    bytes in bs blocks, eight in flight, on a block device of any of the
    ULPs; args are more fio options."""
    out = fio(dev, f"--bs={bs}", f"--rw={rw}", f"--size={size}",
              "--iodepth=8", "--verify=crc32c", "--do_verify=1",
              "--verify_fatal=1", *args, ioengine=ioengine)
    assert "WRITE: bw=" in out, out
    return out


def direct_write(dev, offset, size):
    """Write size random bytes to dev at offset with O_DIRECT; the bytes."""
    data = os.urandom(size)
    buf = mmap.mmap(-1, size)
    buf.write(data)
    fd = os.open(dev, os.O_WRONLY | os.O_DIRECT)
    try:
        assert os.pwritev(fd, [buf], offset) == size
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


def direct_write_lands_in(dev, backing, offset, size=8 << 20):
    """Write size random bytes to dev at offset with O_DIRECT; assert that
    the target's backing file holds them there, byte for byte."""
    data = direct_write(dev, offset, size)
    with open(backing, "rb") as f:
        f.seek(offset)
        assert hashlib.sha256(f.read(size)).digest() == \
            hashlib.sha256(data).digest()
