"""Kafka's ACL APIs a broker answers through its authorizer: DescribeAcls (29), CreateAcls (30),
DeleteAcls (31). Described from Kafka's message JSON files (see messages.py); every version
Kafka 3.x has (0-3, flexible from 2). Enum fields carry Kafka's codes (common/security/acl.py);
a pattern type before v1 is LITERAL (3)."""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct


class AclApiKey:
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31


def _filter_fields():
    return (f("resource_type_filter", "int8"),
            f("resource_name_filter", "string", nullable="0+", default=None),
            f("pattern_type_filter", "int8", "1+", default=3),
            f("principal_filter", "string", nullable="0+", default=None),
            f("host_filter", "string", nullable="0+", default=None),
            f("operation", "int8"),
            f("permission_type", "int8"))


def _entry_fields():
    return (f("principal", "string"), f("host", "string"), f("operation", "int8"),
            f("permission_type", "int8"))


DESCRIBE_ACLS_REQUEST = struct(*_filter_fields())
DESCRIBE_ACLS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", nullable="0+", default=None),
    f("resources", array(struct(
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("pattern_type", "int8", "1+", default=3),
        f("acls", array(struct(*_entry_fields())))))),
)

CREATE_ACLS_REQUEST = struct(
    f("creations", array(struct(
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("resource_pattern_type", "int8", "1+", default=3),
        *_entry_fields()))),
)
CREATE_ACLS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("results", array(struct(
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None)))),
)

DELETE_ACLS_REQUEST = struct(f("filters", array(struct(*_filter_fields()))))
DELETE_ACLS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("filter_results", array(struct(
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("matching_acls", array(struct(
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("pattern_type", "int8", "1+", default=3),
            *_entry_fields())))))),
)

APIS: list[Api] = [
    make_api(AclApiKey.DESCRIBE_ACLS, "DescribeAcls", "0-3", "2+",
             DESCRIBE_ACLS_REQUEST, DESCRIBE_ACLS_RESPONSE),
    make_api(AclApiKey.CREATE_ACLS, "CreateAcls", "0-3", "2+",
             CREATE_ACLS_REQUEST, CREATE_ACLS_RESPONSE),
    make_api(AclApiKey.DELETE_ACLS, "DeleteAcls", "0-3", "2+",
             DELETE_ACLS_REQUEST, DELETE_ACLS_RESPONSE),
]
