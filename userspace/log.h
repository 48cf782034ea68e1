// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Error reporting through libibverbs' log, as rdma-core's verbs_err() does:
// silent unless the user sets VERBS_LOG_LEVEL, and errno is preserved so a
// message never changes what the failing verb reports.
#ifndef SRNIC_LOG_H
#define SRNIC_LOG_H

#include "verbs_driver_abi.h"

#include <cerrno>

// A macro only for __func__ and __LINE__ at the call site.
#define srnic_err(vctx, format, ...)                                                               \
	do {                                                                                       \
		const int srnic_saved_errno = errno;                                               \
		__verbs_log((vctx), VERBS_LOG_ERR, "%s: %s:%d: " format,                           \
			    (vctx)->context.device->name, __func__,                                \
			    __LINE__ __VA_OPT__(, ) __VA_ARGS__);                                  \
		errno = srnic_saved_errno;                                                         \
	} while (0)

#endif // SRNIC_LOG_H
