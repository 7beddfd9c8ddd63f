"""The Broker gRPC service: translates wire messages to broker/apis/ and replica-manager calls
and back.

No decisions here: protobuf stops at this module. The controller's requests are translated to
plain values (common/controller_requests.py) before they reach the replica manager, and its
answers back to wire messages; what an answer says comes from pure rules (broker/fencing.py,
broker/metadata_cache.py, broker/log_dirs.py). Input is validated (design.md#c11: sizes, names,
acks); per-partition outcomes carry Kafka error codes; whole-request failures become gRPC status
codes with the Kafka code in the trailing metadata key ``replog-error-code``
(proto/replog/v1/replog.proto, conventions).

The client-facing RPCs (Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, configs,
ACLs, log dirs, DeleteRecords) only decode, call broker/apis/ (Kafka's KafkaApis, shared with
the Kafka listener: authorization, validation, metrics and the answer's assembly are there) and
encode; a RequestError it raises becomes the call's status. Everything only brokers and the
controller send (LeaderAndIsr, StopReplica, UpdateMetadata, GetReplicaLogInfo; a follower
Fetch, refused in broker/apis/fetch.py) needs ClusterAction on the cluster and is refused whole,
before it touches any state, with CLUSTER_AUTHORIZATION_FAILED (common/security/authorizer.py;
None allows everything).
"""

from __future__ import annotations

import asyncio

import grpc

from broker import config_requests, fencing
from broker.apis import acls as apis_acls
from broker.apis import configs as apis_configs
from broker.apis import fetch as apis_fetch
from broker.apis import log_dirs as apis_log_dirs
from broker.apis import metadata as apis_metadata
from broker.apis import offsets as apis_offsets
from broker.apis import produce as apis_produce
from broker.apis.context import ApiContext
from broker.auto_topic_creation import AutoTopicCreation
from broker.config_manager import ConfigManager
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest
from common import rpc_status
from common.controller_requests import (
    BrokerNode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from common.errors import ErrorCode, RequestError
from common.listeners import PLAINTEXT, EndPoint
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.security.acl import CLUSTER_RESOURCE, AclError, AclOperation
from common.security.acl_wire import binding_from_pb, binding_pb, filter_from_pb
from common.security.authorizer import ALLOW_ALL, Requester, grpc_requester
from common.security.principal import PrincipalBuilder

_STATUS = {
    ErrorCode.STALE_CONTROLLER_EPOCH: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.STALE_BROKER_EPOCH: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.NOT_CONTROLLER: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.INVALID_REQUIRED_ACKS: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: grpc.StatusCode.PERMISSION_DENIED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: grpc.StatusCode.PERMISSION_DENIED,
    ErrorCode.SECURITY_DISABLED: grpc.StatusCode.FAILED_PRECONDITION,
}


async def abort(context, code: ErrorCode, message: str):
    await rpc_status.abort(context, _STATUS.get(code, grpc.StatusCode.INVALID_ARGUMENT), code,
                           message)


def _endpoint_pb(e: BrokerNode, listener: str) -> pb.BrokerEndpoint:
    return pb.BrokerEndpoint(broker_id=e.broker_id, host=e.host, port=e.port, listener=listener,
                             **({"rack": e.rack} if e.rack else {}))


# ---------------------------------------------------------------------- wire -> plain values

def _endpoint(e: pb.BrokerEndpoint, with_rack: bool = True) -> BrokerNode:
    return BrokerNode(e.broker_id, e.host, e.port,
                      e.rack if with_rack and e.HasField("rack") else None,
                      tuple(EndPoint(x.listener, x.host, x.port) for x in e.endpoints),
                      e.listener or PLAINTEXT)


def leader_and_isr_request(req: pb.LeaderAndIsrRequest) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=req.controller_id, controller_epoch=req.controller_epoch,
        broker_epoch=req.broker_epoch,
        partition_states=tuple(LeaderAndIsrPartitionState(
            topic=s.topic, partition=s.partition, controller_epoch=s.controller_epoch,
            leader=s.leader, leader_epoch=s.leader_epoch, isr=tuple(s.isr),
            partition_epoch=s.partition_epoch, replicas=tuple(s.replicas),
            is_new=bool(s.is_new), leader_recovery_state=int(s.leader_recovery_state),
            elr=tuple(s.elr), last_known_elr=tuple(s.last_known_elr),
            adding_replicas=tuple(s.adding_replicas),
            removing_replicas=tuple(s.removing_replicas))
            for s in req.partition_states),
        topic_ids=dict(req.topic_ids), live_leaders=tuple(_endpoint(e) for e in req.live_leaders))


