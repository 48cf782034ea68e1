// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The private libibverbs provider ABI that srnic uses, and nothing more.
//
// Distributions do not install rdma-core's libibverbs/driver.h and
// libibverbs/kern-abi.h, so these declarations are transcribed from the
// rdma-core sources of each version srnic supports. They describe structs
// that libibverbs allocates, reads or writes itself, so every layout must
// match the library exactly: abi/layouts.h pins each size and offset srnic
// depends on, per rdma-core version, and scripts/rdma-core-layout.py checks
// those numbers against an rdma-core source tree.
//
// libibverbs numbers this ABI (IBVERBS_PRIVATE_<N>: the symbol version of
// these functions, the registration function's name and the provider's file
// name, lib<name>-rdmav<N>.so), so a provider built for another one fails to
// load rather than corrupting memory. CMake reads N from the libibverbs it
// builds against and its rdma-core version from pkg-config, and defines:
//   SRNIC_IBVERBS_PABI     34 (rdma-core 44-59) or 65 (rdma-core 65)
//   SRNIC_RDMA_CORE_MAJOR  44, 56 or 65: the versions whose layouts were
//                          measured; any other fails the build (a port to
//                          make: see Documentation/platforms.rst).
// Between ABIs, what changed is marked below with SRNIC_IBVERBS_PABI.
#ifndef SRNIC_VERBS_DRIVER_ABI_H
#define SRNIC_VERBS_DRIVER_ABI_H

#if !defined(SRNIC_IBVERBS_PABI) || !defined(SRNIC_RDMA_CORE_MAJOR)
#error "SRNIC_IBVERBS_PABI and SRNIC_RDMA_CORE_MAJOR come from userspace/CMakeLists.txt"
#endif
#if SRNIC_IBVERBS_PABI != 34 && SRNIC_IBVERBS_PABI != 65
#error "no declarations for this libibverbs private ABI: see Documentation/platforms.rst"
#endif

#include <infiniband/verbs.h>
#include <linux/types.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

extern "C" {

// ---- Device matching and registration (driver.h) -------------------------

enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

// One row of a provider's match table; a row of all zeroes ends the table.
struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};

// ccan's intrusive list link, embedded in libibverbs' structs.
struct list_node {
	struct list_node *next;
	struct list_node *prev;
};

// An RDMA device found in sysfs, owned by libibverbs.
struct verbs_sysfs_dev {
	struct list_node entry;
	void *provider_data;
	const struct verbs_match_ent *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX]; // /sys/class/infiniband/<name>
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;
	struct timespec time_created;
};

struct verbs_device;

// What libibverbs keeps of a memory region. The provider allocates it
// (embedded first in its own MR struct); ibv_cmd_reg_mr fills every field, and
// libibverbs sets ibv_mr's context, pd, addr and length after reg_mr returns.
enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

// What a provider hands to verbs_register_driver_34.
struct verbs_device_ops {
	const char *name;

	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;

	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);

	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);

	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

// The provider allocates this (embedded first in its own device struct);
// libibverbs fills every field after alloc_device returns.
struct verbs_device {
	struct ibv_device device; // must be first
	const struct verbs_device_ops *ops;
	int refcount; // C11 atomic_int in libibverbs; only libibverbs touches it
	struct list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

// Every verb a provider may implement, sorted by name as in driver.h. A NULL
// entry leaves libibverbs' default in place, which fails with EOPNOTSUPP.
//
// rdma-core 65 (ABI 65) added 17 entries, in their alphabetical places.
#if SRNIC_IBVERBS_PABI >= 65
struct ibv_buf;
#endif
struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			 struct ibv_sge *sg_list, uint32_t num_sges);
#if SRNIC_IBVERBS_PABI >= 65
	void *(*alloc_buf)(struct ibv_pd *pd, size_t size, struct ibv_buf **buf);
#endif
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context, struct ibv_alloc_dm_attr *attr);
#if SRNIC_IBVERBS_PABI >= 65
	struct ibv_dmah *(*alloc_dmah)(struct ibv_context *context, struct ibv_dmah_init_attr *attr);
#endif
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *context,
					      struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	struct ibv_td *(*alloc_td)(struct ibv_context *context, struct ibv_td_init_attr *init_attr);
	void (*async_event)(struct ibv_context *context, struct ibv_async_event *event);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
