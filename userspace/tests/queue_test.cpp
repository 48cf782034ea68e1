// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ProducerView / ConsumerView over a fake ring: the provider's side of a work
// queue against the kernel's, played here by the consumer view.
#include "fake_ring.h"
#include "queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace srnic::test
{
namespace
{

constexpr uint32_t kEntries = 8;
constexpr uint32_t kEntrySize = 64;

// Writes a recognisable payload: the free-running index it was posted at.
void write_seq(std::byte *entry, uint64_t seq)
{
	std::memcpy(entry, &seq, sizeof(seq));
}

uint64_t read_seq(const std::byte *entry)
{
	uint64_t seq;
	std::memcpy(&seq, entry, sizeof(seq));
	return seq;
}

// Posts one entry and publishes it; false when the ring is full.
bool post(ProducerView &producer, uint64_t seq)
{
	std::byte *entry = producer.next_free_entry();
	if (!entry)
		return false;
	write_seq(entry, seq);
	producer.commit_entry();
	(void)producer.publish_then_check_need_wakeup();
	return true;
}

// Takes one entry and hands its slot back; nullopt when the ring is empty.
std::optional<uint64_t> take(ConsumerView &consumer)
{
	const std::byte *entry = consumer.next_entry();
	if (!entry)
		return std::nullopt;
	const uint64_t seq = read_seq(entry);
	consumer.consume_entry();
	consumer.release_consumed();
	return seq;
}

class QueueTest : public ::testing::Test
{
    protected:
	void SetUp() override { ASSERT_TRUE(memory_.valid()); }

	FakeRingMemory memory_{kEntries, kEntrySize};
};

TEST(RingGeometry, AcceptsWellFormedRings)
{
	EXPECT_TRUE(ring_geometry_is_valid(192 + 64 * 64, 192, 64, 64, sizeof(srnic_cqe)));
	EXPECT_TRUE(ring_geometry_is_valid(1 << 20, 4096, 1, 16, sizeof(srnic_recv_wqe)));
}

TEST(RingGeometry, RejectsMalformedRings)
{
	// Control record too small or not whole cache lines.
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 128, 64, 64, 64));
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 200, 64, 64, 64));
	// Counts and sizes that are not powers of two, or zero.
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 192, 0, 64, 64));
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 192, 48, 64, 64));
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 192, 64, 96, 64));
	// Entries smaller than what will be stored in them.
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 192, 64, 32, sizeof(srnic_cqe)));
	// Entries running past the end of the mapping, by one byte or by a lot.
	EXPECT_FALSE(ring_geometry_is_valid(192 + 64 * 64 - 1, 192, 64, 64, 64));
	EXPECT_FALSE(ring_geometry_is_valid(1 << 20, 192, 1u << 31, 1u << 31, 64));
}

TEST_F(QueueTest, EntriesAreAddressedAfterTheControlRecord)
{
	const RingView ring = memory_.view();
	auto *base = reinterpret_cast<std::byte *>(&memory_.ctrl());
	EXPECT_EQ(ring.entry(0), base + FakeRingMemory::ctrl_size);
	EXPECT_EQ(ring.entry(3), base + FakeRingMemory::ctrl_size + 3 * kEntrySize);
	EXPECT_EQ(ring.entry(kEntries + 3), ring.entry(3));
	EXPECT_EQ(ring.num_entries(), kEntries);
	EXPECT_EQ(ring.entry_size(), kEntrySize);
}

TEST_F(QueueTest, EmptyRingHasNothingToConsume)
{
	ConsumerView consumer(memory_.view());
	EXPECT_EQ(consumer.next_entry(), nullptr);
}

