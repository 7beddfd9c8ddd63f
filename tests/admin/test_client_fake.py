"""The client library against in-process fake brokers and controllers (tests/admin/fake_cluster.py):
batching, acks, retries and their limits, leader moves, controller failover, consumer seeks."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from client import (
    AdminClient,
    Consumer,
    KafkaError,
    KafkaTimeoutError,
    Producer,
    TopicPartition,
    UnknownTopicError,
)
from common.errors import ErrorCode
from common.records import iter_batches
from tests.admin.fake_cluster import FakeCluster
from tests.polling import async_wait_until


@pytest.fixture
async def fake():
    async with FakeCluster(brokers=3, controllers=2) as fc:
        yield fc


async def test_admin_create_describe_delete(fake):
    async with AdminClient(fake.bootstrap) as admin:
        created = await admin.create_topic("orders", 3, 3, configs={"min.insync.replicas": "2"})
        assert (created.num_partitions, created.replication_factor) == (3, 3)
        topics = await admin.describe_topics(["orders"])
        t = topics["orders"]
        assert len(t.partitions) == 3 and t.configs == {"min.insync.replicas": "2"}
        assert all(len(p.replicas) == 3 and p.leader == p.replicas[0] for p in t.partitions)
        assert await admin.list_topics() == ["orders"]
        with pytest.raises(KafkaError) as e:
            await admin.create_topic("orders", 1, 1)
        assert e.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        with pytest.raises(KafkaError) as e:
            await admin.create_topic("big", 1, 4)
        assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert e.value.message == "Replication factor: 4 larger than available brokers: 3."
        await admin.delete_topic("orders")
        assert await admin.list_topics() == []
        with pytest.raises(UnknownTopicError):
            await admin.describe_topics(["orders"])


async def test_admin_follows_the_active_controller(fake):
    async with AdminClient(fake.bootstrap, retry_backoff_ms=10) as admin:
        fake.state.active_controller = 101  # the first candidate is deposed
        d = await admin.describe_cluster()
        assert d.controller_id == 101
        fake.state.not_controller_answers = 3  # the next answers say NOT_CONTROLLER
        await admin.create_topic("t", 1, 1)
        assert "t" in fake.state.topics


async def test_admin_gives_up_when_no_controller_answers(fake):
    async with AdminClient(fake.bootstrap, retry_backoff_ms=10,
                           default_api_timeout_ms=500) as admin:
        fake.state.active_controller = None
        with pytest.raises(KafkaTimeoutError, match="no active controller"):
            await admin.create_topic("t", 1, 1)
    assert "t" not in fake.state.topics


async def test_produce_acks_all_then_consume_back_at_offsets(fake):
    fake.state.add_topic("t", 3, 3)
    async with Producer(fake.bootstrap, acks="all", linger_ms=2) as producer:
        futs = [await producer.send("t", b"v%d" % i, key=b"k%d" % (i % 10)) for i in range(300)]
        await producer.flush()
        mds = [f.result() for f in futs]
    assert {a for _, a in fake.state.produce_calls} == {-1}
    # Each partition's offsets are dense and unique.
    by_part: dict[int, list[int]] = {}
    for md in mds:
        by_part.setdefault(md.partition, []).append(md.offset)
    for offsets in by_part.values():
        assert sorted(offsets) == list(range(len(offsets)))
    async with Consumer(fake.bootstrap) as consumer:
        await consumer.assign_topic("t")
        consumer.seek_to_beginning()
        got = {}
        while len(got) < 300:
            for r in await consumer.poll(2000):
                got[(r.partition, r.offset)] = r.value
    for i, md in enumerate(mds):
        assert got[(md.partition, md.offset)] == b"v%d" % i


async def test_send_with_callback_calls_it_once_per_record_in_order(fake, caplog):
    """Kafka's send(record, callback): no future, the callback gets (metadata, None) or
    (None, error) once; one that raises is logged and the others still run."""
    fake.state.add_topic("t", 2, 3)
    fake.state.produce_errors[("t", 1)].append(ErrorCode.MESSAGE_TOO_LARGE)
    calls: list[tuple[int, object, object]] = []

    def cb(i):
        def done(md, err):
            calls.append((i, md, err))
            if i == 3:
                raise RuntimeError("a user callback that fails")
        return done

    async with Producer(fake.bootstrap, acks="all", linger_ms=2) as producer:
        for i in range(10):
            assert await producer.send("t", b"v%d" % i, partition=i % 2, callback=cb(i)) is None
        await producer.flush()
        with pytest.raises(ValueError, match="takes no callback"):
            await producer.send_and_wait("t", b"x", callback=cb(99))
    assert sorted(i for i, _, _ in calls) == list(range(10))  # each exactly once
    ok = [(i, md) for i, md, err in calls if err is None]
    failed = [(i, err) for i, md, err in calls if md is None]
    assert [i for i, _ in ok] == [0, 2, 4, 6, 8]
    assert [md.offset for _, md in ok] == [0, 1, 2, 3, 4]  # record order, dense offsets
    assert [i for i, _ in failed] == [1, 3, 5, 7, 9]
    assert {e.error_code for _, e in failed} == {ErrorCode.MESSAGE_TOO_LARGE}
    assert "Error executing user-provided callback" in caplog.text
    assert all(i != 99 for i, _, _ in calls)  # refused before anything was queued


async def test_a_full_window_does_not_wake_the_sender_per_batch(fake, monkeypatch):
    """With max.in.flight requests outstanding, new full batches wait for a completion to
    wake the sender; a drain per batch would walk every partition for nothing.
    Everything is still delivered once the broker answers."""
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_gate = gate = asyncio.Event()
    drains = 0
    real = Producer._drain

    def counting(self, now):
        nonlocal drains
        drains += 1
        return real(self, now)
    monkeypatch.setattr(Producer, "_drain", counting)
    async with Producer(fake.bootstrap, batch_size=1024, linger_ms=0,
                        max_in_flight_requests_per_connection=1,
                        max_request_size=1100) as producer:
        futs = [await producer.send("t", b"x" * 100, partition=0) for _ in range(9)]
        await async_wait_until(lambda: len(fake.state.produce_calls) == 1)
        before = drains
        for _ in range(200):
            futs.append(await producer.send("t", b"x" * 100, partition=0))
            for _ in range(3):  # an application doing other work between sends
                await asyncio.sleep(0)
        extra = drains - before
        gate.set()
        await producer.flush()
    assert extra <= 2  # not one per new batch (~28 of them)
    assert all(f.result().offset == i for i, f in enumerate(futs))


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_queued_batch_expires_on_time_behind_a_hung_request(fake, in_flight):
    """A batch queued behind max.in.flight requests that hang fails at its delivery.timeout.ms
    even if the application sends nothing more: its expiry is the sender's deadline."""
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_gate = gate = asyncio.Event()
    async with Producer(fake.bootstrap, linger_ms=0, batch_size=200, max_request_size=300,
                        max_in_flight_requests_per_connection=in_flight,
                        delivery_timeout_ms=1500, request_timeout_ms=60000) as producer:
        hung = [await producer.send("t", b"x" * 100, partition=0) for _ in range(in_flight)]
        await async_wait_until(lambda: len(fake.state.produce_calls) == in_flight)
        queued = await producer.send("t", b"y" * 100, partition=0)
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            await asyncio.wait_for(queued, 30)
        assert not any(f.done() for f in hung)  # the requests in flight still hang
        gate.set()
        await producer.flush()
    assert all(f.result().offset >= 0 for f in hung)


