"""A read-only principal (issue 42, "Also"): User:reader holds only Describe and DescribeConfigs,
on its topic and on the cluster, on a real mutual-TLS cluster with Kafka's AclAuthorizer. What
each API gives it, through replog's CLI (gRPC) and librdkafka (the Kafka listener):

- it may see: Metadata (the topic, its partitions and configs), DescribeConfigs of the topic
  and of a broker (secrets null and sensitive), DescribeAcls, the authorized operations
  (exactly Describe and DescribeConfigs, on the topic and on the cluster);
- it may not change or read records: Produce, Fetch, CreateTopics, DeleteTopics,
  CreatePartitions, IncrementalAlterConfigs, CreateAcls are each refused with Kafka's code, and
  nothing changes."""

from __future__ import annotations

import uuid

import pytest

from harness import certs, cluster_security
from harness.local_cluster import LocalCluster
from tests.polling import wait_until
from tests.security.test_authorizer_cluster import _acls, _replog
from tests.security.test_tls_cluster import _librdkafka_ssl, _ssl_dir

TOPIC = "ro"
SECRET = "ro-secret-" + uuid.uuid4().hex[:8]
PASSWORD_KEY = "listener.name.ssl.ssl.key.password"


@pytest.fixture(scope="module")
def secure(zk_server, tmp_path_factory):
    data = tmp_path_factory.mktemp("read-only")
    c = LocalCluster(data / "cluster", brokers=2, security="mtls",
                     zookeeper=f"{zk_server.hosts}/replog-ro-{uuid.uuid4().hex[:10]}")
    c.start()
    try:
        reader = cluster_security.issue_client(c.data_dir, "reader")
        admin = str(c.client_properties_path)
        for args in (("topics", "create", "--topic", TOPIC, "--partitions", "1",
                      "--replication-factor", "2", "--config", "retention.ms=86400000"),
                     ("configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
                      "--add-config", f"{PASSWORD_KEY}={SECRET}")):
            rc, _, err = _replog(*args[:1], *args[1:], "--bootstrap-server",
                                 c.bootstrap_servers, "--command-config", admin)
            assert rc == 0, err
        rc, _, err = _replog("produce", "--bootstrap-server", c.bootstrap_servers, "--topic",
                             TOPIC, "--command-config", admin, stdin=b"r0\nr1\n")
        assert rc == 0, err
        for where in (("--topic", TOPIC), ("--cluster",)):
            _acls(c, "--add", "--allow-principal", "User:reader", "--operation", "Describe",
                  "--operation", "DescribeConfigs", *where)
        # the ACLs reach both brokers through /kafka-acl-changes
        for b in c.brokers:
            wait_until(lambda b=b: _as_reader(c, reader, "topics", "describe", "--topic", TOPIC,
                                              broker=b)[0] == 0,
                       timeout=30, interval=0.5, what=f"reader's Describe on broker {b}")
        yield c, reader
    finally:
        c.stop(graceful=False)


def _as_reader(c: LocalCluster, reader, *args: str, broker: int | None = None,
               stdin: bytes = b"") -> tuple[int, str, str]:
    bootstrap = c.broker(broker).address if broker is not None else c.bootstrap_servers
    return _replog(*args, "--bootstrap-server", bootstrap, "--command-config", str(reader),
                   stdin=stdin)


