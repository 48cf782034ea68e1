// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// CqReader against a simulated kernel writing CQEs with the owner/phase
// protocol of srnic-abi.h.
#include "fake_ring.h"
#include "queue.h"

#include <gtest/gtest.h>

#include <vector>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace srnic::test
{
namespace
{

constexpr uint32_t kEntries = 4;

// Polls one completion and hands its slot back; nullopt when there is none.
std::optional<uint64_t> poll_one(CqReader &reader)
{
	const srnic_cqe *cqe = reader.check_owner_then_acquire_cqe();
	if (!cqe)
		return std::nullopt;
	const uint64_t wr_id = cqe->wr_id;
	reader.consume_cqe();
	reader.release_consumed();
	return wr_id;
}

class CqReaderTest : public ::testing::Test
{
    protected:
	void SetUp() override { ASSERT_TRUE(memory_.valid()); }

	FakeRingMemory memory_{kEntries, sizeof(srnic_cqe)};
};

TEST(CqeOwnerPhase, FollowsTheLapParity)
{
	// Even laps have phase 1, odd laps 2: never 0, so a zero-filled ring
	// holds nothing on any lap.
	for (uint32_t i = 0; i < 4; ++i)
		EXPECT_EQ(cqe_owner_phase(i, 4), 1) << i;
	for (uint32_t i = 4; i < 8; ++i)
		EXPECT_EQ(cqe_owner_phase(i, 4), 2) << i;
	EXPECT_EQ(cqe_owner_phase(8, 4), 1);
	// Laps keep alternating through the 2^32 wrap, for any ring size.
	for (uint32_t entries : {1u, 2u, 4u, 1024u, 1u << 31}) {
		EXPECT_NE(cqe_owner_phase(0xffffffffu, entries), cqe_owner_phase(0, entries))
			<< entries;
		EXPECT_EQ(cqe_owner_phase(0u - entries, entries), 2) << entries;
	}
}

TEST_F(CqReaderTest, ZeroFilledRingHoldsNoCompletion)
{
	CqReader reader(memory_.view());
	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), nullptr);
}

// After the device is removed, ib_core maps the zero page where the ring
// was: on an odd lap as on an even one, that must read as "no completion".
TEST_F(CqReaderTest, ZeroedRingHoldsNoCompletionOnAnOddLap)
{
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	for (uint32_t i = 0; i < kEntries; ++i) {
		ASSERT_TRUE(kernel.complete(i, 8));
		ASSERT_EQ(poll_one(reader), std::optional<uint64_t>(i));
	}
	RingView ring = memory_.view();
	for (uint32_t i = 0; i < kEntries; ++i)
		std::memset(ring.entry(i), 0, sizeof(srnic_cqe));
	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), nullptr);
}

TEST_F(CqReaderTest, ReadsACompletionOnceWithItsBody)
{
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	ASSERT_TRUE(kernel.complete(0x1234, 512));
	const srnic_cqe *cqe = reader.check_owner_then_acquire_cqe();
	ASSERT_NE(cqe, nullptr);
	EXPECT_EQ(cqe->wr_id, 0x1234u);
	EXPECT_EQ(cqe->byte_len, 512u);
	EXPECT_EQ(cqe->qp_num, 7u);
	// Not consumed yet: polling again sees the same one.
	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), cqe);

	reader.consume_cqe();
	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), nullptr);
}

TEST_F(CqReaderTest, StaleEntriesOfThePreviousLapAreNotReread)
{
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	for (uint64_t lap = 0; lap < 5; ++lap) {
		for (uint64_t i = 0; i < kEntries; ++i)
			ASSERT_TRUE(kernel.complete(lap * kEntries + i));
		for (uint64_t i = 0; i < kEntries; ++i)
			ASSERT_EQ(poll_one(reader), lap * kEntries + i);
		// Every slot still holds this lap's CQE, but none is new.
		EXPECT_EQ(poll_one(reader), std::nullopt) << "lap " << lap;
	}
}

TEST_F(CqReaderTest, KernelCannotOverrunUnreleasedCompletions)
{
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	for (uint64_t i = 0; i < kEntries; ++i)
		ASSERT_TRUE(kernel.complete(i));
	EXPECT_FALSE(kernel.complete(kEntries));

	// Consumed but not released: the kernel must still wait.
	ASSERT_NE(reader.check_owner_then_acquire_cqe(), nullptr);
	reader.consume_cqe();
	EXPECT_FALSE(kernel.complete(kEntries));

	reader.release_consumed();
	EXPECT_EQ(memory_.ctrl().consumer, 1u);
	EXPECT_TRUE(kernel.complete(kEntries));
	for (uint64_t i = 1; i <= kEntries; ++i)
		EXPECT_EQ(poll_one(reader), i);
	EXPECT_EQ(poll_one(reader), std::nullopt);
}

TEST_F(CqReaderTest, InterleavedCompletionsAcrossLaps)
{
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	uint64_t written = 0;
	uint64_t read = 0;
	for (int round = 0; round < 50; ++round) {
		for (int i = 0; i < 1 + round % 3 && kernel.complete(written); ++i)
			++written;
		for (int i = 0; i < 1 + round % 2; ++i) {
			const std::optional<uint64_t> wr_id = poll_one(reader);
			if (!wr_id)
				break;
			ASSERT_EQ(*wr_id, read++);
		}
	}
	while (const std::optional<uint64_t> wr_id = poll_one(reader))
		ASSERT_EQ(*wr_id, read++);
	EXPECT_EQ(read, written);
	EXPECT_GT(written, 10 * kEntries);
}

