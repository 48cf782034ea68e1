#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job, run inside the VM by `make run`: load srnic, create two
# srnic devices on the two ends of a veth pair, show them, move data, then
# show the devices' counters and the start of the exchange's trace.
set -euo pipefail

modprobe srnic
ip link add srnic-a type veth peer name srnic-b
ip addr add 198.18.0.1/24 dev srnic-a
ip addr add 198.18.0.2/24 dev srnic-b
# ib_core resolves MACs by ARP; between two local addresses Linux drops
# that as martian unless accept_local is set.
sysctl -qw net.ipv4.conf.srnic-a.accept_local=1 net.ipv4.conf.srnic-b.accept_local=1
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

# Move data: RC ping-pong between the two devices, payload checked (-c).
gid_index() {
	grep -l "ffff:c612:$2" /sys/class/infiniband/"$1"/ports/1/gids/* | head -n 1 | xargs basename
}
# srnic's tracepoints record the exchange (Documentation/operations.rst).
tracing=/sys/kernel/tracing
[ -d $tracing/events ] || mount -t tracefs nodev $tracing
echo 8192 > $tracing/buffer_size_kb	# per CPU: the whole exchange
echo > $tracing/trace
echo 1 > $tracing/events/srnic/enable

echo "== ibv_rc_pingpong srnic0 <-> srnic1, 64 KiB, data checked"
ibv_rc_pingpong -d srnic0 -g "$(gid_index srnic0 0001)" -s 65536 -n 100 -c > /dev/null &
server=$!
sleep 1
ibv_rc_pingpong -d srnic1 -g "$(gid_index srnic1 0002)" -s 65536 -n 100 -c 127.0.0.1
wait "$server"
echo 0 > $tracing/events/srnic/enable

# Two devices of one host exchange without packets (local delivery): their
# packet counters stay 0, and the trace shows WQEs and completions.
echo "== rdma statistic: the devices' counters after that exchange"
rdma statistic show link srnic0/1
rdma statistic show link srnic1/1
echo "== its trace: events by kind (trace-cmd record -e srnic records the same)"
grep -o 'srnic_[a-z_]*:' $tracing/trace | sort | uniq -c
echo "== its trace: the first events"
awk '!/^#/ && n++ < 40' $tracing/trace
echo > $tracing/trace