#if SRNIC_IBVERBS_PABI >= 65
	struct ibv_comp_cntr *(*create_comp_cntr)(struct ibv_context *context,
						  struct ibv_comp_cntr_init_attr *attr);
#endif
	struct ibv_counters *(*create_counters)(struct ibv_context *context,
						struct ibv_counters_init_attr *init_attr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel, int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp, struct ibv_flow_attr *flow_attr);
	struct ibv_flow_action *(*create_flow_action_esp)(struct ibv_context *context,
							  struct ibv_flow_action_esp_attr *attr);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *qp_init_attr_ex);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
		struct ibv_context *context, struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *srq_init_attr_ex);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *wq_init_attr);
#if SRNIC_IBVERBS_PABI >= 65
	int (*dealloc_dmah)(struct ibv_dmah *dmah);
#endif
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*dealloc_td)(struct ibv_td *td);
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
#if SRNIC_IBVERBS_PABI >= 65
	int (*destroy_comp_cntr)(struct ibv_comp_cntr *comp_cntr);
#endif
	int (*destroy_counters)(struct ibv_counters *counters);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
#if SRNIC_IBVERBS_PABI >= 65
	int (*dm_export_dmabuf_fd)(struct ibv_dm *dm);
	void (*free_buf)(struct ibv_buf *buf);
#endif
	void (*free_context)(struct ibv_context *context);
	int (*free_dm)(struct ibv_dm *dm);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_dm *(*import_dm)(struct ibv_context *context, uint32_t dm_handle);
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context, uint32_t pd_handle);
#if SRNIC_IBVERBS_PABI >= 65
	int (*inc_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t amount);
	int (*inc_err_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t amount);
#endif
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context, struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *xrcd_init_attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
			     struct ibv_recv_wr **bad_recv_wr);
#if SRNIC_IBVERBS_PABI >= 65
	int (*qp_attach_comp_cntr)(struct ibv_qp *qp, struct ibv_comp_cntr *comp_cntr,
				   struct ibv_qp_attach_comp_cntr_attr *attr);
	int (*query_comp_cntr_caps)(struct ibv_context *context, struct ibv_comp_cntr_caps *caps,
				    size_t caps_size);
#endif
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
#if SRNIC_IBVERBS_PABI >= 65
	int (*query_port_speed)(struct ibv_context *context, uint32_t port_num, uint64_t *speed);
#endif
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags);
	int (*query_rt_values)(struct ibv_context *context, struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
#if SRNIC_IBVERBS_PABI >= 65
	int (*read_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t *value);
#endif
	int (*read_counters)(struct ibv_counters *counters, uint64_t *counters_value,
			     uint32_t ncounters, uint32_t flags);
#if SRNIC_IBVERBS_PABI >= 65
	int (*read_err_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t *value);
#endif
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset,
				    size_t length, unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				 int access);
#if SRNIC_IBVERBS_PABI >= 65
	struct ibv_mr *(*reg_mr_ex)(struct ibv_pd *pd, struct ibv_mr_init_attr *mr_init_attr);
#endif
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
#if SRNIC_IBVERBS_PABI >= 65
	int (*set_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t value);
#endif
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
#if SRNIC_IBVERBS_PABI >= 65
	int (*set_err_comp_cntr)(struct ibv_comp_cntr *comp_cntr, uint64_t value);
#endif
	void (*unimport_dm)(struct ibv_dm *dm);
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

// The number is IBVERBS_PABI_VERSION, wired into the name so a provider built
// for another private ABI fails to load instead of corrupting memory.
#if SRNIC_IBVERBS_PABI == 34
void verbs_register_driver_34(const struct verbs_device_ops *ops);
#define srnic_verbs_register_driver verbs_register_driver_34
#else
void verbs_register_driver_65(const struct verbs_device_ops *ops);
#define srnic_verbs_register_driver verbs_register_driver_65
#endif

// ---- Context lifetime (driver.h) -----------------------------------------

