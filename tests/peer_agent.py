# SPDX-License-Identifier: GPL-2.0
"""The peer VM's agent (scripts/vm-run --peer): brings the wire's NIC up at
PEER_ADDR and runs, one after another, the commands the test VM sends over
the wire (tests/peer.py), answering with their exit status and output.

One JSON object per line each way: {"argv": [...], "timeout": seconds,
"input": text} is answered with {"rc": status, "stdout": ..., "stderr": ...}
(rc -9 when the command ran out of time), {"exit": true} with {} before the
agent ends and the peer VM powers off. Commands run as root in the repo
root with tests/ on PYTHONPATH, so that they can use the suites' helpers
(python3 -c 'import nvme_rdma; ...'). Only the two VMs are on that wire.
"""
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402


def serve(conn):
    """Commands from one connection; False once told to exit."""
    with conn, conn.makefile("rwb") as f:
        for line in f:
            req = json.loads(line)
            if req.get("exit"):
                f.write(b"{}\n")
                f.flush()
                return False
            try:
                p = subprocess.run(req["argv"], input=req.get("input", ""),
                                   capture_output=True, text=True,
                                   timeout=req.get("timeout", 60),
                                   env=dict(os.environ, PYTHONPATH="tests"))
                reply = {"rc": p.returncode, "stdout": p.stdout,
                         "stderr": p.stderr}
            except subprocess.TimeoutExpired as exc:
                reply = {"rc": -9, "stdout": str(exc.stdout or ""),
                         "stderr": f"timed out after {exc.timeout} s"}
            except OSError as exc:
                reply = {"rc": 127, "stdout": "", "stderr": str(exc)}
            f.write(json.dumps(reply).encode() + b"\n")
            f.flush()
    return True


def main():
    peer.wire_up(peer.PEER_ADDR)
    with socket.create_server((peer.PEER_ADDR.split("/")[0],
                               peer.AGENT_PORT)) as srv:
        print(f"peer agent at {peer.PEER_ADDR} port {peer.AGENT_PORT}",
              flush=True)
        while True:
            conn, _ = srv.accept()
            if not serve(conn):
                return 0


if __name__ == "__main__":
    sys.exit(main())
