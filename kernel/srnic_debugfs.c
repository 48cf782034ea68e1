// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: the debugfs directories, /sys/kernel/debug/srnic/link<N>/ per
 * device, which hold the packet fault injector's files (srnic_fault.c).
 */

#include <linux/debugfs.h>

#include "srnic.h"

static struct dentry *srnic_debugfs_root;

/**
 * srnic_debugfs_add_dev() - create a device's debugfs directory
 * @sdev: a device being created (link_index assigned)
 *
 * debugfs failures are not errors: the device works without it.
 */
void srnic_debugfs_add_dev(struct srnic_dev *sdev)
{
	char name[24];

	snprintf(name, sizeof(name), "link%d", sdev->link_index);
	sdev->debugfs = debugfs_create_dir(name, srnic_debugfs_root);
}

/**
 * srnic_debugfs_remove_dev() - remove a device's debugfs directory
 * @sdev: the device
 */
void srnic_debugfs_remove_dev(struct srnic_dev *sdev)
{
	debugfs_remove(sdev->debugfs);
	sdev->debugfs = NULL;
}

void srnic_debugfs_init(void)
{
	srnic_debugfs_root = debugfs_create_dir(SRNIC_DRIVER_NAME, NULL);
}

void srnic_debugfs_exit(void)
{
	debugfs_remove(srnic_debugfs_root);
}