// Allocates alloc_size zeroed bytes with calloc(), initialises the
// verbs_context found context_offset bytes into them and returns the start.
// context_offset is an offset disguised as a pointer (driver.h computes it as
// &((T *)NULL)->member). On failure it closes cmd_fd and returns NULL with
// errno set. The memory must be released with verbs_uninit_context + free().
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
// Releases what verbs_init_context acquired, including cmd_fd and async_fd.
void verbs_uninit_context(struct verbs_context *context);
// Installs the non-NULL entries of ops; the others keep their defaults.
void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops);

enum {
	VERBS_LOG_LEVEL_NONE,
	VERBS_LOG_ERR,
	VERBS_LOG_WARN,
	VERBS_LOG_INFO,
	VERBS_LOG_DEBUG,
};

// Writes to libibverbs' log (VERBS_LOG_LEVEL / VERBS_LOG_FILE environment).
void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

// ---- Command buffers (kern-abi.h) ----------------------------------------
//
// libibverbs' request structs are the uverbs write() header followed by the
// core payload of the kernel's struct, without its flexible driver_data[]
// member (C++ forbids embedding a struct with a flexible array member before
// other members, which is how a provider appends its own payload). A
// provider's driver data follows immediately; libibverbs sends
// cmd_size - sizeof(core) bytes of it as the kernel's udata input, and
// resp_size - sizeof(core response) bytes as udata output.

struct ibv_get_context {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
};

struct ibv_alloc_pd {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
};

struct ibv_query_port {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__u8 port_num;
	__u8 reserved[7];
};

struct ibv_reg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__aligned_u64 start;
	__aligned_u64 length;
	__aligned_u64 hca_va;
	__u32 pd_handle;
	__u32 access_flags;
};

// The fixed part of struct ib_uverbs_get_context_resp. alignas keeps the
// 8-byte alignment its __aligned_u64 driver_data[] gives the kernel's struct.
struct alignas(8) ibv_get_context_resp_core {
	__u32 async_fd;
	__u32 num_comp_vectors;
};

// The fixed part of struct ib_uverbs_alloc_pd_resp.
struct ibv_alloc_pd_resp_core {
	__u32 pd_handle;
};

#if SRNIC_IBVERBS_PABI == 34
int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp, size_t resp_size);
#else
// fd_arr: file descriptors to pass to the kernel's GET_CONTEXT (NULL: none).
int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd, size_t cmd_size,
			struct ibv_fd_arr *fd_arr, struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
#endif
// GET_CONTEXT with no file descriptors passed, whatever the ABI.
static inline int srnic_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd,
					size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
					size_t resp_size)
{
#if SRNIC_IBVERBS_PABI == 34
	return ibv_cmd_get_context(context, cmd, cmd_size, resp, resp_size);
#else
	return ibv_cmd_get_context(context, cmd, cmd_size, nullptr, resp, resp_size);
#endif
}
// libibverbs' ioctl command buffer (cmd_ioctl.h), opaque here: srnic only
// passes nullptr for the "driver"/"link" of extra driver attributes (see
// uverbs_ioctl.h for the methods that carry srnic's).
struct ibv_command_buffer;

// UVERBS_METHOD_QUERY_CONTEXT: num_comp_vectors and the device's core
// support; driver may be NULL, as srnic passes it. Returns 0 or a positive
// errno.
int ibv_cmd_query_context(struct ibv_context *context, struct ibv_command_buffer *driver);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
		       size_t cmd_size);
#if SRNIC_IBVERBS_PABI >= 65
// UVERBS_METHOD_QUERY_PORT_SPEED: the port's rate in 100 Mb/s units.
int ibv_cmd_query_port_speed(struct ibv_context *context, uint32_t port_num, uint64_t *speed);
#endif
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, struct ibv_alloc_pd *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
// Fills cmd and vmr; returns 0 or a positive errno.
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
		   struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
// Returns 0 or a positive errno; 0 also when the kernel already destroyed
// the MR (device removed).
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
// UVERBS_METHOD_ADVISE_MR; returns 0 or a positive errno.
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		      struct ibv_sge *sg_list, uint32_t num_sge);

struct ibv_alloc_mw {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__u32 pd_handle;
	__u8 mw_type;
	__u8 reserved[3];
};

// Fills cmd and mw (context, pd, rkey, handle, type); returns 0 or a
// positive errno.
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
		     struct ibv_alloc_mw *cmd, size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);
