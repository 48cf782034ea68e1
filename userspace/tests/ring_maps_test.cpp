// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RingMaps and RingMapping over a memfd standing in for the uverbs fd: rings
// of one shared mapping see the same memory, the mapping lives as long as
// its last ring, and descriptors that place a ring badly are refused.
#include "ring_mapping.h"
#include "ring_maps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace srnic::test
{
namespace
{

constexpr uint32_t kCtrl = 192;

class Memfd
{
    public:
	explicit Memfd(size_t size) : fd_(memfd_create("ring_maps_test", 0))
	{
		if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(size)) != 0) {
			close(fd_);
			fd_ = -1;
		}
	}
	~Memfd()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	[[nodiscard]] int fd() const { return fd_; }

    private:
	int fd_;
};

size_t page_size()
{
	return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Whether the page at addr is mapped in this process.
bool is_mapped(const void *addr)
{
	unsigned char vec;
	return mincore(const_cast<void *>(addr), page_size(), &vec) == 0;
}

TEST(RingMapsTest, OneMappingPerOffsetUntilTheLastRef)
{
	const size_t chunk = 8 * page_size();
	Memfd memfd(2 * chunk);
	ASSERT_GE(memfd.fd(), 0);
	RingMaps maps;
	RingMaps::Ref a, b, c;
	ASSERT_EQ(maps.acquire(memfd.fd(), 0, chunk, a), 0);
	ASSERT_EQ(maps.acquire(memfd.fd(), 0, chunk, b), 0);
	EXPECT_EQ(a.data(), b.data());
	EXPECT_EQ(maps.count(), 1u);
	// The same offset with another size: the kernel contradicting itself.
	EXPECT_EQ(maps.acquire(memfd.fd(), 0, chunk / 2, c), EPROTO);
	EXPECT_EQ(c.data(), nullptr);
	ASSERT_EQ(maps.acquire(memfd.fd(), chunk, chunk, c), 0);
	EXPECT_NE(c.data(), a.data());
	EXPECT_EQ(maps.count(), 2u);

	std::byte *first = a.data();
	first[chunk - 1] = std::byte{0x5a};
	a.reset();
	ASSERT_TRUE(is_mapped(first)); // b still holds it
	EXPECT_EQ(b.data()[chunk - 1], std::byte{0x5a});
	RingMaps::Ref moved = std::move(b);
	EXPECT_EQ(b.data(), nullptr);
	EXPECT_EQ(moved.data(), first);
	moved.reset();
	EXPECT_FALSE(is_mapped(first));
	EXPECT_EQ(maps.count(), 1u);
	c.reset();
	EXPECT_EQ(maps.count(), 0u);
	// A mapping that fails (beyond the memfd's end is fine for mmap, a
	// bad fd is not) leaves nothing behind.
	EXPECT_EQ(maps.acquire(-1, 0, chunk, a), EBADF);
	EXPECT_EQ(maps.count(), 0u);
}

// Hundreds of chunks, released in random order: the table grows, and every
// mapping still held stays findable after the others' removal.
TEST(RingMapsTest, ManyChunksStayFindableAsOthersGo)
{
	constexpr size_t kChunks = 300;
	const size_t page = page_size();
	Memfd memfd(kChunks * page);
	ASSERT_GE(memfd.fd(), 0);
	RingMaps maps;
	std::vector<RingMaps::Ref> refs(kChunks);
	for (size_t i = 0; i < kChunks; i++) {
		ASSERT_EQ(maps.acquire(memfd.fd(), i * page, page, refs[i]), 0);
		*reinterpret_cast<size_t *>(refs[i].data()) = i;
	}
	EXPECT_EQ(maps.count(), kChunks);
	std::vector<size_t> order(kChunks);
	for (size_t i = 0; i < kChunks; i++)
		order[i] = i;
	std::shuffle(order.begin(), order.end(), std::mt19937(23));
	for (size_t n = 0; n < kChunks; n++) {
		refs[order[n]].reset();
		// Every 16th release, check all those left: a second reference
		// must find the existing mapping, not map the offset again.
		if (n % 16 != 0)
			continue;
		for (size_t m = n + 1; m < kChunks; m++) {
			const size_t i = order[m];
			RingMaps::Ref again;
			ASSERT_EQ(maps.acquire(memfd.fd(), i * page, page, again), 0);
			ASSERT_EQ(again.data(), refs[i].data()) << "chunk " << i;
			ASSERT_EQ(*reinterpret_cast<size_t *>(again.data()), i);
		}
		EXPECT_EQ(maps.count(), kChunks - n - 1);
	}
	EXPECT_EQ(maps.count(), 0u);
}

srnic_queue_desc shared_desc(uint32_t mmap_size, uint32_t ring_offset)
{
	srnic_queue_desc d = {};
	d.mmap_offset = 0;
	d.mmap_size = mmap_size;
	d.num_entries = 16;
	d.entry_size = 128;
	d.ring_offset = ring_offset;
	d.flags = SRNIC_QUEUE_DESC_SHARED;
	return d;
}

// One chunk of eight pages, as the kernel's ring arena would hand out, and
// the size of an SQ of 16 WQEs of 128 bytes in it.
class RingMappingTest : public ::testing::Test
{
    protected:
	void SetUp() override { ASSERT_GE(memfd.fd(), 0); }

	const uint32_t chunk = static_cast<uint32_t>(8 * page_size());
	const uint32_t ring = kCtrl + 16 * 128;
	Memfd memfd{chunk};
	RingMaps maps;
};

TEST_F(RingMappingTest, RingsOfOneChunkShareItsMemory)
{
	RingMapping first, second;
	ASSERT_EQ(first.map(maps, memfd.fd(), shared_desc(chunk, 0), kCtrl, 64), 0);
	ASSERT_EQ(second.map(maps, memfd.fd(), shared_desc(chunk, ring), kCtrl, 64), 0);
	EXPECT_EQ(maps.count(), 1u);
	// The second ring starts where the first one ends.
	EXPECT_EQ(reinterpret_cast<std::byte *>(&second.view().ctrl()),
		  first.view().entry(15) + 128);
	second.view().entry(0)[0] = std::byte{0x77};
	first.reset();
	EXPECT_TRUE(second.mapped());
	EXPECT_EQ(second.view().entry(0)[0], std::byte{0x77});
	RingMapping moved = std::move(second);
	EXPECT_FALSE(second.mapped());
	EXPECT_TRUE(moved.mapped());
	moved.reset();
	EXPECT_EQ(maps.count(), 0u);
}

TEST_F(RingMappingTest, RefusesMisplacedRings)
{
	RingMapping r;
	srnic_queue_desc d = shared_desc(chunk, chunk - ring);
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), 0); // the chunk's last bytes
	d.ring_offset = chunk - ring + 64;		      // past its end
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d.ring_offset = 32; // not on a cache line
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d.ring_offset = chunk; // at the end, and wrapping must not help
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d = shared_desc(chunk, 0);
	d.flags |= 1u << 7; // a flag this provider does not know
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d = shared_desc(chunk, 0);
	d.reserved = 1;
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d = shared_desc(chunk, 64);
	d.flags = 0; // a mapping of its own starts with the ring
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), EPROTO);
	d.ring_offset = 0;
	EXPECT_EQ(r.map(maps, memfd.fd(), d, kCtrl, 64), 0);
	EXPECT_TRUE(r.mapped());
	EXPECT_EQ(maps.count(), 0u); // not through the shared mappings
	EXPECT_FALSE(r.mapped() && maps.count());
}

} // namespace
} // namespace srnic::test