async def test_same_key_same_partition_and_order(fake):
    fake.state.add_topic("t", 4, 1)
    async with Producer(fake.bootstrap, max_in_flight_requests_per_connection=1) as producer:
        futs = [await producer.send("t", b"%d" % i, key=b"same") for i in range(50)]
        mds = [await f for f in futs]
    assert len({m.partition for m in mds}) == 1
    assert [m.offset for m in mds] == list(range(50))


async def test_records_are_batched_per_partition(fake):
    fake.state.add_topic("t", 1, 1)
    async with Producer(fake.bootstrap, batch_size=1000, linger_ms=1000) as producer:
        futs = [await producer.send("t", b"x" * 90) for _ in range(40)]  # ~111 bytes each
        await producer.flush()
        await asyncio.gather(*futs)
    batches = list(iter_batches(fake.state.records("t", 0)))
    assert sum(b.header.records_count for b in batches) == 40
    assert 4 <= len(batches) <= 8, [b.header.records_count for b in batches]
    assert all(b.header.size <= 1000 + 200 for b in batches)


async def test_linger_sends_without_flush(fake):
    fake.state.add_topic("t", 1, 1)
    async with Producer(fake.bootstrap, linger_ms=20) as producer:
        md = await asyncio.wait_for(await producer.send("t", b"x"), 5)
    assert md.offset == 0