// Returns 0 or a positive errno.
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);

// UVERBS_METHOD_QUERY_MR on mr_handle: fills vmr's keys and length, its
// handle, context and pd (addr NULL), type IBV_MR_TYPE_IMPORTED_MR.
// Returns 0 or a positive errno.
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle);

struct ibv_rereg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_rereg_mr)];
};

// Fills cmd, updates vmr's keys (and context with IBV_REREG_MR_CHANGE_PD);
// returns 0 or a positive errno.
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length,
		     uint64_t hca_va, int access, struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz);

// ---- Completion queues and queue pairs (driver.h, kern-abi.h) ------------

// libibverbs' wrappers of a provider's CQ and QP (driver.h); the provider
// embeds them first in its own objects.
struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

struct verbs_xrcd;

// verbs_qp.comp_mask: VERBS_QP_EX says qp_ex is filled in, so that
// ibv_qp_to_qp_ex() hands it out.
enum verbs_qp_mask {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,
};

struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

// Command buffers whose core payload libibverbs fills entirely: srnic only
// needs their size and alignment, and appends its driver data after them.
struct ibv_create_cq {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_create_cq)];
};

// The extended create_cq command (struct ex_hdr in kern-abi.h: the write()
// header and the extended one).
struct ibv_create_cq_ex {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_ex_create_cq)];
};

struct ibv_create_qp {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_create_qp)];
};

// The extended create_qp command (indirection tables: hash QPs), and the
// work queue commands, all extended.
struct ibv_create_qp_ex {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_ex_create_qp)];
};

struct ibv_create_wq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_ex_create_wq)];
};

struct ibv_modify_wq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_ex_modify_wq)];
};

struct ibv_modify_qp {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_modify_qp)];
};

// The extended modify_qp command, which alone carries IBV_QP_RATE_LIMIT.
struct ibv_modify_qp_ex {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_ex_modify_qp)];
};

struct ibv_query_qp {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_query_qp)];
};

struct ibv_resize_cq {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_resize_cq)];
};

// The fixed parts of the kernel's responses, which end in driver_data[].
// struct ib_uverbs_resize_cq_resp's:
struct alignas(8) ibv_resize_cq_resp_core {
	__u32 cqe;
	__u32 reserved;
};

struct alignas(8) ibv_create_cq_resp_core {
	__u32 cq_handle;
	__u32 cqe;
};

// The fixed part of struct ib_uverbs_ex_create_cq_resp.
struct alignas(8) ibv_create_cq_ex_resp_core {
	struct ibv_create_cq_resp_core base;
	__u32 comp_mask;
	__u32 response_length;
};

struct ibv_create_qp_resp_core {
	__u32 qp_handle;
	__u32 qpn;
	__u32 max_send_wr;
	__u32 max_recv_wr;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_inline_data;
	__u32 reserved;
};

int ibv_cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
		      int comp_vector, struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp, size_t resp_size);
// Returns 0 or a positive errno. cmd_flags: libibverbs' CREATE_CQ_CMD_FLAGS_*
// (srnic passes 0). ABI 65 added prov_attr, a CQ buffer the provider
// allocated (NULL: none; the kernel allocates srnic's rings).
#if SRNIC_IBVERBS_PABI == 34
int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
			 uint32_t cmd_flags);
#else
struct verbs_create_cq_prov_attr;
int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_create_cq_prov_attr *prov_attr, struct verbs_cq *cq,
			 struct ibv_create_cq_ex *cmd, size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
			 uint32_t cmd_flags);
#endif
static inline int srnic_cmd_create_cq_ex(struct ibv_context *context,
					 const struct ibv_cq_init_attr_ex *cq_attr,
					 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
					 size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
					 size_t resp_size)
{
#if SRNIC_IBVERBS_PABI == 34
	return ibv_cmd_create_cq_ex(context, cq_attr, cq, cmd, cmd_size, resp, resp_size, 0);
#else
	return ibv_cmd_create_cq_ex(context, cq_attr, nullptr, cq, cmd, cmd_size, resp, resp_size,
				    0);
#endif
}
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
// Returns 0 or a positive errno; sets cq->cqe from the response.
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd, size_t cmd_size,
		      struct ib_uverbs_resize_cq_resp *resp, size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd,
			 size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
		     struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd,
		     size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		      struct ibv_modify_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			 struct ibv_modify_qp_ex *cmd, size_t cmd_size,
			 struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
