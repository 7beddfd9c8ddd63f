"""Security: TLS on the listeners, principals, Kafka's ACL authorizer, ZooKeeper ACLs (SPEC C11)."""