async def test_acks_zero_gives_offset_minus_one(fake):
    fake.state.add_topic("t", 1, 1)
    async with Producer(fake.bootstrap, acks=0) as producer:
        md = await (await producer.send("t", b"x"))
    assert md.offset == -1 and fake.state.produce_calls[-1][1] == 0


async def test_retries_follow_a_leader_move(fake):
    fake.state.add_topic("t", 1, 3)
    async with Producer(fake.bootstrap, retry_backoff_ms=10) as producer:
        first = await (await producer.send("t", b"a"))
        fake.state.move_leader("t", 0, 2)  # the producer's metadata now names the old leader
        second = await (await producer.send("t", b"b"))
    assert (first.offset, second.offset) == (0, 1)
    brokers = [b for b, _ in fake.state.produce_calls]
    assert brokers[0] == 1 and brokers[-1] == 2


# A controlled shutdown moves thousands of leaders at once: a NOT_LEADER_OR_FOLLOWER
# must send the batch to the new leader as soon as the client knows it, not a retry.backoff
# later. retry.backoff.ms is set to 10 minutes, so a producer that waits it out (before the
# retry, or before the metadata refresh) never makes the retry the tests wait for.
_NEVER_MS = 600_000


@contextlib.asynccontextmanager
async def _never_backing_off_producer(fake):
    producer = await Producer(fake.bootstrap, retry_backoff_ms=_NEVER_MS,
                              retry_backoff_max_ms=_NEVER_MS,
                              delivery_timeout_ms=3 * _NEVER_MS).start()
    try:
        yield producer
    finally:
        await producer.close(timeout_s=0)  # a failing test must not wait out the backoff here


async def test_not_leader_with_kip951_hint_retries_at_the_new_leader_without_backoff(fake):
    fake.state.add_topic("t", 1, 3)
    async with _never_backing_off_producer(fake) as producer:
        first = await (await producer.send("t", b"a"))  # learns leader 1, epoch 0
        asked = fake.state.metadata_answers
        fake.state.move_leader("t", 0, 2)  # epoch 1; the producer's cache still names 1
        fut = await producer.send("t", b"b")
        await async_wait_until(fut.done, what="the retry to the new leader (a producer "
                               "waiting out retry.backoff.ms never makes it)")
        second = fut.result()
    assert (first.offset, second.offset) == (0, 1)
    # broker 1 refused with NOT_LEADER_OR_FOLLOWER + current_leader {2, epoch 1}; the retry
    # went straight to broker 2 ...
    assert [b for b, _ in fake.state.produce_calls] == [1, 1, 2]
    # ... on the hint alone: no Metadata round trip was needed
    assert fake.state.metadata_answers == asked


async def test_not_leader_without_hint_refreshes_metadata_at_once_then_retries(fake):
    fake.state.add_topic("t", 1, 3)
    fake.state.leader_hints = False  # NOT_LEADER_OR_FOLLOWER without current_leader
    async with _never_backing_off_producer(fake) as producer:
        first = await (await producer.send("t", b"a"))
        asked = fake.state.metadata_answers
        fake.state.move_leader("t", 0, 2)
        fut = await producer.send("t", b"b")
        await async_wait_until(fut.done, what="the retry to the new leader (a producer "
                               "waiting out retry.backoff.ms never makes it)")
        second = fut.result()
    assert (first.offset, second.offset) == (0, 1)
    # exactly one Metadata request, made on the error (not a backoff after the last refresh);
    # its answer named leader 2 with a newer epoch, so the retry skipped the backoff (KIP-951)
    assert fake.state.metadata_answers == asked + 1
    assert [b for b, _ in fake.state.produce_calls] == [1, 1, 2]


