"""Security: TLS on the listeners, principals, Kafka's ACL authorizer, ZooKeeper ACLs
(design.md#c11)."""
