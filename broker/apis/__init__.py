"""The broker's client-facing API layer (Kafka's KafkaApis): one function per operation, with
typed requests and results, behind both front-ends.

The gRPC servicer (broker/servicer.py) and the Kafka listener (broker/kafka_listener.py and
its API modules) decode their wire form into a request of this package, call its function
with an ``ApiContext`` (the replica manager, the authorizer and who is asking), and encode the
result in their wire form. Authorization, validation, the request metrics and the assembly of
an answer (Metadata's topics and endpoints, Fetch's ACL filtering, the leader hints) happen
here, once; what differs between the wires (a gRPC status for a whole-request failure, a Kafka
error code in the body; field defaults; Kafka's version differences) stays in the front-ends.
docs/kafka-protocol.md, "The API layer", says what lives where and how to add an API.

- ``context``: ApiContext, the authorization helpers every API uses;
- ``metadata``: Metadata;
- ``fetch``: Fetch (the records stay file regions: zero-copy is the front-end's to keep);
- ``produce``: Produce;
- ``offsets``: ListOffsets and OffsetForLeaderEpoch;
- ``configs``: DescribeConfigs, IncrementalAlterConfigs and AlterConfigs;
- ``acls``: DescribeAcls, CreateAcls and DeleteAcls;
- ``log_dirs``: DescribeLogDirs, AlterReplicaLogDirs and DeleteRecords;
- ``admin``: the checks of the admin APIs the Kafka listener forwards to the controller, and
  DescribeCluster.
"""
