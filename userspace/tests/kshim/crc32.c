// SPDX-License-Identifier: GPL-2.0
/* crc32_le() for the userspace build of srnic's wire code (table driven). */
#include "srnic_kshim.h"

static uint32_t crc32_table[256];

static void crc32_init_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0xedb88320U : c >> 1;
		crc32_table[i] = c;
	}
}

uint32_t crc32_le(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!crc32_table[1])
		crc32_init_table();
	while (len--)
		crc = crc32_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}
