// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The direct path's bookkeeping that needs no kernel: the MR registry the
// provider checks local SGEs against, the completions it queues ahead of the
// ring, and a window's bounds.
#include "cq.h"
#include "direct_path.h"
#include "mr_registry.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

namespace srnic::test
{
namespace
{

const std::byte *at(uintptr_t addr)
{
	return reinterpret_cast<const std::byte *>(addr);
}

TEST(MrRegistryTest, TranslatesOnlyInsideARegisteredMr)
{
	MrRegistry mrs;
	mrs.add(0x100, 0x10000, 0x2000, at(0x7000000));
	EXPECT_EQ(mrs.translate(0x100, 0x10000, 0x2000), at(0x7000000));
	EXPECT_EQ(mrs.translate(0x100, 0x11000, 0x10), at(0x7001000));
	EXPECT_EQ(mrs.translate(0x100, 0x12000, 0), at(0x7002000));
	EXPECT_EQ(mrs.translate(0x100, 0x11fff, 2), nullptr);  // past the end
	EXPECT_EQ(mrs.translate(0x100, 0xffff, 1), nullptr);   // before it
	EXPECT_EQ(mrs.translate(0x100, UINT64_MAX, 2), nullptr); // wraps
	EXPECT_EQ(mrs.translate(0x200, 0x10000, 1), nullptr);  // another lkey
	mrs.remove(0x100);
	EXPECT_EQ(mrs.translate(0x100, 0x10000, 1), nullptr);
	mrs.remove(0x100); // twice: nothing
}

// Random adds and removes against a std::map model: probing and
// backward-shift deletion keep every live key findable.
TEST(MrRegistryTest, MatchesAModelUnderChurn)
{
	MrRegistry mrs;
	std::map<uint32_t, uint64_t> model;
	std::mt19937 rng(7);
	for (int step = 0; step < 20000; ++step) {
		// Keys that collide often: few distinct values, spread out.
		const uint32_t key = (rng() % 300) << 8 | 0x5a;
		if (rng() % 3) {
			const uint64_t iova = uint64_t{rng()} << 12;
			mrs.add(key, iova, 4096, at(iova + 1));
			model[key] = iova;
		} else {
			mrs.remove(key);
			model.erase(key);
		}
		if (step % 97 == 0)
			for (uint32_t k = 0; k < 300; ++k) {
				const uint32_t lkey = k << 8 | 0x5a;
				const auto it = model.find(lkey);
				const std::byte *got = mrs.translate(
					lkey, it == model.end() ? 0 : it->second, 1);
				if (it == model.end())
					ASSERT_EQ(got, nullptr) << lkey;
				else
					ASSERT_EQ(got, at(it->second + 1)) << lkey;
			}
	}
}

srnic_cqe cqe_of(uint32_t qpn, uint64_t wr_id)
{
	srnic_cqe cqe = {};
	cqe.qp_num = qpn;
	cqe.wr_id = wr_id;
	return cqe;
}

TEST(DirectCompletionsTest, FifoBoundedAndDiscardsOneQpInOrder)
{
	DirectCompletions q;
	EXPECT_EQ(q.front(), nullptr);
	for (uint32_t i = 0; i < DirectCompletions::capacity; ++i) {
		ASSERT_FALSE(q.full());
		q.push(cqe_of(i % 2 ? 7 : 9, i));
	}
	EXPECT_TRUE(q.full());
	q.discard_qp(7);
	EXPECT_FALSE(q.full());
	for (uint64_t i = 0; i < DirectCompletions::capacity; i += 2) {
		ASSERT_NE(q.front(), nullptr);
		EXPECT_EQ(q.front()->wr_id, i);
		EXPECT_EQ(q.front()->qp_num, 9u);
		q.pop();
	}
	EXPECT_EQ(q.front(), nullptr);
	// Indexes keep running past the capacity.
	for (uint64_t i = 0; i < 3 * DirectCompletions::capacity; ++i) {
		q.push(cqe_of(1, i));
		ASSERT_EQ(q.front()->wr_id, i);
		q.pop();
	}
}

TEST(DirectWindowTest, RefusesAnMrOutsideItsMappingAndBoundsAccesses)
{
	srnic_direct_window_resp resp = {};
	resp.mmap_size = 8192;
	resp.page_offset = 100;
	resp.length = 8100; // 100 + 8100 > 8192
	DirectWindow w;
	EXPECT_EQ(w.map(-1, 1, false, resp), EPROTO);
	EXPECT_FALSE(w.serves(1, false, 0));
	EXPECT_TRUE(w.stale(0));

	// A memfd stands in for the uverbs fd.
	const int fd = memfd_create("direct_window_test", 0);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(ftruncate(fd, 8192), 0);
	resp.length = 4000;
	resp.iova = 0x5000;
	resp.gen = 3;
	ASSERT_EQ(w.map(fd, 1, false, resp), 0);
	close(fd);
	EXPECT_TRUE(w.serves(1, false, 3));
	EXPECT_FALSE(w.serves(1, true, 3)); // an R_Key's window serves no receive
	EXPECT_FALSE(w.serves(2, false, 3));
	EXPECT_FALSE(w.serves(1, false, 4));
	EXPECT_TRUE(w.stale(4));
	std::byte *base = w.at(0x5000, 4000);
	ASSERT_NE(base, nullptr);
	EXPECT_EQ(w.at(0x5000 + 3999, 1), base + 3999);
	EXPECT_EQ(w.at(0x5000 + 4000, 0), base + 4000);
	EXPECT_EQ(w.at(0x5000 + 4000, 1), nullptr);
	EXPECT_EQ(w.at(0x4fff, 1), nullptr);
	EXPECT_EQ(w.at(0x5000, UINT64_MAX), nullptr);
	base[3999] = std::byte{0x5a}; // mapped and writable
	DirectWindow moved = std::move(w);
	EXPECT_FALSE(w.serves(1, false, 3));
	EXPECT_EQ(moved.at(0x5000 + 3999, 1)[0], std::byte{0x5a});
}

TEST(DirectLoanTest, RefusesRingsOutsideTheMappingAndFindsBoth)
{
	constexpr uint32_t ctrl = 256;
	srnic_direct_loan_resp resp = {};
	resp.mmap_size = 8192;
	resp.rq_offset = 0;
	resp.rq_num_entries = 16;
	resp.rq_entry_size = 64; // a header and three SGEs
	resp.rq_max_sge = 3;
	resp.cq_offset = 4096;
	resp.cq_num_entries = 64; // 256 + 64 * 64 > 4096
	resp.dest_qpn = 0x22;
	resp.loan_id = 5;
	DirectLoan loan;
	EXPECT_EQ(loan.map(-1, ctrl, resp), EPROTO);
	resp.cq_num_entries = 32;
	resp.rq_max_sge = 4; // 16 + 4 * 16 > 64
	EXPECT_EQ(loan.map(-1, ctrl, resp), EPROTO);
	resp.rq_max_sge = 3;
	resp.loan_id = 0; // never a loan's id
	EXPECT_EQ(loan.map(-1, ctrl, resp), EPROTO);
	resp.loan_id = 5;
	EXPECT_FALSE(loan.mapped());

	const int fd = memfd_create("direct_loan_test", 0);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(ftruncate(fd, 8192), 0);
	ASSERT_EQ(loan.map(fd, ctrl, resp), 0);
	close(fd);
	ASSERT_TRUE(loan.mapped());
	EXPECT_EQ(loan.id(), 5u);
	EXPECT_EQ(loan.dest_qpn(), 0x22u);
	EXPECT_EQ(loan.rq_max_sge(), 3u);
	const RingView rq = loan.rq();
	const RingView cq = loan.cq();
	EXPECT_EQ(rq.num_entries(), 16u);
	EXPECT_EQ(cq.num_entries(), 32u);
	EXPECT_EQ(reinterpret_cast<std::byte *>(&cq.ctrl()) -
			  reinterpret_cast<std::byte *>(&rq.ctrl()),
		  4096);
	EXPECT_EQ(rq.entry(1) - rq.entry(0), 64);
	EXPECT_EQ(cq.entry(0) - reinterpret_cast<std::byte *>(&cq.ctrl()), ctrl);
	// Both rings are one shared mapping: a write through one view shows.
	store_release(cq.ctrl().producer, 7);
	EXPECT_EQ(load_acquire(loan.cq().ctrl().producer), 7u);
	loan.reset();
	EXPECT_FALSE(loan.mapped());
	EXPECT_EQ(loan.id(), 0u);
}

} // namespace
} // namespace srnic::test
