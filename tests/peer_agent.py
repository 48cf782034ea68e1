# SPDX-License-Identifier: GPL-2.0
"""The peer VM's agent (scripts/vm-run --peer): brings the wire's NIC up at
PEER_ADDR and runs, one after another, the commands the test VM sends over
the wire (tests/peer.py), answering with their exit status and output.

One JSON object per line each way: {"argv": [...], "timeout": seconds,
"input": text} is answered with {"rc": status, "stdout": ..., "stderr": ...}
(rc -9 when the command ran out of time), {"exit": true} with {} before the
agent ends and the peer VM powers off. Commands run as root in the repo
root with tests/ on PYTHONPATH, so that they can use the suites' helpers
(python3 -c 'import nvme_rdma; ...'). Each connection is served by a
thread of its own, so that one command may run (a tool's server end, run
through `tests/peer.py run`) while another connection asks for more. Only
the two VMs are on that wire.
"""
import json
import os
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402


def serve(conn):
    """Commands from one connection, one after another; the agent ends
    when told to exit."""
    with conn, conn.makefile("rwb") as f:
        for line in f:
            req = json.loads(line)
            if req.get("exit"):
                f.write(b"{}\n")
                f.flush()
                sys.stdout.flush()
                os._exit(0)
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
            try:
                f.write(json.dumps(reply).encode() + b"\n")
                f.flush()
            except OSError:     # the asker went away (killed at its timeout)
                return


def main():
    peer.wire_up(peer.PEER_ADDR)
    with socket.create_server((peer.PEER_ADDR.split("/")[0],
                               peer.AGENT_PORT)) as srv:
        print(f"peer agent at {peer.PEER_ADDR} port {peer.AGENT_PORT}",
              flush=True)
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