def _refused(result: tuple[int, str, str], code: str) -> None:
    """Exit 1, its last line an error with Kafka's code or the broker's "is not authorized"."""
    rc, out, err = result
    assert rc != 0 and (code in err or "User:reader is not authorized" in err), (rc, out, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("Error: "), err


@pytest.mark.integration
def test_through_the_cli_it_sees_everything_and_changes_nothing(secure):
    c, reader = secure
    rc, out, err = _as_reader(c, reader, "topics", "describe", "--topic", TOPIC)
    assert rc == 0 and "retention.ms=86400000" in out, err  # Describe + DescribeConfigs
    rc, out, err = _as_reader(c, reader, "configs", "--describe", "--entity-type", "topics",
                              "--entity-name", TOPIC)
    assert rc == 0 and "retention.ms=86400000" in out, err
    rc, out, err = _as_reader(c, reader, "configs", "--describe", "--entity-type", "brokers",
                              "--entity-name", "1", "--all")
    assert rc == 0, err
    assert SECRET not in out and f"{PASSWORD_KEY}=null sensitive=true" in out, out
    rc, out, err = _as_reader(c, reader, "acls", "--list", "--principal", "User:reader")
    assert rc == 0 and "DESCRIBE_CONFIGS" in out, (out, err)

    # with Describe its metadata is served, so each record fails as Kafka's console producer
    # reports it (ErrorLoggingCallback), not the whole command
    rc, _, err = _as_reader(c, reader, "produce", "--topic", TOPIC, stdin=b"x\n")
    assert "TopicAuthorizationException" in err and "Traceback" not in err, err
    _refused(_as_reader(c, reader, "consume", "--topic", TOPIC, "--from-beginning",
                        "--max-messages", "1", "--timeout-ms", "10000"),
             "TOPIC_AUTHORIZATION_FAILED")
    _refused(_as_reader(c, reader, "configs", "--alter", "--entity-type", "topics",
                        "--entity-name", TOPIC, "--add-config", "retention.ms=1"),
             "TOPIC_AUTHORIZATION_FAILED")
    _refused(_as_reader(c, reader, "topics", "create", "--topic", "ro-new", "--partitions", "1",
                        "--replication-factor", "1"), "TOPIC_AUTHORIZATION_FAILED")
    _refused(_as_reader(c, reader, "topics", "alter", "--topic", TOPIC, "--partitions", "2"),
             "TOPIC_AUTHORIZATION_FAILED")
    _refused(_as_reader(c, reader, "topics", "delete", "--topic", TOPIC),
             "TOPIC_AUTHORIZATION_FAILED")
    _refused(_as_reader(c, reader, "acls", "--add", "--allow-principal", "User:reader",
                        "--operation", "All", "--topic", TOPIC), "CLUSTER_AUTHORIZATION_FAILED")
    # nothing changed: the admin still sees the topic with 1 partition, its retention and its
    # two records
    admin = str(c.client_properties_path)
    rc, out, err = _replog("topics", "describe", "--topic", TOPIC, "--bootstrap-server",
                           c.bootstrap_servers, "--command-config", admin)
    assert rc == 0 and "PartitionCount: 1" in out and "retention.ms=86400000" in out, out
    rc, out, err = _replog("consume", "--topic", TOPIC, "--from-beginning", "--max-messages",
                           "2", "--timeout-ms", "10000", "--bootstrap-server",
                           c.bootstrap_servers, "--command-config", admin)
    assert rc == 0 and out.split() == ["r0", "r1"], err
    rc, out, _ = _replog("topics", "list", "--bootstrap-server", c.bootstrap_servers,
                         "--command-config", admin)
    assert "ro-new" not in out.split()


@pytest.mark.integration
def test_through_librdkafka_it_sees_metadata_configs_and_its_operations(secure):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import (
        AclOperation,
        AdminClient,
        ConfigResource,
        NewTopic,
        ResourceType,
    )
    c, _ = secure
    keystore = cluster_security.keystore_path(c.data_dir, "client-reader")
    admin = AdminClient({"bootstrap.servers": c.kafka_bootstrap_servers,
                         **_librdkafka_ssl(keystore, _ssl_dir(c) / certs.CA_CERT)})
    assert TOPIC in admin.list_topics(timeout=20).topics
    [f] = admin.describe_topics(TopicCollection([TOPIC]), include_authorized_operations=True,
                                request_timeout=20).values()
    t = f.result(timeout=30)
    assert set(t.authorized_operations) == {AclOperation.DESCRIBE,
                                            AclOperation.DESCRIBE_CONFIGS}
    assert len(t.partitions) == 1
    cl = admin.describe_cluster(include_authorized_operations=True,
                                request_timeout=20).result(timeout=30)
    assert set(cl.authorized_operations) == {AclOperation.DESCRIBE,
                                             AclOperation.DESCRIBE_CONFIGS}
    got = {r.restype: f.result(timeout=30) for r, f in admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, TOPIC), ConfigResource(ResourceType.BROKER, "1")],
        request_timeout=20).items()}
    assert got[ResourceType.TOPIC]["retention.ms"].value == "86400000"
    e = got[ResourceType.BROKER][PASSWORD_KEY]
    assert e.is_sensitive and e.value is None
    [f] = admin.create_topics([NewTopic("ro-rdkafka", 1, 1)], request_timeout=20).values()
    with pytest.raises(KafkaException) as err:
        f.result(timeout=30)
    assert err.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
