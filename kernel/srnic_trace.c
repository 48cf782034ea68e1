// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the tracepoints' definitions (kernel/srnic_trace.h).
 */

#define CREATE_TRACE_POINTS
#include "srnic_trace.h"

EXPORT_TRACEPOINT_SYMBOL_GPL(srnic_nak_send);
EXPORT_TRACEPOINT_SYMBOL_GPL(srnic_rate_change);
