# mypy: disable-error-code="no-untyped-call"
# (the generated codec's classes take keyword arguments without annotations)
"""The group APIs on the Kafka listener: each request, decoded by the generated codec
(common/kafka_protocol/generated/), becomes one event of the group coordinator core
(broker/group/events.py), and each `Answer` a response of the request's version (Kafka's
KafkaApis.handleJoinGroupRequest and its siblings).

    FindCoordinator  the leader of __consumer_offsets-partition_for(group), batched keys from
                     v4 (KIP-699); creates __consumer_offsets on first use (offsets_topic.py)
    JoinGroup, SyncGroup, Heartbeat, LeaveGroup (v3+ batch)
    OffsetCommit, OffsetFetch (v8+ batched groups, KIP-709), OffsetDelete
    ListGroups (v4 states filter, KIP-518; v5 types), DescribeGroups, DeleteGroups

Older versions' missing fields take Kafka's defaults: JoinGroup v0's rebalance timeout is its
session timeout, LeaveGroup v0-2 carry one member (its error is the top-level one), OffsetFetch
v0-7 one group (v0-1 put a group error on every partition), OffsetCommit v0 has no generation.

Authorization, as KafkaApis (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED):
FindCoordinator Describe on the group; JoinGroup, SyncGroup, Heartbeat, LeaveGroup Read on the
group; OffsetCommit Read on the group and on each topic (a topic this broker does not know is
UNKNOWN_TOPIC_OR_PARTITION); OffsetFetch Describe on the group and on each topic (an all-topics
fetch leaves the others out); ListGroups Describe on the cluster or else lists only the groups
it may Describe; DescribeGroups Describe; DeleteGroups Delete; OffsetDelete Delete on the group
and Read on each topic.

A FindCoordinator for transactions (key type 1) still answers COORDINATOR_NOT_AVAILABLE: there
is no transaction coordinator (broker/kafka_unserved.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any

from broker.group import effects as X
from broker.group import events as E
from broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from broker.group.offsets_topic import OffsetsTopicCreation
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey as K
from common.kafka_protocol.generated import delete_groups_response as dgr
from common.kafka_protocol.generated import describe_groups_response as dsr
from common.kafka_protocol.generated import find_coordinator_response as fcr
from common.kafka_protocol.generated import heartbeat_response as hbr
from common.kafka_protocol.generated import join_group_response as jgr
from common.kafka_protocol.generated import leave_group_response as lgr
from common.kafka_protocol.generated import list_groups_response as lsr
from common.kafka_protocol.generated import offset_commit_response as ocr
from common.kafka_protocol.generated import offset_delete_response as odr
from common.kafka_protocol.generated import offset_fetch_response as ofr
from common.kafka_protocol.generated import sync_group_response as sgr
from common.names import TopicPartition
from common.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_RESOURCE,
    AclOperation,
    ResourcePattern,
    ResourceType,
)

Handler = Callable[[Any, int], Awaitable[Any]]
_E = ErrorCode
_GROUP_KEY, _TRANSACTION_KEY = 0, 1  # FindCoordinatorRequest.CoordinatorType
_NOT_AVAILABLE = "The coordinator is not available."  # Errors.message()
GROUP_TYPE = "classic"  # ListGroups v5 (KIP-848): the only type this coordinator has
# The request's client id (its header's), set by the listener for every request it serves:
# JoinGroup's member ids are client.id-UUID and DescribeGroups shows it (Kafka's
# RequestContext.clientId).
current_client_id: ContextVar[str] = ContextVar("current_client_id", default="")

# The APIs served here, with the generated request and response classes (the listener's
# typed handlers).
API_KEYS = frozenset({K.FIND_COORDINATOR, K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT,
                      K.LEAVE_GROUP, K.OFFSET_COMMIT, K.OFFSET_FETCH, K.LIST_GROUPS,
                      K.DESCRIBE_GROUPS, K.DELETE_GROUPS, K.OFFSET_DELETE})


def handlers(listener: Any) -> dict[int, Handler]:
    """API key -> handler(request, version); none without a coordinator (the listener then
    keeps kafka_unserved's answers of a broker that has none)."""
    groups: GroupCoordinator | None = getattr(listener, "groups", None)
    if groups is None:
        return {}
    api = GroupApis(listener, groups)
    return {
        K.FIND_COORDINATOR: api.find_coordinator,
        K.JOIN_GROUP: api.join_group,
        K.SYNC_GROUP: api.sync_group,
        K.HEARTBEAT: api.heartbeat,
        K.LEAVE_GROUP: api.leave_group,
        K.OFFSET_COMMIT: api.offset_commit,
        K.OFFSET_FETCH: api.offset_fetch,
        K.LIST_GROUPS: api.list_groups,
        K.DESCRIBE_GROUPS: api.describe_groups,
        K.DELETE_GROUPS: api.delete_groups,
        K.OFFSET_DELETE: api.offset_delete,
    }


def _group(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name)


class GroupApis:
    def __init__(self, listener: Any, groups: GroupCoordinator):
        self.listener = listener
        self.groups = groups
        self.creation = OffsetsTopicCreation(listener.controller, listener.rm.config,
                                             getattr(listener, "events", None))

    @property
    def ctx(self) -> Any:
        """The API layer's context of the request being served (broker/apis/context.py):
        its requester, the authorizer, the replica manager and the listener's name."""
        return self.listener.api_context()

    # ------------------------------------------------------------------ authorization

    def _allowed(self, operation: AclOperation, group_id: str) -> bool:
        who = self.ctx.requester
        if self.ctx.authorizer.allows_everything(who):
            return True
        if not group_id:  # no resource to grant it on
            return False
        return bool(self.ctx.authorizer.authorize(who, operation, _group(group_id)))

    def _client(self) -> tuple[str, str]:
        host = self.ctx.requester.host
        return current_client_id.get(), f"/{host}" if host else ""  # InetAddress.toString

    # ------------------------------------------------------------------ FindCoordinator

    async def find_coordinator(self, req: Any, version: int) -> fcr.FindCoordinatorResponse:
        keys = list(req.coordinator_keys) if version >= 4 else [req.key]
        answers = [await self._coordinator(key, req.key_type) for key in keys]
        if version < 4:  # one key, in the top-level fields
            [c] = answers
            return fcr.FindCoordinatorResponse(
                throttle_time_ms=0, error_code=c.error_code, error_message=c.error_message,
                node_id=c.node_id, host=c.host, port=c.port)
        return fcr.FindCoordinatorResponse(throttle_time_ms=0, coordinators=answers)

    async def _coordinator(self, key: str, key_type: int) -> fcr.Coordinator:
        def fail(error: ErrorCode, message: str | None) -> fcr.Coordinator:
            return fcr.Coordinator(key=key, node_id=-1, host="", port=-1,
                                   error_code=int(error), error_message=message)
        if key_type == _TRANSACTION_KEY:
            return fail(_E.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        if key_type != _GROUP_KEY:
            return fail(_E.INVALID_REQUEST, f"coordinator key type {key_type} is not supported")
        if not self._allowed(AclOperation.DESCRIBE, key):
            return fail(_E.GROUP_AUTHORIZATION_FAILED, None)
        md = self.ctx.rm.metadata
        info = md.partitions.get(TopicPartition(OFFSETS_TOPIC, self.groups.partition_for(key)))
        if info is None:
            if not md.partitions_of(OFFSETS_TOPIC):
                await self.creation.ensure(len(md.brokers))
            return fail(_E.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        broker = md.brokers.get(info.leader)
        node = broker.for_listener(self.ctx.listener) if broker is not None else None
        if node is None:
            return fail(_E.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE)
        return fcr.Coordinator(key=key, node_id=node.broker_id, host=node.host, port=node.port,
                               error_code=0, error_message=None)

    # ------------------------------------------------------------------ membership

    async def join_group(self, req: Any, version: int) -> jgr.JoinGroupResponse:
        if not self._allowed(AclOperation.READ, req.group_id):
            r = X.JoinGroupResponse(_E.GROUP_AUTHORIZATION_FAILED)
        else:
            client_id, host = self._client()
            r = await self.groups.call(E.JoinGroup(
                group_id=req.group_id, member_id=req.member_id,
                group_instance_id=req.group_instance_id, client_id=client_id,
                client_host=host, session_timeout_ms=req.session_timeout_ms,
                # v0 has no rebalance timeout: the session timeout (JoinGroupRequest)
                rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1
                else req.session_timeout_ms,
                protocol_type=req.protocol_type,
                protocols=tuple(E.Protocol(p.name, bytes(p.metadata)) for p in req.protocols),
                reason=req.reason, api_version=version))
        return jgr.JoinGroupResponse(
            throttle_time_ms=0, error_code=int(r.error), generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            # before v7 the protocol name is not nullable
            protocol_name=r.protocol_name if version >= 7 else (r.protocol_name or ""),
            leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
            members=[jgr.JoinGroupResponseMember(member_id=m.member_id,
                                                 group_instance_id=m.group_instance_id,
                                                 metadata=m.metadata) for m in r.members])

    async def sync_group(self, req: Any, version: int) -> sgr.SyncGroupResponse:
        if not self._allowed(AclOperation.READ, req.group_id):
            r = X.SyncGroupResponse(_E.GROUP_AUTHORIZATION_FAILED)
        else:
            r = await self.groups.call(E.SyncGroup(
                group_id=req.group_id, generation_id=req.generation_id,
                member_id=req.member_id, group_instance_id=req.group_instance_id,
                protocol_type=req.protocol_type, protocol_name=req.protocol_name,
                assignments=tuple((a.member_id, bytes(a.assignment))
                                  for a in req.assignments), api_version=version))
        return sgr.SyncGroupResponse(throttle_time_ms=0, error_code=int(r.error),
                                     protocol_type=r.protocol_type,
                                     protocol_name=r.protocol_name, assignment=r.assignment)

    async def heartbeat(self, req: Any, version: int) -> hbr.HeartbeatResponse:
        if not self._allowed(AclOperation.READ, req.group_id):
            error = _E.GROUP_AUTHORIZATION_FAILED
        else:
            r = await self.groups.call(E.Heartbeat(
                group_id=req.group_id, generation_id=req.generation_id,
                member_id=req.member_id, group_instance_id=req.group_instance_id,
                api_version=version))
            error = r.error
        return hbr.HeartbeatResponse(throttle_time_ms=0, error_code=int(error))

    async def leave_group(self, req: Any, version: int) -> lgr.LeaveGroupResponse:
        members = tuple(E.MemberIdentity(m.member_id, m.group_instance_id, m.reason)
                        for m in req.members) if version >= 3 \
            else (E.MemberIdentity(req.member_id),)
        if not self._allowed(AclOperation.READ, req.group_id):
            r = X.LeaveGroupResponse(_E.GROUP_AUTHORIZATION_FAILED)
        else:
            r = await self.groups.call(E.LeaveGroup(group_id=req.group_id, members=members,
                                                    api_version=version))
        if version < 3:
            # one member: its error is the answer's (LeaveGroupResponse's v0-2 form)
            error = r.error if r.error is not _E.NONE or not r.members else r.members[0].error
            return lgr.LeaveGroupResponse(throttle_time_ms=0, error_code=int(error))
        return lgr.LeaveGroupResponse(throttle_time_ms=0, error_code=int(r.error), members=[
            lgr.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                               error_code=int(m.error)) for m in r.members])

    # ------------------------------------------------------------------ offsets

    def _topic_errors(self, operation: AclOperation, names: Iterable[str]
                      ) -> dict[str, ErrorCode]:
        """Topics the request may not use: not authorized, or unknown to this broker."""
        names = list(dict.fromkeys(names))
        denied = self.ctx.denied_topics(operation, names)
        known = self.ctx.rm.metadata
        out: dict[str, ErrorCode] = {}
        for n in names:
            if n in denied:
                out[n] = _E.TOPIC_AUTHORIZATION_FAILED
            elif not known.partitions_of(n):
                out[n] = _E.UNKNOWN_TOPIC_OR_PARTITION
        return out

    async def offset_commit(self, req: Any, version: int) -> ocr.OffsetCommitResponse:
        errors: dict[tuple[str, int], ErrorCode] = {}
        if not self._allowed(AclOperation.READ, req.group_id):
            for t in req.topics:
                for p in t.partitions:
                    errors[(t.name, p.partition_index)] = _E.GROUP_AUTHORIZATION_FAILED
        else:
            refused = self._topic_errors(AclOperation.READ, (t.name for t in req.topics))
            md = self.ctx.rm.metadata
            todo: list[tuple[str, tuple[E.CommitPartition, ...]]] = []
            for t in req.topics:
                ok = []
                for p in t.partitions:
                    error = refused.get(t.name)
                    if error is None and TopicPartition(t.name, p.partition_index) \
                            not in md.partitions:
                        error = _E.UNKNOWN_TOPIC_OR_PARTITION
                    if error is not None:
                        errors[(t.name, p.partition_index)] = error
                    else:
                        ok.append(E.CommitPartition(
                            p.partition_index, p.committed_offset,
                            p.committed_leader_epoch if version >= 6 else -1,
                            p.committed_metadata))
                if ok:
                    todo.append((t.name, tuple(ok)))
            if todo:
                r = await self.groups.call(E.OffsetCommit(
                    group_id=req.group_id,
                    generation_id=req.generation_id_or_member_epoch if version >= 1
                    else E.NO_GENERATION,
                    member_id=req.member_id if version >= 1 else E.UNKNOWN_MEMBER_ID,
                    group_instance_id=req.group_instance_id,
                    retention_time_ms=req.retention_time_ms if 2 <= version <= 4
                    else E.DEFAULT_RETENTION_TIME,
                    topics=tuple(todo), api_version=version))
                for name, parts in r.topics:
                    for pe in parts:
                        errors[(name, pe.partition)] = pe.error
        return ocr.OffsetCommitResponse(throttle_time_ms=0, topics=[
            ocr.OffsetCommitResponseTopic(name=t.name, partitions=[
                ocr.OffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=int(errors.get((t.name, p.partition_index), _E.NONE)))
                for p in t.partitions]) for t in req.topics])

    async def _fetch_group(self, group_id: str,
                           topics: list[tuple[str, list[int]]] | None,
                           require_stable: bool, version: int) -> X.FetchedGroup:
        if not self._allowed(AclOperation.DESCRIBE, group_id):
            return X.FetchedGroup(group_id, _E.GROUP_AUTHORIZATION_FAILED)
        if topics is None:
            r = await self.groups.call(E.OffsetFetch(
                groups=(E.FetchGroup(group_id, None),), require_stable=require_stable,
                api_version=version))
            g = r.groups[0]
            # every offset: those of topics it may not Describe are left out (KafkaApis)
            denied = self.ctx.denied_topics(AclOperation.DESCRIBE, (n for n, _ in g.topics))
            return X.FetchedGroup(g.group_id, g.error, tuple(
                (n, ps) for n, ps in g.topics if n not in denied))
        denied = self.ctx.denied_topics(AclOperation.DESCRIBE, (n for n, _ in topics))
        asked = tuple((n, tuple(ps)) for n, ps in topics if n not in denied)
        # the core is asked even when every topic is refused: the group's own error (loading,
        # not the coordinator) is the answer's
        r = await self.groups.call(E.OffsetFetch(
            groups=(E.FetchGroup(group_id, asked),), require_stable=require_stable,
            api_version=version))
        g = r.groups[0]
        fetched = dict(g.topics)
        return X.FetchedGroup(g.group_id, g.error, tuple(
            (n, tuple(X.FetchedOffset(p, error=_E.TOPIC_AUTHORIZATION_FAILED) for p in ps)
             if n in denied else fetched.get(n, tuple(X.FetchedOffset(p) for p in ps)))
            for n, ps in topics))

    async def offset_fetch(self, req: Any, version: int) -> ofr.OffsetFetchResponse:
        if version >= 8:
            out = []
            for rg in req.groups:
                topics = None if rg.topics is None else \
                    [(t.name, list(t.partition_indexes)) for t in rg.topics]
                g = await self._fetch_group(rg.group_id, topics, req.require_stable, version)
                out.append(ofr.OffsetFetchResponseGroup(
                    group_id=rg.group_id, error_code=int(g.error), topics=[
                        ofr.OffsetFetchResponseTopics(name=n, partitions=[
                            ofr.OffsetFetchResponsePartitions(
                                partition_index=o.partition, committed_offset=o.offset,
                                committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                                error_code=int(o.error)) for o in ps])
                        for n, ps in g.topics]))
            return ofr.OffsetFetchResponse(throttle_time_ms=0, groups=out)
        # v0-1 cannot ask for every offset; v2-7 do with a null list
        topics = None if req.topics is None else \
            [(t.name, list(t.partition_indexes)) for t in req.topics]
        g = await self._fetch_group(req.group_id, topics,
                                    req.require_stable if version >= 7 else False, version)
        group_error = g.error
        if version < 2 and group_error is not _E.NONE:
            # no top-level error before v2: every requested partition carries it
            g = X.FetchedGroup(g.group_id, g.error, tuple(
                (n, tuple(X.FetchedOffset(p, error=group_error) for p in ps))
                for n, ps in topics or ()))
        return ofr.OffsetFetchResponse(
            throttle_time_ms=0, error_code=int(group_error), topics=[
                ofr.OffsetFetchResponseTopic(name=n, partitions=[
                    ofr.OffsetFetchResponsePartition(
                        partition_index=o.partition, committed_offset=o.offset,
                        committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                        error_code=int(o.error)) for o in ps])
                for n, ps in g.topics])

    async def offset_delete(self, req: Any, version: int) -> odr.OffsetDeleteResponse:
        if not self._allowed(AclOperation.DELETE, req.group_id):
            return odr.OffsetDeleteResponse(
                error_code=int(_E.GROUP_AUTHORIZATION_FAILED), throttle_time_ms=0, topics=[])
        refused = self._topic_errors(AclOperation.READ, (t.name for t in req.topics))
        errors: dict[tuple[str, int], ErrorCode] = {
            (t.name, p.partition_index): refused[t.name]
            for t in req.topics if t.name in refused for p in t.partitions}
        todo = tuple((t.name, tuple(p.partition_index for p in t.partitions))
                     for t in req.topics if t.name not in refused)
        top = _E.NONE
        if todo or not req.topics:
            r = await self.groups.call(E.OffsetDelete(group_id=req.group_id, topics=todo,
                                                      api_version=version))
            top = r.error
            for name, parts in r.topics:
                for pe in parts:
                    errors[(name, pe.partition)] = pe.error
        if top is not _E.NONE:
            return odr.OffsetDeleteResponse(error_code=int(top), throttle_time_ms=0, topics=[])
        return odr.OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
            odr.OffsetDeleteResponseTopic(name=t.name, partitions=[
                odr.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index,
                    error_code=int(errors.get((t.name, p.partition_index), _E.NONE)))
                for p in t.partitions]) for t in req.topics])

    # ------------------------------------------------------------------ administration

    async def list_groups(self, req: Any, version: int) -> lsr.ListGroupsResponse:
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        if types and GROUP_TYPE not in types:
            return lsr.ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[])
        r = await self.groups.call(E.ListGroups(
            states_filter=tuple(req.states_filter) if version >= 4 else (),
            api_version=version))
        listed = list(r.groups)
        who = self.ctx.requester
        if not self.ctx.authorizer.allows_everything(who) and not self.ctx.authorized(
                AclOperation.DESCRIBE, CLUSTER_RESOURCE):
            listed = [g for g in listed if self._allowed(AclOperation.DESCRIBE, g.group_id)]
        return lsr.ListGroupsResponse(throttle_time_ms=0, error_code=int(r.error), groups=[
            lsr.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                            group_state=g.state, group_type=GROUP_TYPE) for g in listed])

    async def describe_groups(self, req: Any, version: int) -> dsr.DescribeGroupsResponse:
        names = list(req.groups)
        allowed = [g for g in names if self._allowed(AclOperation.DESCRIBE, g)]
        found: dict[str, X.DescribedGroup] = {}
        if allowed:
            r = await self.groups.call(E.DescribeGroups(group_ids=tuple(allowed),
                                                        api_version=version))
            found = {g.group_id: g for g in r.groups}
        out = []
        for name in names:
            g = found.get(name) or X.DescribedGroup(name, _E.GROUP_AUTHORIZATION_FAILED)
            d = dsr.DescribedGroup(
                error_code=int(g.error), group_id=name, group_state=g.state,
                protocol_type=g.protocol_type, protocol_data=g.protocol_data, members=[
                    dsr.DescribedGroupMember(
                        member_id=m.member_id, group_instance_id=m.group_instance_id,
                        client_id=m.client_id, client_host=m.client_host,
                        member_metadata=m.metadata, member_assignment=m.assignment)
                    for m in g.members],
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
            if version >= 3 and req.include_authorized_operations and name in found:
                d.authorized_operations = self.ctx.authorized_operations(_group(name)) \
                    if name else AUTHORIZED_OPERATIONS_OMITTED
            out.append(d)
        return dsr.DescribeGroupsResponse(throttle_time_ms=0, groups=out)

    async def delete_groups(self, req: Any, version: int) -> dgr.DeleteGroupsResponse:
        names = list(req.groups_names)
        allowed = [g for g in names if self._allowed(AclOperation.DELETE, g)]
        results: dict[str, ErrorCode] = {}
        if allowed:
            r = await self.groups.call(E.DeleteGroups(group_ids=tuple(allowed),
                                                      api_version=version))
            results = dict(r.results)
        return dgr.DeleteGroupsResponse(throttle_time_ms=0, results=[
            dgr.DeletableGroupResult(
                group_id=g, error_code=int(results.get(g, _E.GROUP_AUTHORIZATION_FAILED)))
            for g in names])
