"""The chaos workload: writers and a reader whose every operation goes into the history.

- writers: one Producer each (acks=all or acks=1), sending one record at a time
  (``send_and_wait``), round-robin over the partitions, values ``w<writer>:<seq>:<acks>``.
  ``retries=0``: replog's producer is not idempotent, so a retry after a lost acknowledgement
  could write a record twice, legitimately (Kafka with enable.idempotence=false); without
  retries every duplicate the checker finds is the brokers' doing. One record at a time keeps
  each writer's order meaningful: a record acknowledged before the next was sent must sit at a
  lower offset.
- outcomes: ``ok`` with the acknowledged offset; ``fail`` only for NOT_ENOUGH_REPLICAS (the
  leader refuses before appending: the record is certainly not written); ``info`` (unknown)
  for everything else, since a timeout, NOT_LEADER_OR_FOLLOWER after an acks=all append or a
  storage error may leave the record in the log. An exception that is not a Kafka error nor
  a timeout is recorded ``unexpected`` (the checker's ``client-error``) and the writer or
  reader goes on.
- reader: a Consumer from the beginning of every partition (``auto_offset_reset="none"``, so a
  reset is an error in the history rather than a silent jump); on an error a new reader
  process (``reader-1``...) starts from the beginning again.
"""

from __future__ import annotations

import asyncio

from chaos.history import History, write_value
from client.consumer import Consumer
from client.errors import KafkaError
from client.producer import Producer
from common.errors import ErrorCode

SEND_TIMEOUT_S = 10.0
WRITE_PAUSE_S = 0.01  # the machine is shared: a few hundred writes a second are plenty


def _outcome(e: BaseException) -> str:
    if isinstance(e, KafkaError) and e.error_code == ErrorCode.NOT_ENOUGH_REPLICAS:
        return "fail"
    return "info"


async def writer(bootstrap: str, topic: str, partitions: int, writer_id: int, acks: str,
                 history: History, stop: asyncio.Event) -> None:
    name = f"writer-{writer_id}"
    async with Producer(bootstrap, acks=acks, linger_ms=0, retries=0,
                        delivery_timeout_ms=8000, request_timeout_ms=3000, max_block_ms=5000,
                        max_in_flight_requests_per_connection=1) as producer:
        seq = 0
        while not stop.is_set():
            partition = (seq + writer_id) % partitions
            value = write_value(writer_id, seq, acks)
            history.record(name, "invoke", "send",
                           {"partition": partition, "value": value, "acks": acks})
            try:
                md = await asyncio.wait_for(
                    producer.send_and_wait(topic, value.encode(), partition=partition),
                    SEND_TIMEOUT_S)
            except (KafkaError, TimeoutError) as e:
                history.record(name, _outcome(e), "send",
                               {"partition": partition, "value": value, "acks": acks,
                                "error": f"{type(e).__name__}: {e}"[:200]})
                await asyncio.sleep(0.1)
            except Exception as e:  # noqa: BLE001 - recorded, flagged by the checker
                # Not a Kafka error: the client saw something a cluster must never show (a
                # partition outside the topic's metadata: tests/chaos/test_checker.py::
                # test_client_error_is_caught). The write stays
                # unknown and the writer goes on, so the run still tests the rest.
                history.record(name, "info", "send",
                               {"partition": partition, "value": value, "acks": acks,
                                "error": f"{type(e).__name__}: {e}"[:200], "unexpected": True})
                await asyncio.sleep(0.1)
            else:
                history.record(name, "ok", "send", {"partition": partition, "value": value,
                                                    "acks": acks, "offset": md.offset})
            seq += 1
            await asyncio.sleep(WRITE_PAUSE_S)


async def reader(bootstrap: str, topic: str, partitions: int, history: History,
                 stop: asyncio.Event) -> None:
    incarnation = 0
    while not stop.is_set():
        name = f"reader-{incarnation}"
        try:
            async with Consumer(bootstrap, auto_offset_reset="none", fetch_max_wait_ms=500,
                                request_timeout_ms=5000) as consumer:
                tps = [(topic, p) for p in range(partitions)]
                await consumer.assign(tps)
                for tp in tps:
                    consumer.seek(tp, 0)  # the log start: the chaos topic has no retention
                while not stop.is_set():
                    history.record(name, "invoke", "read", {})
                    batch = await asyncio.wait_for(consumer.poll(1000), SEND_TIMEOUT_S)
                    history.record(name, "ok", "read", {"records": [
                        [r.partition, r.offset, r.value.decode(errors="replace")]
                        for r in batch]})
        except (KafkaError, TimeoutError, OSError) as e:
            history.record(name, "info", "read", {"error": f"{type(e).__name__}: {e}"[:200]})
            incarnation += 1
            await asyncio.sleep(0.5)
        except Exception as e:  # noqa: BLE001 - as in writer(): recorded, flagged, go on
            history.record(name, "info", "read", {"error": f"{type(e).__name__}: {e}"[:200],
                                                  "unexpected": True})
            incarnation += 1
            await asyncio.sleep(0.5)


async def run_workload(bootstrap: str, topic: str, partitions: int, history: History,
                       stop: asyncio.Event, writers: tuple[str, ...] = ("all", "all", "1")
                       ) -> None:
    """Run the writers (one per entry of ``writers``: its acks) and a reader until ``stop``."""
    tasks = [asyncio.create_task(writer(bootstrap, topic, partitions, i, acks, history, stop))
             for i, acks in enumerate(writers)]
    tasks.append(asyncio.create_task(reader(bootstrap, topic, partitions, history, stop)))
    await stop.wait()
    # every writer and the reader to finish (each ends at stop), bounded by the send timeout
    _done, pending = await asyncio.wait(tasks, timeout=SEND_TIMEOUT_S + 5,
                                        return_when=asyncio.ALL_COMPLETED)
    for t in pending:
        t.cancel()  # a send stuck past its own timeout: its outcome stays unknown (info)
    for r in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(r, Exception):
            raise r  # a bug in the workload, not a fault: fail the run loudly


async def final_read(bootstrap: str, topic: str, partitions: int, history: History,
                     timeout_s: float = 60.0) -> None:
    """Read every partition from the beginning to its HW after the heal (``final-read``)."""
    name = "final-reader"
    history.record(name, "invoke", "final-read", {})
    records: list[list] = []
    try:
        async with Consumer(bootstrap, auto_offset_reset="earliest",
                            request_timeout_ms=5000) as consumer:
            tps = [(topic, p) for p in range(partitions)]
            await consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            end = {tp.partition if hasattr(tp, "partition") else tp[1]: o
                   for tp, o in ends.items()}
            got = {p: 0 for p in range(partitions)}
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while any(got[p] < end[p] for p in got) and loop.time() < deadline:
                for r in await consumer.poll(1000):
                    if r.offset < end[r.partition]:
                        records.append([r.partition, r.offset,
                                        r.value.decode(errors="replace")])
                    got[r.partition] = max(got[r.partition], r.offset + 1)
    except (KafkaError, TimeoutError, OSError) as e:
        history.record(name, "info", "final-read", {"error": f"{type(e).__name__}: {e}"[:200],
                                                    "records": records})
        return
    history.record(name, "ok", "final-read",
                   {"records": records, "end_offsets": {str(p): o for p, o in end.items()},
                    "complete": all(got[p] >= end[p] for p in got)})