def stop_replica_request(req: pb.StopReplicaRequest) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=req.controller_id, controller_epoch=req.controller_epoch,
        broker_epoch=req.broker_epoch,
        partition_states=tuple(StopReplicaPartitionState(
            topic=s.topic, partition=s.partition, delete_partition=s.delete_partition,
            leader_epoch=s.leader_epoch if s.HasField("leader_epoch") else None)
            for s in req.partition_states))


def update_metadata_request(req: pb.UpdateMetadataRequest) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=req.controller_id, controller_epoch=req.controller_epoch,
        broker_epoch=req.broker_epoch,
        live_brokers=tuple(_endpoint(b) for b in req.live_brokers),
        controller=(_endpoint(req.controller, with_rack=False) if req.HasField("controller")
                    else None),
        topic_ids=dict(req.topic_ids),
        partition_states=tuple(UpdateMetadataPartitionState(
            topic=s.topic, partition=s.partition, controller_epoch=s.controller_epoch,
            leader=s.leader, leader_epoch=s.leader_epoch, replicas=tuple(s.replicas),
            offline_replicas=tuple(s.offline_replicas), isr=tuple(s.isr),
            partition_epoch=s.partition_epoch, elr=tuple(s.elr),
            last_known_elr=tuple(s.last_known_elr), adding_replicas=tuple(s.adding_replicas),
            removing_replicas=tuple(s.removing_replicas),
            leader_recovery_state=int(s.leader_recovery_state))
            for s in req.partition_states))


