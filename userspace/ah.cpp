// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "ah.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *attr) noexcept
{
	std::unique_ptr<Ah> ah(new (std::nothrow) Ah{});
	if (!ah) {
		errno = ENOMEM;
		return nullptr;
	}

	CreateAhResp resp = {};
	// As in alloc_pd: the kernel's response struct ends in a flexible array
	// member, so CreateAhResp embeds its fixed part (same size, asserted).
	const int err = ibv_cmd_create_ah(pd, &ah->ibah, attr,
					  reinterpret_cast<ib_uverbs_create_ah_resp *>(&resp),
					  sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}

	ah->ah_num = resp.driver.ah_num;
	return &ah.release()->ibah;
}

int destroy_ah(ibv_ah *ibah) noexcept
{
	const int err = ibv_cmd_destroy_ah(ibah);
	if (err)
		return err;

	delete to_srnic_ah(ibah);
	return 0;
}

} // namespace srnic