TEST_F(QueueTest, CommittedEntriesStayInvisibleUntilPublished)
{
	ProducerView producer(memory_.view());
	ConsumerView consumer(memory_.view());

	write_seq(producer.next_free_entry(), 42);
	producer.commit_entry();
	EXPECT_EQ(producer.unpublished(), 1u);
	EXPECT_EQ(consumer.next_entry(), nullptr);

	(void)producer.publish_then_check_need_wakeup();
	EXPECT_EQ(producer.unpublished(), 0u);
	EXPECT_EQ(memory_.ctrl().producer, 1u);
	EXPECT_EQ(take(consumer), 42u);
	EXPECT_EQ(consumer.next_entry(), nullptr);
}

TEST_F(QueueTest, NextFreeEntryIsStableUntilCommitted)
{
	ProducerView producer(memory_.view());
	std::byte *first = producer.next_free_entry();
	EXPECT_EQ(producer.next_free_entry(), first);
	producer.commit_entry();
	EXPECT_NE(producer.next_free_entry(), first);
}

TEST_F(QueueTest, FullRingRefusesEntriesUntilTheConsumerReleasesSlots)
{
	ProducerView producer(memory_.view());
	ConsumerView consumer(memory_.view());

	for (uint64_t seq = 0; seq < kEntries; ++seq)
		ASSERT_TRUE(post(producer, seq)) << seq;
	EXPECT_FALSE(post(producer, kEntries));

	// Consumed but not yet released: the slot still belongs to the kernel.
	ASSERT_NE(consumer.next_entry(), nullptr);
	consumer.consume_entry();
	EXPECT_EQ(producer.next_free_entry(), nullptr);

	consumer.release_consumed();
	EXPECT_TRUE(post(producer, kEntries));
	EXPECT_FALSE(post(producer, kEntries + 1));

	for (uint64_t seq = 1; seq <= kEntries; ++seq)
		EXPECT_EQ(take(consumer), seq);
	EXPECT_EQ(take(consumer), std::nullopt);
}

TEST_F(QueueTest, PayloadSurvivesManyLapsInOrder)
{
	ProducerView producer(memory_.view());
	ConsumerView consumer(memory_.view());

	uint64_t posted = 0;
	uint64_t taken = 0;
	// Batch sizes that do not divide the ring, so every slot is reused at
	// every offset within a batch.
	for (int round = 0; round < 100; ++round) {
		const int batch = 1 + round % 7;
		for (int i = 0; i < batch && post(producer, posted); ++i)
			++posted;
		for (int i = 0; i < batch - round % 2; ++i) {
			const std::optional<uint64_t> seq = take(consumer);
			if (!seq)
				break;
			ASSERT_EQ(*seq, taken);
			++taken;
		}
	}
	while (const std::optional<uint64_t> seq = take(consumer))
		ASSERT_EQ(*seq, taken++);
	EXPECT_EQ(taken, posted);
	EXPECT_GT(posted, 20 * kEntries);
}

TEST_F(QueueTest, IndexesWrapAroundTwoToTheThirtyTwo)
{
	memory_.start_indexes_at(0xffffffffu - 3);
	ProducerView producer(memory_.view());
	ConsumerView consumer(memory_.view());

	for (uint64_t seq = 0; seq < kEntries; ++seq)
		ASSERT_TRUE(post(producer, seq));
	EXPECT_FALSE(post(producer, kEntries)); // full across the wrap
	EXPECT_LT(memory_.ctrl().producer, 8u);

	for (uint64_t seq = 0; seq < kEntries; ++seq)
		EXPECT_EQ(take(consumer), seq);
	EXPECT_EQ(take(consumer), std::nullopt);
	EXPECT_TRUE(post(producer, 99));
	EXPECT_EQ(take(consumer), 99u);
}

