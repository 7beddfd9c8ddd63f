"""The replog controller: Kafka's ZooKeeper-era controller as a separate process.

Pure core (no awaits, no sockets, no kazoo; unit-tested in tests/controller):
    state_machine.py   partition and replica state machines (transition tables)
    selectors.py       leader selectors
    assignment.py      rack-aware / rack-unaware replica assignment
    topics.py          CreateTopics validation, topic configs
    context.py         ControllerContext: the active controller's view of the cluster
    decisions.py       events -> Decision (ZooKeeper writes, state steps, broker requests)
    request_batch.py   Decision -> LeaderAndIsr / UpdateMetadata / StopReplica per broker

Thin shell:
    zk_store.py        ZooKeeper reads and conditional (controller-epoch-checked) writes
    channel.py         ControllerChannelManager: one gRPC channel and send queue per broker
    events.py          the event types of the controller's single queue
    controller.py      election, event queue, applying decisions
    servicer.py        the gRPC Controller service
    metrics.py         Prometheus metrics
    server.py          `run(config) -> int`: the process

Partial (later capabilities): ELR and unclean recovery (design.md#kip-966).
"""
