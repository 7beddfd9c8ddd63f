"""What must hold of a GroupCoordinatorCore after every step, for the scenario scripts and the
property test (tests/group/test_group_properties.py). Each rule names what it protects."""

from __future__ import annotations

from broker.group.core import GroupCoordinatorCore
from broker.group.state import GroupState

S = GroupState


def violations(core: GroupCoordinatorCore) -> list[str]:
    out = []
    for gid, g in core.groups.items():
        members = g.members
        # only live groups are kept: Dead ones are forgotten in the step that kills them
        if g.is_(S.Dead):
            out.append(f"{gid}: a Dead group is still kept")
        if core.partition_of(gid) not in core.owned:
            out.append(f"{gid}: kept while its partition is not owned")
        # Stable: every member has its part of the stored assignment
        if g.is_(S.Stable):
            for m in members.values():
                if m.assignment is None:
                    out.append(f"{gid}: Stable, but member {m.member_id} has no assignment")
            if g.protocol_name is None:
                out.append(f"{gid}: Stable without a protocol")
        if g.is_(S.Empty) and members:
            out.append(f"{gid}: Empty with members {sorted(members)}")
        if g.state in (S.Stable, S.CompletingRebalance) and not members:
            out.append(f"{gid}: {g.state} without members")
        # one leader, a member; none only without members
        if members and g.leader_id not in members:
            out.append(f"{gid}: leader {g.leader_id} is not a member")
        if not members and g.leader_id is not None:
            out.append(f"{gid}: leader {g.leader_id} without members")
        # a static id maps to exactly the member holding it
        for inst, mid in g.static_members.items():
            if mid not in members or members[mid].group_instance_id != inst:
                out.append(f"{gid}: static {inst} -> {mid} is not that member")
        statics = [m.group_instance_id for m in members.values() if m.is_static]
        if len(statics) != len(set(statics)) or len(statics) != len(g.static_members):
            out.append(f"{gid}: static members {statics} vs map {g.static_members}")
        if g.pending_members & set(members):
            out.append(f"{gid}: pending members {sorted(g.pending_members & set(members))} "
                       "are members too")
        if not g.pending_sync <= set(members):
            out.append(f"{gid}: pending sync {sorted(g.pending_sync - set(members))} not members")
        # parked requests: a SyncGroup waits only for an assignment being made
        for m in members.values():
            if m.awaiting_sync is not None and not g.is_(S.CompletingRebalance):
                out.append(f"{gid}: {m.member_id} parked a SyncGroup in {g.state}")
            for rid in (m.awaiting_join, m.awaiting_sync):
                if rid is not None and rid not in core.open_requests:
                    out.append(f"{gid}: {m.member_id} holds request {rid}, already answered")
        # every member agrees with the group's protocol type and supports its protocol
        if members:
            if any(m.protocol_type != g.protocol_type for m in members.values()) and \
                    g.protocol_type is not None:
                out.append(f"{gid}: a member's protocol type differs from {g.protocol_type}")
            if g.state in (S.Stable, S.CompletingRebalance) and g.protocol_name is not None:
                for m in members.values():
                    if g.protocol_name not in m.protocol_names:
                        out.append(f"{gid}: {m.member_id} does not support {g.protocol_name}")
        if g.generation_id < 0:
            out.append(f"{gid}: negative generation {g.generation_id}")
    if core.owned & set(core.loading):
        out.append(f"partitions both owned and loading: {sorted(core.owned & set(core.loading))}")
    return out
