// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Address handles: create_ah and destroy_ah. The kernel checks the address
// vector (RoCE v2: a GRH with a RoCE v2 source GID), resolves the
// destination MAC and numbers the AH; a UD send WQE names it by that number.
#ifndef SRNIC_AH_H
#define SRNIC_AH_H

#include "verbs_driver_abi.h"

#include <rdma/srnic-abi.h>

#include <cstddef>
#include <cstdint>

namespace srnic
{

struct Ah {
	ibv_ah ibah;	 // first: libibverbs hands back &ibah
	uint32_t ah_num; // the kernel's AH number, for ud.ah_handle in WQEs
};

[[nodiscard]] inline Ah *to_srnic_ah(ibv_ah *ibah) noexcept
{
	static_assert(offsetof(Ah, ibah) == 0);
	return reinterpret_cast<Ah *>(ibah);
}

// create_ah carries no srnic request data, only a response.
struct CreateAhResp {
	ibv_create_ah_resp_core ibv_resp;
	srnic_create_ah_resp driver;
};
static_assert(sizeof(CreateAhResp) ==
		      sizeof(ibv_create_ah_resp_core) + sizeof(srnic_create_ah_resp),
	      "no padding between core and driver data");

// The create_ah verb; nullptr with errno set on failure (EINVAL for an
// address vector without a GRH or with a GID that is not RoCE v2).
[[nodiscard]] ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *attr) noexcept;

// The destroy_ah verb; the AH stays valid if the kernel refuses.
int destroy_ah(ibv_ah *ibah) noexcept;

} // namespace srnic

#endif // SRNIC_AH_H
