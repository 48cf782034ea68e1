# SPDX-License-Identifier: GPL-2.0
"""srnic's packet fault injection (kernel/srnic_fault.c, debugfs
/sys/kernel/debug/srnic/linkN/fault/, Documentation/reliability.rst)
from the suites that run traffic under loss."""
import os

import pytest

import topology as topo_mod


@pytest.fixture(scope="module")
def wire():
    """veth-two-netns between two srnic devices, for a module's tests."""
    topo, veth = topo_mod.build("veth-two-netns")
    yield topo
    topo_mod.teardown(topo, veth)


def fault_dir(dev):
    """/sys/kernel/debug/srnic/linkN/fault of an srnic device."""
    parent = os.path.realpath(f"/sys/class/infiniband/{dev}/device")
    return f"/sys/kernel/debug/srnic/{os.path.basename(parent)}/fault"


def set_faults(topo, loss_pct, seed):
    """loss_pct % transmit drop, half as much reordering, a quarter as much
    receive duplication and corruption, on both ends; 0 turns all off."""
    ppm = loss_pct * 10000
    knobs = {"tx_drop": ppm, "tx_reorder": ppm // 2,
             "rx_duplicate": ppm // 4, "rx_corrupt": ppm // 4}
    for i, end in enumerate((topo.a, topo.b)):
        d = fault_dir(end.name)
        with open(f"{d}/seed", "w") as f:
            f.write(str(seed + i))
        with open(f"{d}/delay_us", "w") as f:
            f.write("500")
        for name, value in knobs.items():
            with open(f"{d}/{name}", "w") as f:
                f.write(str(value))


def set_knobs(dev, **knobs):
    """Set fault knobs of one device by name (tx_drop=ppm, ...)."""
    d = fault_dir(dev)
    for name, value in knobs.items():
        with open(f"{d}/{name}", "w") as f:
            f.write(str(value))


def injected(dev):
    """{fault: packets} injected so far on an srnic device."""
    with open(f"{fault_dir(dev)}/injected") as f:
        return {k: int(v) for k, v in (line.split() for line in f)}