TEST_F(QueueTest, PublishReportsWhetherTheEngineAskedForAWakeup)
{
	ProducerView producer(memory_.view());

	ASSERT_TRUE(producer.next_free_entry());
	producer.commit_entry();
	EXPECT_FALSE(producer.publish_then_check_need_wakeup());

	memory_.ctrl().flags = SRNIC_QUEUE_NEED_WAKEUP;
	ASSERT_TRUE(producer.next_free_entry());
	producer.commit_entry();
	EXPECT_TRUE(producer.publish_then_check_need_wakeup());
	EXPECT_EQ(memory_.ctrl().producer, 2u) << "the index is published even when asleep";

	// Other flags do not ask for a doorbell.
	memory_.ctrl().flags = SRNIC_QUEUE_ERROR;
	EXPECT_FALSE(producer.publish_then_check_need_wakeup());
	EXPECT_EQ(memory_.view().flags(), uint32_t{SRNIC_QUEUE_ERROR});
}

TEST_F(QueueTest, ConsumerIndexAheadOfProducerReadsAsFull)
{
	ProducerView producer(memory_.view());
	for (uint64_t seq = 0; seq < kEntries; ++seq)
		ASSERT_TRUE(post(producer, seq));
	// The full ring makes the producer re-read the consumer index, which
	// now claims entries that were never posted.
	memory_.ctrl().consumer = kEntries + 3;
	EXPECT_EQ(producer.next_free_entry(), nullptr);

	ProducerView fresh(memory_.view());
	EXPECT_EQ(fresh.next_free_entry(), nullptr);
}

TEST_F(QueueTest, ProducerIndexMoreThanARingAheadReadsAsEmpty)
{
	ConsumerView consumer(memory_.view());
	memory_.ctrl().producer = kEntries + 1;
	EXPECT_EQ(consumer.next_entry(), nullptr);
	memory_.ctrl().producer = kEntries; // exactly full is fine
	EXPECT_NE(consumer.next_entry(), nullptr);
}

TEST_F(QueueTest, ViewsResumeFromTheSharedIndexes)
{
	{
		ProducerView producer(memory_.view());
		ASSERT_TRUE(post(producer, 1));
		ASSERT_TRUE(post(producer, 2));
	}
	ProducerView producer(memory_.view()); // e.g. after a fork or re-open
	ASSERT_TRUE(post(producer, 3));
	ConsumerView consumer(memory_.view());
	EXPECT_EQ(take(consumer), 1u);
	EXPECT_EQ(take(consumer), 2u);
	EXPECT_EQ(take(consumer), 3u);
}

// Two threads, as the provider and the kernel engine would run: every entry
// arrives once, in order, with its payload. A broken ring must fail the test,
// not hang it: both sides give up when it stalls
// (StallDeadline).
TEST_F(QueueTest, ConcurrentProducerAndConsumerAgree)
{
	constexpr uint64_t kCount = 200000;
	StallDeadline deadline;
	std::atomic<bool> give_up = false;

	std::thread producer_thread([&] {
		ProducerView producer(memory_.view());
		uint64_t seq = 0;
		while (seq < kCount && !give_up.load(std::memory_order_relaxed)) {
			// Batches of up to 3 per publish.
			int batch = 0;
			while (batch < 3 && seq < kCount) {
				std::byte *entry = producer.next_free_entry();
				if (!entry)
					break;
				write_seq(entry, seq++);
				producer.commit_entry();
				++batch;
			}
			(void)producer.publish_then_check_need_wakeup();
			if (batch == 0)
				std::this_thread::yield();
		}
	});

	ConsumerView consumer(memory_.view());
	uint64_t expected = 0;
	uint64_t mismatches = 0;
	while (expected < kCount) {
		const std::byte *entry = consumer.next_entry();
		if (!entry) {
			if (deadline.passed())
				break;
			std::this_thread::yield();
			continue;
		}
		mismatches += read_seq(entry) != expected++;
		deadline.progress();
		consumer.consume_entry();
		consumer.release_consumed();
	}
	give_up = true;
	producer_thread.join();
	EXPECT_EQ(expected, kCount) << "stalled";
	EXPECT_EQ(mismatches, 0u);
	EXPECT_EQ(consumer.next_entry(), nullptr);
}

} // namespace
} // namespace srnic::test
