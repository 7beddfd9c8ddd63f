"""The Kafka APIs a broker answers itself, through the same broker/apis/ functions as its gRPC
servicer (configs.py, log_dirs.py: authorization is there):
DescribeConfigs, IncrementalAlterConfigs and the legacy AlterConfigs (a whole-resource
replace: each given key SET over no overrides; broker/config_requests.py over the config
manager), DescribeLogDirs and AlterReplicaLogDirs (the replica manager). Translation only.

Where Kafka's wire asks for more than the gRPC shape (KafkaApis, ConfigHelper):
- DescribeConfigs naming a resource type Kafka does not know fails every resource of the
  request with INVALID_REQUEST (ConfigHelper's authorization step throws for the request);
  v0 has no config source, so ``is_default`` says whether the value is the default;
  ``config_type`` is left UNKNOWN (0) and ``documentation`` null: replog's config table keeps
  neither a Kafka ConfigDef type nor Kafka's documentation strings;
- DescribeLogDirs with a null topic list describes every partition, with an empty one none
  (KafkaApis.handleDescribeLogDirsRequest); an offline dir is KAFKA_STORAGE_ERROR with no
  totals, and totals that could not be read are -1, the field's "unknown";
- AlterReplicaLogDirs reads its dirs as a map from partition to dir
  (AlterReplicaLogDirsRequest.partitionDirs), so a partition listed twice moves to the last
  dir named and is answered once; answers are grouped by topic.

Authorization (KafkaApis, ConfigHelper): DescribeConfigs needs DescribeConfigs and
(Incremental)AlterConfigs AlterConfigs, on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker
resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED); a refused resource is answered so and
left as it was. DescribeLogDirs needs Describe on the cluster (the request's error code),
AlterReplicaLogDirs Alter (each partition CLUSTER_AUTHORIZATION_FAILED, nothing moves).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker import config_requests
from broker.apis import configs as apis_configs
from broker.apis import log_dirs as apis_log_dirs
from broker.config_requests import AlterResource
from broker.kafka_api_context import KafkaApiContext
from common.dynamic_config import AlterOp, ConfigSource
from common.kafka_protocol.api import ApiKey
from common.names import TopicPartition

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""

    async def describe_configs(req: dict, version: int) -> dict:
        resources = req["resources"]
        outcomes = await apis_configs.describe_configs(listener.api_context(), [
            apis_configs.DescribeResource(r["resource_type"], r["resource_name"],
                                          r["configuration_keys"]) for r in resources],
            unknown_type_fails_all=True)
        return {"throttle_time_ms": 0, "results": [
            _describe_result(r, o, req["include_synonyms"], version)
            for r, o in zip(resources, outcomes)]}

    async def incremental_alter_configs(req: dict, _version: int) -> dict:
        return await _alter(req, lambda c: c["config_operation"], replace=False)

    async def alter_configs(req: dict, _version: int) -> dict:
        # the legacy AlterConfigs: a whole-resource replace (broker/apis/configs.py)
        return await _alter(req, lambda c: AlterOp.SET, replace=True)

    async def _alter(req: dict, op_of: Callable[[dict], int], replace: bool) -> dict:
        outcomes = await apis_configs.alter_configs(listener.api_context(), [
            AlterResource(r["resource_type"], r["resource_name"],
                          tuple((c["name"], op_of(c), c["value"]) for c in r["configs"]))
            for r in req["resources"]], req["validate_only"], replace=replace)
        return {"throttle_time_ms": 0, "responses": [
            {"error_code": o.error_code, "error_message": o.error_message,
             "resource_type": r["resource_type"], "resource_name": r["resource_name"]}
            for r, o in zip(req["resources"], outcomes)]}

    async def describe_log_dirs(req: dict, _version: int) -> dict:
        topics = req["topics"]
        answer = await apis_log_dirs.describe_log_dirs(listener.api_context(), None
                                                       if topics is None else frozenset(
            (t["topic"], p) for t in topics for p in t["partitions"]))
        if answer.error:
            return {"throttle_time_ms": 0, "results": [], "error_code": int(answer.error)}
        results = []
        for d in answer.dirs:
            by_topic: dict[str, list[dict]] = {}
            for rep in d.replicas:
                by_topic.setdefault(rep.tp.topic, []).append({
                    "partition_index": rep.tp.partition, "partition_size": rep.size,
                    "offset_lag": rep.offset_lag, "is_future_key": rep.is_future})
            results.append({
                "error_code": int(d.error), "log_dir": d.path,
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())],
                # the replica manager reports 0 for totals it has not got (an offline dir, a
                # statvfs that failed); no log dir sits on a volume of 0 bytes
                "total_bytes": d.total_bytes if d.total_bytes > 0 else -1,
                "usable_bytes": d.usable_bytes if d.total_bytes > 0 else -1})
        return {"throttle_time_ms": 0, "error_code": 0, "results": results}

    async def alter_replica_log_dirs(req: dict, _version: int) -> dict:
        dir_of: dict[TopicPartition, str] = {}
        for d in req["dirs"]:
            for t in d["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p)
                    dir_of.pop(tp, None)  # the last dir named wins, in its place
                    dir_of[tp] = d["path"]
        moves: dict[str, list[TopicPartition]] = {}
        for tp, path in dir_of.items():
            moves.setdefault(path, []).append(tp)
        by_topic: dict[str, list[dict]] = {}
        for tp, code, _message in await apis_log_dirs.alter_replica_log_dirs(
                listener.api_context(), moves):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": int(code)})
        return {"throttle_time_ms": 0, "results": [
            {"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}

    return {
        ApiKey.DESCRIBE_CONFIGS: describe_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
        ApiKey.ALTER_CONFIGS: alter_configs,
        ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
        ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs,
    }


def _describe_result(r: dict, o: config_requests.Outcome, include_synonyms: bool,
                     version: int) -> dict:
    return {
        "error_code": o.error_code, "error_message": o.error_message,
        "resource_type": r["resource_type"], "resource_name": r["resource_name"],
        "configs": [{
            "name": e.name, "value": None if e.sensitive else e.value,
            "read_only": e.read_only,
            "is_default": version == 0 and e.source == ConfigSource.DEFAULT_CONFIG,
            "config_source": int(e.source), "is_sensitive": e.sensitive,
            # KafkaApis answers synonyms only when asked (v1+)
            "synonyms": [{"name": s.name, "value": None if e.sensitive else s.value,
                          "source": int(s.source)} for s in e.synonyms]
            if include_synonyms else [],
            "config_type": 0, "documentation": None,
        } for e in o.entries],
    }
