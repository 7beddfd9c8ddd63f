"""--command-config on every replog subcommand (Kafka's client properties), and what it does
to the channels a command opens."""

from __future__ import annotations

import argparse

import pytest

from admin.cli import _apply_command_config, _leaf_parsers, build_parser
from client import transport
from common.errors import ConfigError
from common.grpc_options import insecure_channel
from common.security.tls import SslChannelFactory
from harness import certs


def _commands(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, p in action.choices.items():
            yield from _commands(p, (*path, name))


def test_every_subcommand_takes_command_config():
    parser = build_parser()
    commands = list(_commands(parser))
    assert len(commands) > 20 and ("topics", "create") in commands
    for leaf in _leaf_parsers(parser):
        assert any("--command-config" in a.option_strings for a in leaf._actions), leaf.prog


def test_command_config_makes_new_pools_open_tls_channels(tmp_path):
    ca = certs.create_ca(tmp_path)
    certs.issue(ca, "alice", tmp_path / "alice.pem")
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={ca.cert_path}\n"
                     f"ssl.keystore.location={tmp_path / 'alice.pem'}\n")
    try:
        _apply_command_config(str(props))
        assert isinstance(transport.ChannelPool()._channel_factory, SslChannelFactory)
        # a pool given its own factory keeps it
        assert transport.ChannelPool(insecure_channel)._channel_factory is insecure_channel
    finally:
        transport.set_default_channel_factory(None)
    assert transport.ChannelPool()._channel_factory is insecure_channel
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    _apply_command_config(str(plain))
    assert transport.ChannelPool()._channel_factory is insecure_channel


def test_a_bad_command_config_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read --command-config file"):
        _apply_command_config(str(tmp_path / "missing.properties"))
    bad = tmp_path / "bad.properties"
    # ("key value" is a valid line, as in Java's Properties; a malformed escape is not)
    bad.write_text("ssl.keystore.location=\\u12\n")
    with pytest.raises(ConfigError, match=r"bad.properties:1: Malformed \\uxxxx encoding"):
        _apply_command_config(str(bad))