// rdma-core 64 added a driver command-buffer chain (PABI 34 has none).
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd,
			  size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size
#if SRNIC_IBVERBS_PABI >= 65
			  ,
			  struct ibv_command_buffer *driver
#endif
);
// Work queues and indirection tables (RSS); 0 or a positive errno.
int ibv_cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr,
		      struct ibv_wq *wq, struct ibv_create_wq *cmd, size_t cmd_size,
		      struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size);
int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, struct ibv_modify_wq *cmd,
		      size_t cmd_size);
int ibv_cmd_destroy_wq(struct ibv_wq *wq);
int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
				 struct ibv_rwq_ind_table_init_attr *init_attr,
				 struct ibv_rwq_ind_table *rwq_ind_table,
				 struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
				 size_t resp_size);
int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table);
// Flow steering: the specs converted to the kernel's; 0 or a positive errno.
int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
			struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size);
int ibv_cmd_destroy_flow(struct ibv_flow *flow_id);
// ---- Shared receive queues (driver.h, kern-abi.h) -------------------------

// What libibverbs keeps of an SRQ; the provider embeds it first in its own.
// ibv_cmd_create_srq_ex fills srq_type (and, for XRC, xrcd and srq_num).
struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

struct ibv_create_xsrq {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_create_xsrq)];
};

struct ibv_modify_srq {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_modify_srq)];
};

struct ibv_query_srq {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_query_srq)];
};

// The fixed part of struct ib_uverbs_create_srq_resp, before driver_data[].
struct ibv_create_srq_resp_core {
	__u32 srq_handle;
	__u32 max_wr;
	__u32 max_sge;
	__u32 srqn;
};

// All return 0 or a positive errno.
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd,
			  size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask,
		       struct ibv_modify_srq *cmd, size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
// ---- XRC domains and shared XRC_TGT QPs (driver.h, kern-abi.h) -----------

// What libibverbs keeps of an XRC domain; the provider allocates it.
struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

struct ibv_open_xrcd {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_open_xrcd)];
};

struct ibv_open_qp {
	struct ib_uverbs_cmd_hdr hdr;
	alignas(8) __u8 core_payload[sizeof(struct ib_uverbs_open_qp)];
};

// All return 0 or a positive errno.
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size,
		      struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd,
		      size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size);
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz,
		    struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp, size_t resp_size);

// With wr == NULL: a doorbell, as ibv_cmd_post_recv (srnic never asks for it).
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);

// ---- Address handles (driver.h) ------------------------------------------

// The fixed part of struct ib_uverbs_create_ah_resp; the command itself
// (struct ibv_create_ah) is built by libibverbs and carries no driver data.
struct ibv_create_ah_resp_core {
	__u32 ah_handle;
};

// Both return 0 or a positive errno; fill ah->handle and ah->context.
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);

// UD multicast: the uverbs ATTACH_MCAST/DETACH_MCAST commands, used directly
// as srnic's attach_mcast/detach_mcast (0 or a positive errno).
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

// ---- Device memory (driver.h) --------------------------------------------

// What libibverbs keeps of a DM; the provider embeds it first in its own and
// fills it (srnic allocates with its own ioctl, see dm.cpp): handle is the
// kernel's object handle, also copied to dm.handle.
struct verbs_dm {
	struct ibv_dm dm;
	uint32_t handle;
};

// Both return 0 or a positive errno. reg_dm_mr fails with EINVAL without
// IBV_ACCESS_ZERO_BASED; it fills vmr (addr = NULL: the MR is zero based).
int ibv_cmd_free_dm(struct verbs_dm *dm);
int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset, size_t length,
		      unsigned int access, struct verbs_mr *vmr, struct ibv_command_buffer *link);

// The uverbs POST_SEND/POST_RECV write commands; with wr == NULL they carry
// no work request, which srnic's kernel treats as a doorbell.
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

} // extern "C"

// The sizes and offsets of all of the above, per rdma-core version.
#include "abi/layouts.h"

#endif // SRNIC_VERBS_DRIVER_ABI_H