@pytest.mark.parametrize("code", [ErrorCode.NOT_ENOUGH_REPLICAS,
                                  ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                  ErrorCode.REQUEST_TIMED_OUT, ErrorCode.LEADER_NOT_AVAILABLE,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
async def test_retriable_errors_are_retried(fake, code):
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_errors[("t", 0)].extend([code, code])
    async with Producer(fake.bootstrap, retry_backoff_ms=5) as producer:
        md = await (await producer.send("t", b"x"))
    assert md.offset == 0 and len(fake.state.produce_calls) == 3


async def test_without_retries_the_error_is_named(fake):
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_errors[("t", 0)].append(ErrorCode.NOT_ENOUGH_REPLICAS)
    async with Producer(fake.bootstrap, retries=0) as producer:
        fut = await producer.send("t", b"x")
        with pytest.raises(KafkaError) as e:
            await fut
    assert e.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "NOT_ENOUGH_REPLICAS" in str(e.value)


async def test_non_retriable_error_fails_at_once(fake):
    fake.state.add_topic("t", 1, 1)
    fake.state.produce_errors[("t", 0)].append(ErrorCode.MESSAGE_TOO_LARGE)
    async with Producer(fake.bootstrap) as producer:
        with pytest.raises(KafkaError) as e:
            await (await producer.send("t", b"x"))
    assert e.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert len(fake.state.produce_calls) == 1


async def test_delivery_timeout_bounds_retries(fake):
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_errors[("t", 0)].extend([ErrorCode.NOT_ENOUGH_REPLICAS] * 10_000)
    async with Producer(fake.bootstrap, delivery_timeout_ms=300, retry_backoff_ms=20,
                        retry_backoff_max_ms=50) as producer:
        with pytest.raises(KafkaError) as e:
            await asyncio.wait_for(await producer.send("t", b"x"), 10)
    # Kafka: the last attempt's error after the deadline, or an expiry naming it.
    assert "NOT_ENOUGH_REPLICAS" in str(e.value)


async def test_dead_leader_batches_expire_with_a_clear_message(fake):
    fake.state.add_topic("t", 1, 1)
    fake.state.topics["t"].partitions[0].leader = -1
    async with Producer(fake.bootstrap, delivery_timeout_ms=300, retry_backoff_ms=20) as p:
        with pytest.raises(KafkaTimeoutError, match=r"Expiring 1 record\(s\) for t-0"):
            await asyncio.wait_for(await p.send("t", b"x"), 10)


async def test_broker_death_then_new_leader(fake):
    fake.state.add_topic("t", 1, 3)
    async with Producer(fake.bootstrap, retry_backoff_ms=10) as producer:
        await (await producer.send("t", b"a"))
        await fake.kill_broker(1)
        answered = fake.state.metadata_answers
        fut = await producer.send("t", b"b")  # fails with a transport error, retried...
        # the failure was seen: the producer asked for metadata again (still naming broker 1)
        await async_wait_until(lambda: fake.state.metadata_answers > answered,
                               what="a metadata refresh after the failed send")
        assert not fut.done()
        fake.state.move_leader("t", 0, 3)  # ...until the new leader is elected
        md = await asyncio.wait_for(fut, 10)
    assert md.offset == 1


async def test_config_requests_move_on_from_a_broker_that_does_not_answer(fake):
    # A broker can stay registered while it answers nothing (SIGSTOPped, partitioned: its
    # ZooKeeper session has not expired yet). A config request for a topic may go to any
    # broker; it must not fail on that one (it did: it always went to the lowest broker id).
    fake.state.add_topic("t", 1, 3, configs={"min.insync.replicas": "2"})
    await fake.servers[("broker", 1)].stop(None)  # still in the registered brokers
    fake.state.configs_unavailable.add(2)  # answers Metadata, fails DescribeConfigs
    async with AdminClient(fake.bootstrap, retry_backoff_ms=10) as admin:
        for _ in range(4):  # broker 2 or 3 answers Metadata first, in random order
            got = await admin.describe_configs([("topics", "t")])
            assert [(e.name, e.value) for e in got[("topics", "t")]] == [
                ("min.insync.replicas", "2")]
    assert set(fake.state.describe_configs_by) == {3}


async def test_unknown_topic_is_reported_clearly(fake):
    async with Producer(fake.bootstrap, max_block_ms=300) as producer:
        with pytest.raises(UnknownTopicError) as e:
            await producer.send("nope", b"x")
    assert str(e.value) == "Topic nope not present in metadata after 300 ms."


async def test_topic_appearing_late_in_metadata_is_waited_for(fake):
    fake.state.add_topic("t", 1, 1)
    fake.state.unknown_to_metadata.add("t")

    async def reveal():  # once the producer has been told the topic is unknown
        await async_wait_until(lambda: fake.state.hidden_answers, what="t answered unknown")
        fake.state.unknown_to_metadata.clear()

    async with Producer(fake.bootstrap, max_block_ms=5000, retry_backoff_ms=20) as producer:
        task = asyncio.create_task(reveal())
        md = await (await producer.send("t", b"x"))
        await task
    assert md.offset == 0


async def test_explicit_partition_out_of_range(fake):
    fake.state.add_topic("t", 2, 1)
    async with Producer(fake.bootstrap) as producer:
        with pytest.raises(ValueError, match=r"not in the range \[0...2\)"):
            await producer.send("t", b"x", partition=2)


async def test_buffer_memory_applies_backpressure(fake):
    fake.state.add_topic("t", 1, 1)
    async with Producer(fake.bootstrap, buffer_memory=2000, batch_size=500,
                        linger_ms=0) as producer:
        futs = [await producer.send("t", b"x" * 100) for _ in range(200)]
        await asyncio.gather(*futs)
        assert producer._buffered == 0
    assert sum(b.header.records_count for b in iter_batches(fake.state.records("t", 0))) == 200


async def test_consumer_seek_latest_and_offset_and_leader_change(fake):
    fake.state.add_topic("t", 1, 3)
    tp = TopicPartition("t", 0)
    async with Producer(fake.bootstrap) as producer:
        for i in range(10):
            await producer.send("t", b"%d" % i)
        await producer.flush()
        async with Consumer(fake.bootstrap, fetch_max_wait_ms=100) as consumer:
            await consumer.assign([tp])
            consumer.seek_to_end()
            assert await consumer.position(tp) == 10
            assert await consumer.poll(200) == []
            consumer.seek(tp, 7)
            got = await consumer.poll(2000)
            assert [r.offset for r in got] == [7, 8, 9]
            assert [r.value for r in got] == [b"7", b"8", b"9"]
            fake.state.move_leader("t", 0, 3)
            await producer.send("t", b"10")
            await producer.flush()
            got = await consumer.poll(5000)
            assert [(r.offset, r.value) for r in got] == [(10, b"10")]
            assert (await consumer.beginning_offsets([tp]))[tp] == 0
            assert (await consumer.end_offsets([tp]))[tp] == 11


async def test_consumer_out_of_range_resets(fake):
    fake.state.add_topic("t", 1, 1)
    async with Producer(fake.bootstrap) as producer:
        for i in range(3):
            await producer.send("t", b"%d" % i)
    async with Consumer(fake.bootstrap, auto_offset_reset="earliest",
                        fetch_max_wait_ms=50) as consumer:
        await consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 100)
        got = []
        for _ in range(20):
            got += await consumer.poll(200)
            if len(got) >= 3:
                break
        assert [r.offset for r in got] == [0, 1, 2]


async def test_consumer_unknown_topic_and_partition(fake):
    fake.state.add_topic("t", 1, 1)
    async with Consumer(fake.bootstrap, max_block_ms=200) as consumer:
        with pytest.raises(UnknownTopicError):
            await consumer.assign_topic("nope")
        with pytest.raises(KafkaError, match="partition t-3 does not exist"):
            await consumer.assign([("t", 3)])


async def test_close_returns_when_the_sender_task_was_cancelled(fake):
    """Event-loop shutdown cancels every task, the producer's sender included; close() (run by
    ``async with`` as the cancelled caller unwinds) must then fail what is buffered instead of
    waiting for a sender that will never complete it (it hung a soak run's teardown)."""
    fake.state.add_topic("t", 1, 1)
    p = await Producer(fake.bootstrap, linger_ms=600_000, delivery_timeout_ms=900_000).start()
    fut = await p.send("t", b"v", partition=0)  # lingers in the buffer
    p._sender.cancel()
    await asyncio.wait_for(p.close(), 30)  # a failure here is the hang, not a timing claim
    with pytest.raises(KafkaError):
        await fut


async def test_close_returns_while_a_batch_waits_out_its_retry_backoff(fake):
    """close() wakes the sender and then cancels it; Python 3.11's wait_for drops a cancel that
    lands just after its inner wait completed, and the sender went on to wait out the batch's
    retry backoff (10 minutes here) before close() could return."""
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_errors[("t", 0)].append(ErrorCode.NOT_ENOUGH_REPLICAS)
    p = await Producer(fake.bootstrap, retry_backoff_ms=_NEVER_MS, retry_backoff_max_ms=_NEVER_MS,
                       delivery_timeout_ms=3 * _NEVER_MS).start()
    fut = await p.send("t", b"x")
    tp = TopicPartition("t", 0)
    await async_wait_until(lambda: any(b.attempts for b in p._batches.get(tp, ())),
                           what="the batch back in its queue after NOT_ENOUGH_REPLICAS")
    closing = asyncio.ensure_future(p.close(timeout_s=0))
    # not wait_for: cancelling close() on a timeout would cancel the sender again and hide
    # the hang; a failure here is the hang, not a timing claim
    done, _ = await asyncio.wait({closing}, timeout=30)
    if not done:
        closing.cancel()
    assert done, "close() waited for the sender to wait out the retry backoff"
    with pytest.raises(KafkaError, match="producer closed before the record was sent"):
        await fut
    assert len(fake.state.produce_calls) == 1
