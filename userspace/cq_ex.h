// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Extended CQs (ibv_create_cq_ex) and their poll API: ibv_start_poll,
// ibv_next_poll, ibv_end_poll and the ibv_wc_read_* readers, all over the
// mapped CQ ring through CqReader (queue.h) and the CQE decoding poll_cq
// uses (cq.h): no syscall.
//
// start_poll takes the CQ's lock and returns ENOENT (lock released) when
// there is no completion. next_poll consumes the current completion and
// returns ENOENT, still holding the lock, when there is no next one yet; it
// may be called again. end_poll consumes the current completion if any,
// hands the consumed slots back to the kernel and releases the lock.
#ifndef SRNIC_CQ_EX_H
#define SRNIC_CQ_EX_H

#include "cq.h"

#include <cstdint>

namespace srnic
{

// The wc_flags (IBV_WC_EX_WITH_*) srnic's CQEs can answer: every standard
// one, and tag matching's. Completion timestamps are not: the kernel does
// not stamp CQEs.
inline constexpr uint64_t supported_wc_flags =
	uint64_t{IBV_WC_STANDARD_FLAGS} | uint64_t{IBV_WC_EX_WITH_TM_INFO};

// Fills cq.vcq.cq_ex's poll functions and the readers wc_flags asks for
// (a subset of supported_wc_flags).
void install_cq_ex_readers(Cq &cq, uint64_t wc_flags) noexcept;

// The create_cq_ex verb; nullptr with errno set on failure (EOPNOTSUPP for
// wc_flags, flags or comp_mask bits srnic cannot honour).
[[nodiscard]] ibv_cq_ex *create_cq_ex(ibv_context *ibctx, ibv_cq_init_attr_ex *attr) noexcept;

} // namespace srnic

#endif // SRNIC_CQ_EX_H
