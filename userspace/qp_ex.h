// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The extended post API of a QP (ibv_qp_ex: ibv_wr_start, the ibv_wr_*
// builders and setters, ibv_wr_complete / ibv_wr_abort). Each builder writes
// its WQE straight into the mapped SQ ring through the encoder post_send
// uses (qp.h); wr_complete publishes the batch and rings the doorbell only
// when the kernel set NEED_WAKEUP, as post_send does.
//
// Errors: the builders and setters return nothing, so the first error of a
// batch is kept and wr_complete returns it after discarding the whole batch
// (nothing of it is published): EINVAL for a setter without a WQE, too many
// SGEs or too much inline data, inline data on an RDMA READ, a UD WQE
// without wr_set_ud_addr or a QP not ready to send; ENOMEM for a full SQ.
#ifndef SRNIC_QP_EX_H
#define SRNIC_QP_EX_H

#include "qp.h"

#include <cstdint>

namespace srnic
{

// The send_ops_flags (IBV_QP_EX_WITH_*) a QP of this type may ask for: those
// whose builder srnic has and whose opcode the type's send opcode table
// (rc_send_opcode_supported, ud_send_opcode_supported) accepts.
[[nodiscard]] uint64_t supported_send_ops_flags(ibv_qp_type type) noexcept;

// Fills qp.vqp.qp_ex's function pointers: wr_start/complete/abort, the
// setters, and one builder per flag of send_ops_flags (which must be a
// subset of supported_send_ops_flags). Marks the QP as having an ibv_qp_ex.
void install_send_ops(Qp &qp, uint64_t send_ops_flags) noexcept;

} // namespace srnic

#endif // SRNIC_QP_EX_H
