# SPDX-License-Identifier: GPL-2.0
"""srnic's Debian packages, as a user gets them, used from the installed
files only. `make deb` leaves them in build/deb/<platform>/
(scripts/build-deb.sh); scripts/package-test.sh (make package-test)
installs them with dpkg into a copy-on-write overlay of the platform's root
(DKMS builds srnic.ko there for the root's kernel, natively: its compile and
depmod in a TCG guest take more than five minutes), boots that root in the
VM to run this suite, and purges them afterwards, checking that nothing is
left behind. Run on its own (make vm-test) the suite fails at once: the
packages are not installed.

The VM of this suite has no build-tree module or provider (the line below
tells scripts/run-vm-suites.sh): what loads must come from the packages.
Checked: the module DKMS built is the one `rdma link add` autoloads, the
provider libibverbs maps is the packaged one, and ibv_devinfo,
ibv_rc_pingpong -c, perftest's six RC tools and librdmacm's tools (rping
with its data checked, ucmatose, rdma_server/rdma_client) run between two
srnic devices in two netns.
"""
# srnic-vm-run: --module none --provider none
import glob
import os
import re

import pytest

import harness
import topology
from perftools import perftest_argv, run_pair

KVER = os.uname().release
PACKAGES = ("srnic-dkms", "ibverbs-provider-srnic")

state = {}


def srnic_modules():
    """srnic.ko files of the running kernel, compressed or not."""
    return sorted(glob.glob(f"/lib/modules/{KVER}/**/srnic.ko*",
                            recursive=True))


def test_installed_from_the_packages_only():
    for pkg in PACKAGES:
        out = harness.run("dpkg-query", "-W", "-f", "${Status}", pkg,
                          check=False)
        assert out.stdout == "install ok installed", (
            f"{pkg} is not installed: run scripts/package-test.sh "
            f"(make package-test), which installs the packages first\n"
            f"{out.stdout}{out.stderr}")
    assert not harness.module_loaded()
    # dkms status reads every module tree's state through many small
    # processes: over a minute under TCG on a loaded host (seen on trixie).
    status = harness.run("dkms", "status", "srnic", timeout=300).stdout
    assert re.search(rf"srnic/\S+, {re.escape(KVER)}, x86_64: installed",
                     status), status
    # DKMS's module and no other (vm-run staged no build-tree module).
    mods = srnic_modules()
    assert len(mods) == 1 and "/updates/dkms/" in mods[0], mods
    libdir = harness.run("pkg-config", "--variable=libdir",
                         "libibverbs").stdout.strip()
    provider = glob.glob(f"{libdir}/libibverbs/libsrnic-rdmav*.so")
    assert len(provider) == 1, provider
    owner = harness.run("dpkg", "-S", provider[0]).stdout
    assert owner.startswith("ibverbs-provider-srnic"), owner
    state["provider"] = provider[0]
    with open("/etc/libibverbs.d/srnic.driver") as f:
        assert f.read().split() == ["driver", "srnic"]
    # srnic(7), from srnic-dkms (dh_installman compresses it).
    page = harness.run("man", "-w", "srnic").stdout.strip()
    assert harness.run("dpkg", "-S", page).stdout.startswith("srnic-dkms"), \
        page
    assert "rdma link add" in harness.run("man", "7", "srnic").stdout
    state["installed"] = True


@pytest.fixture(scope="module")
def pair():
    if not state.get("installed"):
        pytest.skip("the packages did not install")
    topo, veth = topology.build("veth-two-netns", kind="srnic")
    yield topo
    topology.teardown(topo, veth)


def test_module_and_provider_are_the_packaged_ones(pair):
    # rdma link add loaded srnic by its link alias, from DKMS's directory.
    assert harness.module_loaded()
    path = harness.run("modinfo", "-n", "srnic").stdout.strip()
    assert path.startswith(f"/lib/modules/{KVER}/updates/dkms/srnic.ko"), path
    out = harness.run(*pair.a.cmd("ibv_devinfo", "-d", pair.a.name)).stdout
    assert "PORT_ACTIVE" in out, out
    maps = harness.run(*pair.a.cmd(
        "/usr/bin/python3", "-c",
        "import sys\nfrom pyverbs.device import Context\n"
        "with Context(name=sys.argv[1]):\n"
        "    print(open('/proc/self/maps').read())", pair.a.name)).stdout
    mapped = {line.split()[-1] for line in maps.splitlines()
              if "libsrnic" in line}
    assert mapped == {state["provider"]}, mapped


def test_rc_pingpong(pair, tmp_path):
    port = 18950

    def argv(end):
        return ["ibv_rc_pingpong", "-d", end.name, "-g", str(end.gid_index),
                "-s", "65536", "-n", "50", "-p", str(port), "-c"]
    out, _ = run_pair(pair, argv(pair.a), argv(pair.b), port, tmp_path,
                      "pingpong")
    assert "50 iters" in out, out


@pytest.mark.parametrize("tool", ["ib_send_bw", "ib_write_bw", "ib_read_bw",
                                  "ib_send_lat", "ib_write_lat",
                                  "ib_read_lat"])
def test_perftest(pair, tool, tmp_path):
    port = 18960 + len(tool) + (10 if tool.endswith("lat") else 0) + \
        {"s": 0, "w": 1, "r": 2}[tool[3]]
    size = 65536
    out, _ = run_pair(pair, perftest_argv(tool, pair.a, size, 50, port),
                      perftest_argv(tool, pair.b, size, 50, port), port,
                      tmp_path, tool)
    assert any(line.split()[:1] == [str(size)] for line in out.splitlines()), \
        out


def test_rdma_cm_tools(pair, tmp_path):
    from test_rdmacm import rping_text, run_cm_pair
    a = pair.a
    cout, sout = run_cm_pair(
        pair, ["rping", "-s", "-a", a.addr, "-p", "19990", "-C", "5", "-v"],
        ["rping", "-c", "-a", a.addr, "-p", "19990", "-C", "5", "-V", "-v"],
        19990, tmp_path, "rping")
    got = [line[len("ping data: "):] for line in cout.splitlines()
           if line.startswith("ping data: ")]
    assert got == [rping_text(i, 64) for i in range(5)], cout
    args = ["-p", "19991", "-c", "2", "-C", "10", "-S", "1000"]
    cout, sout = run_cm_pair(pair, ["ucmatose", "-b", a.addr] + args,
                             ["ucmatose", "-s", a.addr] + args, 19991,
                             tmp_path, "ucmatose")
    for out in (cout, sout):
        assert "return status 0" in out, out
    cout, sout = run_cm_pair(pair, ["rdma_server", "-p", "19992"],
                             ["rdma_client", "-s", a.addr, "-p", "19992"],
                             19992, tmp_path, "rdma-server")
    assert "rdma_client: end 0" in cout, cout
    assert "rdma_server: end 0" in sout, sout
