"""``replog dump-log``: kafka-dump-log's output for .log/.index/.timeindex files."""

import re
import subprocess
import sys

from broker.storage.log import Log, LogConfig
from common.names import TopicPartition
from common.records import ProducerRecord, build_batch


def replog(*args):
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], capture_output=True,
                          text=True, timeout=60)


def make_log(tmp_path):
    log = Log.open(str(tmp_path), TopicPartition("t", 0), LogConfig(index_interval_bytes=10),
                   needs_recovery=False)
    log.append_as_leader(build_batch([ProducerRecord(b"k1", b"hello", timestamp=1000),
                                      ProducerRecord(None, b"world", [("h", b"v")], 1001)]), 3)
    log.append_as_leader(build_batch([ProducerRecord(b"k3", b"again", timestamp=1002)]), 4)
    log.close()
    return log.active_segment


def test_dump_log_prints_batches_and_records(tmp_path):
    seg = make_log(tmp_path)
    out = replog("dump-log", "--files", seg.log_path, "--print-data-log")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {seg.log_path}"
    assert lines[1] == "Log starting offset: 0"
    assert re.match(r"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                    r"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 "
                    r"isTransactional: false isControl: false deleteHorizonMs: "
                    r"OptionalLong.empty position: 0 CreateTime: 1001 size: \d+ magic: 2 "
                    r"compresscodec: none crc: \d+ isvalid: true$", lines[2])
    assert lines[3] == ("| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 "
                        "headerKeys: [] key: k1 payload: hello")
    assert lines[4] == ("| offset: 1 CreateTime: 1001 keySize: -1 valueSize: 5 sequence: -1 "
                        "headerKeys: [h] payload: world")
    assert lines[5].startswith("baseOffset: 2 lastOffset: 2 count: 1 ")
    assert "partitionLeaderEpoch: 4" in lines[5]


def test_dump_log_flags_a_corrupt_batch_and_a_torn_tail(tmp_path):
    seg = make_log(tmp_path)
    with open(seg.log_path, "r+b") as f:
        f.seek(70)
        b = f.read(1)
        f.seek(70)
        f.write(bytes([b[0] ^ 1]))
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 30)
    out = replog("dump-log", "--files", seg.log_path)
    assert out.returncode == 0
    assert "isvalid: false" in out.stdout.splitlines()[2]
    assert out.stdout.splitlines()[-1].startswith("Found 30 invalid bytes at the end of")


def test_dump_index_files(tmp_path):
    seg = make_log(tmp_path)
    out = replog("dump-log", "--files", f"{seg.index_path},{seg.time_index_path}")
    assert out.returncode == 0, out.stderr
    assert "offset: 2 position: " in out.stdout
    assert "timestamp: 1002 offset: 2" in out.stdout


def test_dump_log_bad_input_is_one_line(tmp_path):
    out = replog("dump-log", "--files", str(tmp_path / "missing.log"))
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "does not exist" in out.stderr
    out = replog("dump-log")
    assert out.returncode == 1 and out.stderr.startswith("Error:")


def test_offsets_decoder_prints_consumer_offsets_records_as_kafka_does(tmp_path):
    """kafka-dump-log --offsets-decoder's format (DumpLogSegments.OffsetsMessageParser): the
    key's type and fields, the value's version and the fields of that version, <DELETE> for a
    tombstone; --print-data-log is implied."""
    from broker.group.records import (
        CoordinatorRecord,
        GroupMetadataKey,
        GroupMetadataValue,
        MemberMetadata,
        OffsetCommitKey,
        OffsetCommitValue,
    )
    records = [
        CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(42, "md", 1000, 5)),
        CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue(
            "consumer", 1, "range", "m-1", (MemberMetadata("m-1", "c", "/127.0.0.1", 10000,
                                                           b"\x00", b"\x01", None, 300000),),
            2000)),
        CoordinatorRecord(OffsetCommitKey("g", "t", 0)),
    ]
    log = Log.open(str(tmp_path), TopicPartition("__consumer_offsets", 0), LogConfig(),
                   needs_recovery=False)
    log.append_as_leader(build_batch([ProducerRecord(*r.encode(), timestamp=1000)
                                      for r in records]), 1)
    log.close()
    out = replog("dump-log", "--files", log.active_segment.log_path, "--offsets-decoder")
    assert out.returncode == 0, out.stderr
    got = [line.split(" key: ", 1)[1] for line in out.stdout.splitlines() if " key: " in line]
    assert got == [
        '{"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"md",'
        '"commitTimestamp":1000}}',
        '{"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":'
        '"consumer","generation":1,"protocol":"range","leader":"m-1","currentStateTimestamp":'
        '2000,"members":[{"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":'
        '"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":10000,"subscription":"AA==",'
        '"assignment":"AQ=="}]}}',
        '{"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: <DELETE>',
    ]
