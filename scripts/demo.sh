#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job, run inside the VM by `make run`: load srnic, create two
# srnic devices on the two ends of a veth pair, and show them.
set -euo pipefail

modprobe srnic
ip link add srnic-a type veth peer name srnic-b
ip addr add 198.18.0.1/24 dev srnic-a
ip addr add 198.18.0.2/24 dev srnic-b
ip link set srnic-a up
ip link set srnic-b up
rdma link add srnic0 type srnic netdev srnic-a
rdma link add srnic1 type srnic netdev srnic-b

# ib_core fills the GID tables from the addresses asynchronously.
for _ in $(seq 50); do
	grep -q "ffff:c612" /sys/class/infiniband/srnic1/ports/1/gids/* 2>/dev/null && break
	sleep 0.1
done

echo "== rdma link"
rdma link show
echo "== rdma dev"
rdma dev show
echo "== ibv_devices"
ibv_devices
for dev in srnic0 srnic1; do
	echo "== ibv_devinfo -v -d $dev"
	ibv_devinfo -v -d "$dev"
done
