# SPDX-License-Identifier: GPL-2.0
"""dma-buf MRs (ibv_reg_dmabuf_mr; srnic_reg_dmabuf_mr() in kernel/srnic_mr.c,
reg_dmabuf_mr in userspace/mr.cpp).

tests/dmabuf_mr.c, compiled in the VM, registers dma-bufs of two exporters
that need no GPU: udmabuf (a memfd made a dma-buf by /dev/udmabuf) and vgem
(the kernel's virtual GEM driver, a shmem buffer exported by PRIME). On one
device and across two netns it moves data by RDMA WRITE from one dma-buf MR
into another, RDMA READ back, and SEND/RECV, checking every byte through
each process's own mapping of the buffer and the bytes around the MR; it
checks the errnos of registrations that must fail and that a WRITE past the
MR is refused without touching the buffer; `rdma -dd resource show mr`
names each MR's type while it is registered. rxe has no dma-buf MRs, so the
interop topologies are left out. Debian 12's kernel is built without
udmabuf: that exporter skips there, and vgem covers the verb.
"""
import json
import os
import pathlib
import subprocess

import pytest

import harness
from topology import topology  # noqa: F401 (fixture)

HERE = pathlib.Path(__file__).resolve().parent
PROGRAM_C = HERE / "dmabuf_mr.c"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """tests/dmabuf_mr.c, compiled once for the module."""
    exe = tmp_path_factory.mktemp("dmabuf") / "dmabuf_mr"
    subprocess.run(["cc", "-O2", "-Wall", "-o", str(exe), str(PROGRAM_C),
                    "-libverbs"], check=True)
    return exe


@pytest.fixture(scope="module")
def exporters():
    """The exporters this kernel has: vgem is a module, udmabuf built in
    (Debian 13 on) or absent (Debian 12)."""
    harness.run("modprobe", "vgem", check=False)
    harness.run("modprobe", "udmabuf", check=False)
    return {"vgem": any(pathlib.Path("/dev/dri").glob("card*")),
            "udmabuf": os.path.exists("/dev/udmabuf")}


@pytest.mark.check_topologies("one-device", "veth-two-netns")
@pytest.mark.parametrize("exporter", ["udmabuf", "vgem"])
def test_rdma_on_dmabuf_mrs(topology, program, exporters, exporter):
    if any(end.kind != "srnic" for end in (topology.a, topology.b)):
        pytest.skip("rxe has no dma-buf MRs")
    if not exporters[exporter]:
        pytest.skip(f"this kernel ({os.uname().release}) has no {exporter}")
    a, b = topology.a, topology.b
    out = subprocess.run([str(program), exporter, a.name, str(a.gid_index),
                          b.name, str(b.gid_index)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.check_topologies("one-device", "veth-two-netns")
def test_rdma_resource_names_dmabuf_mrs(topology, program, exporters):
    """Each end's dma-buf MR (256 KiB of a 1 MiB buffer, from 8 KiB in)
    shows as type dmabuf with its 64 pages while the program holds it."""
    if any(end.kind != "srnic" for end in (topology.a, topology.b)):
        pytest.skip("rxe has no dma-buf MRs")
    exporter = "vgem" if exporters["vgem"] else "udmabuf"
    if not exporters[exporter]:
        pytest.skip(f"this kernel ({os.uname().release}) has no dma-buf "
                    "exporter")
    a, b = topology.a, topology.b
    p = subprocess.Popen([str(program), exporter, a.name, str(a.gid_index),
                          b.name, str(b.gid_index), "hold"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "registered", p.stderr.read()
        for dev in {a.name, b.name}:
            ends = [e for e in (a, b) if e.name == dev]
            mrs = harness.rdma_resources("mr", "dev", dev)
            found = [m for m in mrs if m.get("mrlen") == 256 * 1024]
            assert len(found) == len(ends), json.dumps(mrs)
            for m in found:
                assert m["type"] == "dmabuf" and m["pages"] == 64, m
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and out.strip() == "ok", out + err
