# SPDX-License-Identifier: GPL-2.0
"""srnic's Debian packages, as a user gets them: `make deb` leaves them in
build/deb/<platform>/ (scripts/build-deb.sh); here, in that platform's VM,
they are installed with dpkg (DKMS builds the module for the running
kernel), used from the installed files only, and purged again.

The VM of this suite has no build-tree module or provider (the line below
tells scripts/run-vm-suites.sh): what loads must come from the packages.
Checked: the module DKMS built is the one `rdma link add` autoloads, the
provider libibverbs maps is the packaged one, ibv_devinfo, ibv_rc_pingpong
-c, perftest's six RC tools and librdmacm's tools (rping with its data
checked, ucmatose, rdma_server/rdma_client) run between two srnic devices
in two netns, and `dpkg --purge` leaves no file behind that was not there
before the install (in /etc, /usr/src, /usr/share/doc, libibverbs' provider
directory, the kernel's module tree, /var/lib/dkms, /opt, /usr/local).
"""
# srnic-vm-run: --module none --provider none
import glob
import os
import re

import pytest

import harness
import topology
from perftools import perftest_argv, run_pair

PLATFORM = harness.run("scripts/platform", "host").stdout.strip()
DEB_DIR = os.path.join(os.environ.get("SRNIC_REPO", "."), "build", "deb",
                       PLATFORM)
KVER = os.uname().release
PACKAGES = ("srnic-dkms", "ibverbs-provider-srnic")
# Where the packages, DKMS and their scripts put files (walking all of /usr
# over the VM's 9p root would take minutes); what dpkg and apt keep of their
# own (their database, logs, caches) is theirs.
WATCHED = ("/etc", "/usr/src", "/usr/share/doc",
           "/usr/lib/x86_64-linux-gnu/libibverbs", f"/lib/modules/{KVER}",
           "/var/lib/dkms", "/opt", "/usr/local")
NOT_OURS = re.compile(r"^/etc/ld\.so\.cache$|\.pyc$|/__pycache__(/|$)")

state = {}


def tree_snapshot():
    """Every path under WATCHED (after usrmerge /lib is /usr/lib)."""
    paths = set()
    for top in WATCHED:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if not NOT_OURS.search(path):
                    paths.add(os.path.realpath(os.path.dirname(path)) +
                              "/" + name)
    return paths


def debs():
    found = {}
    for pkg in PACKAGES:
        paths = glob.glob(os.path.join(DEB_DIR, f"{pkg}_*.deb"))
        assert len(paths) == 1, (
            f"{pkg}: want one package in {DEB_DIR}, found {paths}: "
            f"run make deb PLATFORM={PLATFORM}")
        found[pkg] = paths[0]
    return found


def srnic_modules():
    """srnic.ko files of the running kernel, compressed or not."""
    return sorted(glob.glob(f"/lib/modules/{KVER}/**/srnic.ko*",
                            recursive=True))


def test_nothing_of_the_build_tree():
    """No module, provider or .driver file but what the packages bring."""
    assert not harness.module_loaded()
    assert srnic_modules() == []
    assert not os.path.exists("/etc/libibverbs.d/srnic.driver")
    for pkg in PACKAGES:
        assert harness.run("dpkg-query", "-W", pkg,
                           check=False).returncode != 0


def test_install():
    files = debs()
    state["before"] = tree_snapshot()
    out = harness.run("dpkg", "-i", files["srnic-dkms"],
                      files["ibverbs-provider-srnic"], timeout=1500)
    state["installed"] = True
    status = harness.run("dkms", "status", "srnic").stdout
    assert re.search(rf"srnic/\S+, {re.escape(KVER)}, x86_64: installed",
                     status), out.stdout + status
    mods = srnic_modules()
    assert len(mods) == 1 and "/updates/dkms/" in mods[0], mods
    libdir = harness.run("pkg-config", "--variable=libdir",
                         "libibverbs").stdout.strip()
    provider = glob.glob(f"{libdir}/libibverbs/libsrnic-rdmav*.so")
    assert len(provider) == 1, provider
    state["provider"] = provider[0]
    with open("/etc/libibverbs.d/srnic.driver") as f:
        assert f.read().split() == ["driver", "srnic"]


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


def test_purge_leaves_nothing():
    if not state.get("installed"):
        pytest.skip("the packages did not install")
    for name in list(harness.rdma_links()):
        if name.startswith("srnic"):
            harness.run("rdma", "link", "delete", name)
    if harness.module_loaded():
        harness.run("rmmod", "srnic")
    harness.run("dpkg", "--purge", *PACKAGES, timeout=600)
    for pkg in PACKAGES:
        assert harness.run("dpkg-query", "-W", pkg,
                           check=False).returncode != 0
    assert srnic_modules() == []
    assert harness.run("modprobe", "srnic", check=False).returncode != 0
    after = tree_snapshot()
    assert after - state["before"] == set(), sorted(after - state["before"])
    assert state["before"] - after == set(), sorted(state["before"] - after)