class BrokerServicer(replog_pb2_grpc.BrokerServicer):
    """One instance per listener (broker/server.py binds one gRPC server per listener): which
    listener a request arrived on decides the endpoints its Metadata answer gives (KIP-103)."""

    def __init__(self, rm: ReplicaManager, broker_id: int, configs: ConfigManager | None = None,
                 listener: str = PLAINTEXT, principal_builder: PrincipalBuilder | None = None,
                 authorizer=None, auto_topics: AutoTopicCreation | None = None):
        self.rm = rm
        # auto.create.topics.enable's creations (the broker's one, shared with its Kafka
        # listeners); without one, unknown topics stay unknown
        self.auto_topics = auto_topics or AutoTopicCreation(None, rm.config if rm else None)
        self.broker_id = broker_id
        self.configs = configs
        self.listener = listener
        self.principal_builder = principal_builder or PrincipalBuilder()
        self.authorizer = authorizer or ALLOW_ALL

    # ------------------------------------------------------------------ authorization

    def _ctx(self, context, who: Requester | None = None) -> ApiContext:
        """The API layer's context of a request (broker/apis/context.py)."""
        return ApiContext(self.rm, self.broker_id, self.listener,
                          who if who is not None else self._who(context), self.authorizer,
                          self.auto_topics, self.configs)

    def _who(self, context) -> Requester | None:
        """The request's principal and address; None without an authorizer (nothing asks,
        and the data path does not pay for a certificate's mapping)."""
        if self.authorizer is ALLOW_ALL:
            return None
        return grpc_requester(self.principal_builder, context)

    async def _require_cluster(self, context, operation: AclOperation = AclOperation.CLUSTER_ACTION,
                               what: str = "", who: Requester | None = None) -> None:
        """Refuse the whole request unless its principal (``who``, else the context's) may
        ``operation`` on the cluster (Kafka's authorizeClusterOperation)."""
        who = who or self._who(context)
        if not self.authorizer.authorize(who, operation, CLUSTER_RESOURCE):
            await abort(context, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        f"{who.principal} is not authorized to {operation.value} on the "
                        f"cluster{what}")

    async def _guard(self, context, fn):
        try:
            return await fn()
        except RequestError as e:
            await abort(context, e.error_code, str(e))

    # ------------------------------------------------------------------ data plane

    async def Produce(self, request, context):
        who = self._who(context)
        return await self._guard(context, lambda: self._produce(request, who))

    async def ProduceStream(self, request_iterator, context):
        """Produce over one long-lived stream: each request is served exactly as a unary
        Produce, from the moment it arrives (a serving task per request, started in arrival
        order, so the appends of a partition keep the stream's order), and answered with its
        correlation id as soon as it completes: an acks=all request waiting for the ISR holds
        up nothing behind it, as unary calls in flight do not. A request Produce would refuse
        is answered with that error in the message, the stream stays open."""
        # The response headers go at once: they tell the client this broker serves the stream
        # (an older one answers UNIMPLEMENTED), before it writes any request
        # (client/transport.py ProduceStream._handshake).
        await context.send_initial_metadata(())
        who = self._who(context)
        answers: asyncio.Queue = asyncio.Queue()
        serving: set[asyncio.Task] = set()

        async def serve(msg: pb.ProduceStreamRequest) -> None:
            out = pb.ProduceStreamResponse(correlation_id=msg.correlation_id)
            try:
                out.response.CopyFrom(await self._produce(msg.request, who))
            except RequestError as e:
                out.error_code, out.error_message = int(e.error_code), str(e)
            except Exception as e:  # noqa: BLE001 - as a unary call's UNKNOWN status: this
                # request fails, the others on the stream go on
                self.rm.events.error("produce_failed", error=f"{type(e).__name__}: {e}"[:300])
                out.error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                out.error_message = f"{type(e).__name__}: {e}"
            answers.put_nowait(out)

        def served(task: asyncio.Task) -> None:
            serving.discard(task)

        async def read() -> None:
            async for msg in request_iterator:
                task = asyncio.create_task(serve(msg))
                serving.add(task)
                task.add_done_callback(served)
            if serving:  # the client is done writing: answer every request still in flight
                await asyncio.wait(set(serving), return_when=asyncio.ALL_COMPLETED)
            answers.put_nowait(None)

        reader = asyncio.create_task(read())
        reader.add_done_callback(lambda t: t.cancelled() or t.exception() is None
                                 or answers.put_nowait(t.exception()))
        try:
            while (answer := await answers.get()) is not None:
                if isinstance(answer, BaseException):
                    raise answer
                yield answer
        finally:
            # The client went away (or cancelled): what is still being served is abandoned,
            # as a unary call's handler is cancelled with its call.
            reader.cancel()
            for task in list(serving):
                task.cancel()

    async def _produce(self, request: pb.ProduceRequest, who: Requester | None) -> pb.ProduceResponse:  # noqa: E501
        """One Produce, for the unary call and the stream alike; a refused request raises
        RequestError (INVALID_REQUEST, INVALID_REQUIRED_ACKS). A topic ``who`` may not Write
        is answered TOPIC_AUTHORIZATION_FAILED and nothing of it is appended."""
        answers = await apis_produce.produce(self._ctx(None, who), apis_produce.ProduceRequest(
            request.acks, request.timeout_ms or 30000,
            [(TopicPartition(t.topic, pd.partition), pd.records) for t in request.topic_data
             for pd in t.partition_data], refuse_whole=True))
        by_topic: dict[str, list] = {}
        for a in answers:
            r = a.result
            pr = pb.ProducePartitionResponse(partition=a.tp.partition, error_code=int(r.error),
                                             error_message=r.message,
                                             base_offset=r.base_offset,
                                             log_append_time_ms=-1,
                                             log_start_offset=r.log_start_offset,
                                             record_errors=[
                                                 pb.ProduceRecordError(batch_index=i, message=m)
                                                 for i, m in r.record_errors])
            if a.current_leader is not None:
                pr.current_leader.CopyFrom(pb.LeaderAndEpoch(leader_id=a.current_leader[0],
                                                             leader_epoch=a.current_leader[1]))
            by_topic.setdefault(a.tp.topic, []).append(pr)
        return pb.ProduceResponse(responses=[
            pb.ProduceTopicResponse(topic=t, partition_responses=ps)
            for t, ps in by_topic.items()])

    async def Fetch(self, request, context):
        return await self._fetch(request, context)

    async def FetchStream(self, request_iterator, context):
        """Fetch over one long-lived stream: each request is answered, in order, exactly as
        a unary Fetch; a request Fetch would refuse ends the stream with that status (the
        fetcher reopens it, as after a failed call)."""
        # Response headers at once: they tell the fetcher this broker serves the stream before
        # it writes a request (an older broker answers UNIMPLEMENTED instead; a write racing
        # with that answer loses the status, see ReplicaFetcher._fetch_call).
        await context.send_initial_metadata(())
        who = self._who(context)  # one connection, one principal: built once per stream
        async for request in request_iterator:
            yield await self._fetch(request, context, who)

    async def _fetch(self, request, context, who: Requester | None = None):
        has_replica = request.HasField("replica_state")
        parts = []
        invalid = None
        for t in request.topics:
            for fp in t.partitions:
                if (fp.fetch_offset < 0 or fp.partition < 0) and invalid is None:
                    invalid = f"negative fetch offset or partition for {t.topic}"
                parts.append(FetchPartitionRequest(
                    TopicPartition(t.topic, fp.partition), fp.fetch_offset,
                    apis_fetch.partition_max_bytes(fp.partition_max_bytes or (1 << 20)),
                    fp.current_leader_epoch if fp.HasField("current_leader_epoch") else None,
                    fp.last_fetched_epoch if fp.HasField("last_fetched_epoch") else None,
                    fp.log_start_offset if fp.HasField("log_start_offset") else -1))
        try:
            answer = await apis_fetch.fetch(self._ctx(context, who), apis_fetch.FetchRequest(
                parts, max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
                max_bytes=request.max_bytes or (50 << 20),
                replica_id=request.replica_state.broker_id if has_replica else -1,
                broker_epoch=request.replica_state.broker_epoch if has_replica else -1,
                session_id=request.session_id,
                session_epoch=request.session_epoch if request.HasField("session_epoch")
                else None,
                forgotten=[TopicPartition(t.topic, p) for t in request.forgotten_topics_data
                           for p in t.partitions], invalid=invalid))
        except RequestError as e:
            await abort(context, e.error_code, str(e))
        if answer.error:
            return pb.FetchResponse(error_code=int(answer.error), session_id=answer.session_id)
        # Built in place with add(): constructing a FetchTopicResponse from a list of finished
        # partition messages deep-copies each of them, records included - ~10% of a leader's
        # event-loop time under acks=all load (docs/profiles/README.md).
        resp = pb.FetchResponse(session_id=answer.session_id)
        topics: dict[str, pb.FetchTopicResponse] = {}
        for a in answer.partitions:
            r = a.result
            t = topics.get(a.tp.topic)
            if t is None:
                t = topics[a.tp.topic] = resp.responses.add(topic=a.tp.topic)
            pr = t.partitions.add(partition=a.tp.partition, error_code=int(r.error),
                                  high_watermark=r.high_watermark,
                                  last_stable_offset=r.high_watermark,
                                  log_start_offset=r.log_start_offset, records=r.records)
            if r.diverging is not None:
                pr.diverging_epoch.CopyFrom(pb.EpochEndOffset(epoch=r.diverging[0],
                                                              end_offset=r.diverging[1]))
            if a.current_leader is not None:
                pr.current_leader.CopyFrom(pb.LeaderAndEpoch(leader_id=a.current_leader[0],
                                                             leader_epoch=a.current_leader[1]))
        return resp

    async def ListOffsets(self, request, context):
        answers = iter(await apis_offsets.list_offsets(self._ctx(context), [
            apis_offsets.ListOffsetsPartition(
                TopicPartition(t.topic, p.partition), p.timestamp,
                p.current_leader_epoch if p.HasField("current_leader_epoch") else None)
            for t in request.topics for p in t.partitions],
            request.replica_id if request.HasField("replica_id") else -1))
        return pb.ListOffsetsResponse(topics=[pb.ListOffsetsTopicResponse(
            topic=t.topic, partitions=[pb.ListOffsetsPartitionResponse(
                partition=a.tp.partition, error_code=int(a.error), timestamp=a.timestamp,
                offset=a.offset, leader_epoch=a.leader_epoch)
                for a in (next(answers) for _ in t.partitions)])
            for t in request.topics])

    async def OffsetForLeaderEpoch(self, request, context):
        answers = iter(apis_offsets.offset_for_leader_epoch(self._ctx(context), [
            apis_offsets.EpochPartition(
                TopicPartition(t.topic, p.partition), p.leader_epoch,
                p.current_leader_epoch if p.HasField("current_leader_epoch") else None)
            for t in request.topics for p in t.partitions]))
        return pb.OffsetForLeaderEpochResponse(topics=[pb.OffsetForLeaderTopicResult(
            topic=t.topic, partitions=[pb.OffsetForLeaderPartitionResult(
                partition=a.tp.partition, error_code=int(a.error), leader_epoch=a.leader_epoch,
                end_offset=a.end_offset) for a in (next(answers) for _ in t.partitions)])
            for t in request.topics])

    async def Metadata(self, request, context):
        r = await apis_metadata.metadata(self._ctx(context), apis_metadata.MetadataRequest(
            topics=None if request.all_topics else list(request.topics),
            allow_auto_topic_creation=request.allow_auto_topic_creation,
            include_topic_configs=request.include_topic_configs))
        resp = pb.MetadataResponse(brokers=[_endpoint_pb(e, self.listener) for e in r.brokers],
                                   cluster_id=r.cluster_id, controller_id=r.controller_id)
        if r.controller is not None:
            resp.controller.CopyFrom(pb.BrokerEndpoint(broker_id=r.controller.broker_id,
                                                       host=r.controller.host,
                                                       port=r.controller.port,
                                                       listener=self.listener))
        for t in r.topics:
            mt = resp.topics.add(topic=t.name, error_code=int(t.error), topic_id=t.topic_id)
            mt.configs.update(t.configs)
            for p in t.partitions:
                mt.partitions.add(
                    error_code=int(p.error), partition=p.partition, leader_id=p.leader,
                    leader_epoch=p.leader_epoch, replicas=p.replicas, isr=p.isr, elr=p.elr,
                    last_known_elr=p.last_known_elr, offline_replicas=p.offline_replicas,
                    adding_replicas=p.adding_replicas, removing_replicas=p.removing_replicas)
        return resp

    async def GetReplicaLogInfo(self, request, context):
        await self._require_cluster(context)
        refused = fencing.replica_log_info_error(request.broker_id, request.broker_epoch,
                                                 self.broker_id, self.rm.broker_epoch)
        if refused is not None:
            await abort(context, *refused)
        out = []
        for t in request.topic_partitions:
            infos = []
            for pid in t.partitions:
                code, last_epoch, cur_epoch, leo = self.rm.replica_log_info(
                    TopicPartition(t.topic, pid))
                infos.append(pb.PartitionLogInfo(partition=pid, last_written_leader_epoch=last_epoch,  # noqa: E501
                                                 current_leader_epoch=cur_epoch,
                                                 log_end_offset=leo, error_code=int(code)))
            out.append(pb.TopicPartitionLogInfo(topic=t.topic, topic_id=t.topic_id,
                                                partition_log_info=infos))
        return pb.GetReplicaLogInfoResponse(broker_epoch=self.rm.broker_epoch,
                                            topic_partition_log_info=out)

    async def DescribeLogDirs(self, request, context):
        ctx = self._ctx(context)
        # the gRPC request cannot say "none": an empty filter is every partition
        wanted = frozenset((t.topic, p) for t in request.topics for p in t.partitions)
        answer = await apis_log_dirs.describe_log_dirs(ctx, wanted or None)
        if answer.error:
            await abort(context, answer.error, f"{ctx.principal} is not authorized to "
                        f"{AclOperation.DESCRIBE.value} on the cluster")
        results = []
        for d in answer.dirs:
            r = pb.DescribeLogDirsResult(log_dir=d.path, directory_id=d.directory_id,
                                         offline=not d.online, error_code=int(d.error),
                                         total_bytes=d.total_bytes, usable_bytes=d.usable_bytes)
            by_topic: dict[str, list] = {}
            for rep in d.replicas:
                by_topic.setdefault(rep.tp.topic, []).append(pb.DescribeLogDirsPartition(
                    partition=rep.tp.partition, size=rep.size, offset_lag=rep.offset_lag,
                    is_future=rep.is_future))
            r.topics.extend(pb.DescribeLogDirsTopic(topic=t, partitions=ps)
                            for t, ps in sorted(by_topic.items()))
            results.append(r)
        return pb.DescribeLogDirsResponse(results=results)

    async def DeleteRecords(self, request, context):
        """KIP-107 through broker/apis/log_dirs.py, as the Kafka listener's API 21."""
        done = await apis_log_dirs.delete_records(
            self._ctx(context), {TopicPartition(t.topic, p.partition): p.offset
                                 for t in request.topics for p in t.partitions},
            request.timeout_ms)
        return pb.DeleteRecordsResponse(results=[
            pb.DeleteRecordsPartitionResult(topic=tp.topic, partition=tp.partition,
                                            error_code=int(code), error_message=message,
                                            low_watermark=low)
            for tp, (code, low, message) in done.items()])

    async def AlterReplicaLogDirs(self, request, context):
        moves: dict[str, list[TopicPartition]] = {}
        for d in request.dirs:
            moves.setdefault(d.path, []).extend(
                TopicPartition(t.topic, p) for t in d.topics for p in t.partitions)
        results = await apis_log_dirs.alter_replica_log_dirs(self._ctx(context), moves)
        return pb.AlterReplicaLogDirsResponse(results=[
            pb.PartitionResult(topic=tp.topic, partition=tp.partition, error_code=int(code),
                               error_message=message)
            for tp, code, message in results])

    # ------------------------------------------------------------------ controller requests

    async def LeaderAndIsr(self, request, context):
        await self._require_cluster(context)

        async def go():
            results = await self.rm.leader_and_isr(leader_and_isr_request(request))
            return pb.LeaderAndIsrResponse(partition_errors=[
                pb.PartitionResult(topic=tp.topic, partition=tp.partition, error_code=int(c))
                for tp, c in results])
        return await self._guard(context, go)

    async def StopReplica(self, request, context):
        await self._require_cluster(context)

        async def go():
            results = await self.rm.stop_replica(stop_replica_request(request))
            return pb.StopReplicaResponse(partition_errors=[
                pb.PartitionResult(topic=tp.topic, partition=tp.partition, error_code=int(c))
                for tp, c in results])
        return await self._guard(context, go)

    async def UpdateMetadata(self, request, context):
        await self._require_cluster(context)

        async def go():
            self.rm.update_metadata(update_metadata_request(request))
            return pb.UpdateMetadataResponse()
        return await self._guard(context, go)

    # ------------------------------------------------------------------ configs

    async def _config_manager(self, context) -> ConfigManager:
        if self.configs is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                "this broker serves no dynamic configs (no ZooKeeper)")
        return self.configs

    async def DescribeConfigs(self, request, context):
        await self._config_manager(context)
        outcomes = await apis_configs.describe_configs(self._ctx(context), [
            apis_configs.DescribeResource(r.resource_type, r.resource_name,
                                          list(r.configuration_keys))
            for r in request.resources])
        resp = pb.DescribeConfigsResponse()
        for r, o in zip(request.resources, outcomes):
            out = resp.results.add(resource_type=r.resource_type, resource_name=r.resource_name)
            if o.error_code:
                out.error_code, out.error_message = o.error_code, o.error_message or ""
                continue
            for e in o.entries:
                pe = out.configs.add(name=e.name, read_only=e.read_only,
                                     config_source=int(e.source), is_sensitive=e.sensitive)
                if e.value is not None:
                    pe.value = e.value
                if request.include_synonyms:
                    for syn in e.synonyms:
                        ps = pe.synonyms.add(name=syn.name, source=int(syn.source))
                        if syn.value is not None:
                            ps.value = syn.value
        return resp

    async def IncrementalAlterConfigs(self, request, context):
        await self._config_manager(context)
        outcomes = await apis_configs.alter_configs(self._ctx(context), [
            config_requests.AlterResource(
                r.resource_type, r.resource_name,
                tuple((c.name, c.config_operation, c.value if c.HasField("value") else None)
                      for c in r.configs))
            for r in request.resources], request.validate_only)
        resp = pb.IncrementalAlterConfigsResponse()
        for r, o in zip(request.resources, outcomes):
            resp.responses.add(resource_type=r.resource_type, resource_name=r.resource_name,
                               error_code=o.error_code, error_message=o.error_message or "")
        return resp

    # ------------------------------------------------------------------ ACLs (Admin API)

    async def _acl_answer(self, context, answer: apis_acls.AclsAnswer, what: str):
        """A request refused whole is the call's status; a store that failed INTERNAL."""
        if answer.error == ErrorCode.UNKNOWN_SERVER_ERROR:
            await rpc_status.abort(context, grpc.StatusCode.INTERNAL,
                                   ErrorCode.UNKNOWN_SERVER_ERROR,
                                   f"ACLs not {what}: {answer.message}"[:300])
        if answer.error:
            await abort(context, answer.error, answer.message or "")
        return answer.results

    async def CreateAcls(self, request, context):
        refusals = await self._acl_answer(context, await apis_acls.create_acls(
            self._ctx(context), [_parsed(binding_from_pb, m) for m in request.creations]),
            "stored")
        return pb.CreateAclsResponse(results=[
            pb.AclCreationResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(e))
            if e is not None else pb.AclCreationResult(error_code=0) for e in refusals])

    async def DescribeAcls(self, request, context):
        bindings = await self._acl_answer(context, apis_acls.describe_acls(
            self._ctx(context), _parsed(filter_from_pb, request.filter)), "read")
        return pb.DescribeAclsResponse(acls=[binding_pb(b) for b in bindings])

    async def DeleteAcls(self, request, context):
        results = await self._acl_answer(context, await apis_acls.delete_acls(
            self._ctx(context), [_parsed(filter_from_pb, m) for m in request.filters]),
            "deleted")
        resp = pb.DeleteAclsResponse()
        for r in results:
            if isinstance(r, AclError):
                resp.filter_results.add(error_code=int(ErrorCode.INVALID_REQUEST),
                                        error_message=str(r))
            else:
                resp.filter_results.add(error_code=0).matching_acls.extend(
                    binding_pb(b) for b in r)
        return resp


def _parsed(parse, message):
    """``parse(message)``, or the AclError saying why it cannot be read."""
    try:
        return parse(message)
    except AclError as e:
        return e
