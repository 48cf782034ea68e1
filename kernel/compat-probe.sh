#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# compat-probe.sh SRCTREE [--report]: what the kernel srnic is built against provides, decided by
# reading its headers, for kernel/srnic_compat.h. Kbuild calls it once per build and adds the
# -DSRNIC_HAVE_* flags it prints to ccflags; with --report it prints one "name: yes/no" line per
# probe (make compat-report). A probe looks for the declaration itself, never at the version
# number, so a distribution kernel with a backport gets the right answer.
#
# Each probe is: NAME HEADER PATTERN [FOLLOW LINES]. The flag SRNIC_HAVE_NAME is set when
# HEADER (relative to SRCTREE/include) exists and the extended regular expression PATTERN
# matches a line of it ("-": the header's existence is the test); with FOLLOW, that line or one
# of the LINES lines after it must also match FOLLOW (a prototype spread over lines).

srctree=${1:?usage: compat-probe.sh SRCTREE [--report]}
report=${2:-}

probe() {
	name=$1 header=$srctree/include/$2 pattern=$3 follow=${4:-} lines=${5:-0}
	found=no
	if [ -f "$header" ]; then
		if [ "$pattern" = - ]; then
			found=yes
		elif [ -z "$follow" ]; then
			grep -qE "$pattern" "$header" && found=yes
		else
			grep -A "$lines" -E "$pattern" "$header" | grep -qE "$follow" && found=yes
		fi
	fi
	if [ "$report" = --report ]; then
		echo "$name: $found"
	elif [ "$found" = yes ]; then
		printf ' -DSRNIC_HAVE_%s' "$name"
	fi
}

# 6.12: <asm/unaligned.h> moved to <linux/unaligned.h>.
probe LINUX_UNALIGNED_H linux/unaligned.h -
# 6.3: vma->vm_flags became read-only; vm_flags_set()/vm_flags_clear() write it.
probe VM_FLAGS_SET linux/mm.h 'void vm_flags_set\('
# 6.13: hrtimer_setup() sets the callback with the clock and mode.
probe HRTIMER_SETUP linux/hrtimer.h 'void hrtimer_setup\('
# 6.11: ib_device_ops.create_cq takes the uverbs attribute bundle, not the udata.
probe CREATE_CQ_ATTRS rdma/ib_verbs.h '\(\*create_cq\)\(' 'struct uverbs_attr_bundle' 2
# 7.x: resize_cq is resize_user_cq (user CQs only, unsigned size).
probe RESIZE_USER_CQ rdma/ib_verbs.h '\(\*resize_user_cq\)\('
# 6.17: reg_user_mr takes a DMA handle.
probe REG_USER_MR_DMAH rdma/ib_verbs.h '\(\*reg_user_mr\)\(' 'struct ib_dmah' 3
# 6.10: reg_user_mr_dmabuf takes the uverbs attribute bundle; 6.17 also a DMA handle.
probe REG_DMABUF_MR_ATTRS rdma/ib_verbs.h '\(\*reg_user_mr_dmabuf\)\(' 'struct uverbs_attr_bundle' 4
probe REG_DMABUF_MR_DMAH rdma/ib_verbs.h '\(\*reg_user_mr_dmabuf\)\(' 'struct ib_dmah' 4
# 6.2: dma_buf_vmap() wants the buffer's reservation lock held; dma_buf_vmap_unlocked() takes it.
probe DMA_BUF_VMAP_UNLOCKED linux/dma-buf.h 'int dma_buf_vmap_unlocked\('
# 6.13: MODULE_IMPORT_NS() takes a string literal.
probe MODULE_IMPORT_NS_STRING linux/module.h 'define MODULE_IMPORT_NS\(ns\)[[:space:]]+MODULE_INFO\(import_ns, ns\)'
# 7.x: the query_port_speed verb (ibv_query_port_speed, rdma-core 65).
probe QUERY_PORT_SPEED rdma/ib_verbs.h '\(\*query_port_speed\)\('
# 7.x: ib_umem_get() became ib_umem_get_va().
probe IB_UMEM_GET_VA rdma/ib_umem.h 'ib_umem_get_va\('
# 6.15: the ODP capability bits of ATOMIC WRITE and FLUSH.
probe ODP_SUPPORT_ATOMIC_WRITE rdma/ib_verbs.h 'IB_ODP_SUPPORT_ATOMIC_WRITE'
probe ODP_SUPPORT_FLUSH rdma/ib_verbs.h 'IB_ODP_SUPPORT_FLUSH'
# 6.2: MR access flags for FLUSH (ib_check_mr_access() lets them through).
probe ACCESS_FLUSH_GLOBAL rdma/ib_verbs.h 'IB_ACCESS_FLUSH_GLOBAL[[:space:]]*='
# 6.15: an ODP umem's pages are an hmm_dma_map of HMM PFNs (map.pfn_list), not a dma_list.
probe ODP_HMM_DMA_MAP rdma/ib_umem_odp.h 'struct hmm_dma_map[[:space:]]+map;'
# 7.x: the UDP tunnel helpers take the struct sock.
probe UDP_TUNNEL_SK net/udp_tunnel.h 'void setup_udp_tunnel_sock\(struct net \*net, struct sock \*'
# Before 7.x: IPv6 is reached through ipv6_stub (it could be a module).
probe IPV6_STUBS net/ipv6_stubs.h -
# 7.x: dev_get_flags() renamed netif_get_flags().
probe NETIF_GET_FLAGS linux/netdevice.h 'netif_get_flags\('
# 7.x: dumpability is the task's exec state, no longer the mm's flags.
probe TASK_EXEC_STATE linux/sched/exec_state.h 'struct task_exec_state \{'
# 6.15: ib_core allocates a counter with the driver's size and has the driver initialise it
# (counter_init); binding and unbinding a QP name the port.
probe COUNTER_INIT rdma/ib_verbs.h '\(\*counter_init\)\('
probe COUNTER_BIND_QP_PORT rdma/ib_verbs.h '\(\*counter_bind_qp\)\(' 'u32 port' 2
[ "$report" = --report ] || echo