TEST_F(CqReaderTest, PhaseStaysRightAcrossTheIndexWrap)
{
	const uint32_t start = 0u - 2 * kEntries + 1; // two laps and a bit before 2^32
	FakeKernelCq::fast_forward(memory_.view(), start);
	FakeKernelCq kernel(memory_.view());
	CqReader reader(memory_.view());

	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), nullptr);
	for (uint64_t wr_id = 0; wr_id < 4 * kEntries; ++wr_id) {
		ASSERT_TRUE(kernel.complete(wr_id));
		ASSERT_EQ(poll_one(reader), wr_id);
		ASSERT_EQ(poll_one(reader), std::nullopt);
	}
	EXPECT_LT(memory_.ctrl().consumer, start) << "the index wrapped";
}

// The kernel on another thread: every completion arrives once, in order, with
// the body the kernel wrote before flipping the owner byte. A broken protocol
// must fail the test, not hang it: both sides give up when it stalls
// (StallDeadline).
TEST_F(CqReaderTest, ConcurrentKernelAndReaderAgree)
{
	constexpr uint64_t kCount = 200000;
	StallDeadline deadline;
	std::atomic<bool> give_up = false;

	std::thread kernel_thread([&] {
		FakeKernelCq kernel(memory_.view());
		for (uint64_t wr_id = 0;
		     wr_id < kCount && !give_up.load(std::memory_order_relaxed);) {
			if (kernel.complete(wr_id, static_cast<uint32_t>(wr_id * 3)))
				++wr_id;
			else
				std::this_thread::yield();
		}
	});

	CqReader reader(memory_.view());
	uint64_t expected = 0;
	uint64_t mismatches = 0;
	while (expected < kCount) {
		const srnic_cqe *cqe = reader.check_owner_then_acquire_cqe();
		if (!cqe) {
			if (deadline.passed())
				break;
			std::this_thread::yield();
			continue;
		}
		mismatches += cqe->wr_id != expected ||
			      cqe->byte_len != static_cast<uint32_t>(expected * 3);
		++expected;
		deadline.progress();
		reader.consume_cqe();
		reader.release_consumed();
	}
	give_up = true;
	kernel_thread.join();
	EXPECT_EQ(expected, kCount) << "stalled";
	EXPECT_EQ(mismatches, 0u);
	EXPECT_EQ(reader.check_owner_then_acquire_cqe(), nullptr);
}

} // namespace
} // namespace srnic::test

namespace srnic::test
{
namespace
{

// A QP reset drops its unpolled completions and keeps the others in order,
// across a lap boundary, with the kernel writing more afterwards.
TEST(CqReaderDiscard, DropsOneQpsCompletionsKeepsTheRestInOrder)
{
	constexpr uint32_t entries = 8;
	FakeRingMemory memory(entries, sizeof(srnic_cqe));
	ASSERT_TRUE(memory.valid());
	FakeKernelCq kernel(memory.view());
	CqReader reader(memory.view());

	auto cqe_of = [](uint64_t wr_id, uint32_t qpn) {
		srnic_cqe c = {};
		c.wr_id = wr_id;
		c.qp_num = qpn;
		return c;
	};
	// Advance 5 into the first lap, so the kept CQEs straddle the wrap.
	for (uint64_t i = 0; i < 5; ++i)
		ASSERT_TRUE(kernel.complete(cqe_of(i, 1)));
	for (int i = 0; i < 5; ++i) {
		ASSERT_NE(reader.check_owner_then_acquire_cqe(), nullptr);
		reader.consume_cqe();
	}
	reader.release_consumed();

	const uint32_t qpns[] = {2, 3, 2, 2, 3, 3, 2};
	for (uint64_t i = 0; i < 7; ++i)
		ASSERT_TRUE(kernel.complete(cqe_of(100 + i, qpns[i])));
	EXPECT_EQ(reader.discard_qp_cqes(2), 4u);
	EXPECT_EQ(reader.discard_qp_cqes(2), 0u);
	EXPECT_EQ(memory.ctrl().consumer, 5u + 4u);
	// Room for the slots given back.
	for (uint64_t i = 0; i < 4; ++i)
		ASSERT_TRUE(kernel.complete(cqe_of(200 + i, 3)));

	std::vector<uint64_t> got;
	while (const srnic_cqe *c = reader.check_owner_then_acquire_cqe()) {
		EXPECT_EQ(c->qp_num, 3u);
		got.push_back(c->wr_id);
		reader.consume_cqe();
	}
	EXPECT_EQ(got, (std::vector<uint64_t>{101, 104, 105, 200, 201, 202, 203}));
}

TEST(CqReaderDiscard, EmptyOrForeignRingIsUntouched)
{
	FakeRingMemory memory(4, sizeof(srnic_cqe));
	ASSERT_TRUE(memory.valid());
	FakeKernelCq kernel(memory.view());
	CqReader reader(memory.view());
	EXPECT_EQ(reader.discard_qp_cqes(9), 0u);
	ASSERT_TRUE(kernel.complete(11));
	EXPECT_EQ(reader.discard_qp_cqes(9), 0u); // kernel.complete() uses QP 7
	const srnic_cqe *c = reader.check_owner_then_acquire_cqe();
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(c->wr_id, 11u);
}

} // namespace
} // namespace srnic::test
