// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "xrcd.h"

#include <cerrno>
#include <memory>
#include <new>

namespace srnic
{

ibv_xrcd *open_xrcd(ibv_context *ibctx, ibv_xrcd_init_attr *attr) noexcept
{
	std::unique_ptr<verbs_xrcd> xrcd(new (std::nothrow) verbs_xrcd{});
	if (!xrcd) {
		errno = ENOMEM;
		return nullptr;
	}
	struct ibv_open_xrcd cmd = {};
	ib_uverbs_open_xrcd_resp resp = {};
	// libibverbs checks the attribute mask and the fd/oflags pair.
	const int err = ibv_cmd_open_xrcd(ibctx, xrcd.get(), sizeof(*xrcd), attr, &cmd, sizeof(cmd),
					  &resp, sizeof(resp));
	if (err) {
		errno = err;
		return nullptr;
	}
	return &xrcd.release()->xrcd;
}

int close_xrcd(ibv_xrcd *ibxrcd) noexcept
{
	static_assert(offsetof(verbs_xrcd, xrcd) == 0);
	auto *xrcd = reinterpret_cast<verbs_xrcd *>(ibxrcd);
	const int err = ibv_cmd_close_xrcd(xrcd);
	if (err)
		return err;
	delete xrcd;
	return 0;
}

} // namespace srnic
