# SPDX-License-Identifier: GPL-2.0
"""srnic(7) (issue 25, item 5; Documentation/srnic.7, installed by `make
install` and the srnic-dkms package: tests/test_install.py and
test_packages.py read it back with `man srnic`): `man -l` renders it with
no groff warning, and it names everything an operator can set or read on
this kernel: every module parameter the loaded module has, every counter
`rdma statistic` shows, every tracepoint in tracefs, every device switch
and every fault injection file."""
import os
import re

import pytest

import faults
import harness
import topology

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "Documentation", "srnic.7")
SWITCHES = ("ecn", "selective_repeat", "multipath", "capture",
            "capture_netdev")


@pytest.fixture(scope="module")
def text():
    r = harness.run("man", "-l", PAGE, check=False)
    assert r.returncode == 0 and not r.stderr, r.stderr
    lint = harness.run("groff", "-man", "-ww", "-z", PAGE, check=False)
    assert lint.returncode == 0 and not lint.stderr, lint.stderr
    # Hyphenation and adjustment split no name at a line's end.
    return re.sub(r"\s+", " ", harness.run(
        "env", "MANWIDTH=1000", "man", "--nh", "--nj", "-l", PAGE).stdout)


@pytest.fixture(scope="module")
def device():
    topo, veth = topology.build("veth-two-netns", "srnic")
    yield topo.a
    topology.teardown(topo, veth)


def missing(names, text):
    return sorted(n for n in names if not re.search(rf"\b{n}\b", text))


def test_sections(text):
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "MODULE PARAMETERS",
                    "DEVICE SWITCHES", "COUNTERS", "TRACEPOINTS",
                    "FAULT INJECTION", "LIMITS", "INTEROPERABILITY",
                    "SEE ALSO"):
        assert section in text, section
    assert "rdma link add NAME type srnic netdev NETDEV" in text


def test_every_module_parameter(text, device):
    params = os.listdir("/sys/module/srnic/parameters")
    assert params
    assert not missing(params, text)


def test_every_counter(text, device):
    counters = harness.link_counters(device)
    assert "rx_packets" in counters
    assert not missing(counters, text)


def test_every_tracepoint(text, device):
    events = [n for n in os.listdir(f"{harness.tracefs()}/events/srnic")
              if n.startswith("srnic_")]
    assert "srnic_packet_tx" in events
    assert not missing(events, text)


def test_every_switch_and_fault_file(text, device):
    for switch in SWITCHES:
        assert os.path.exists(harness.device_switch_path(device, switch))
    files = os.listdir(faults.fault_dir(device.name))
    assert "tx_drop" in files
    assert not missing(list(SWITCHES) + files, text)
