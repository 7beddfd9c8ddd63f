"""ssl.principal.mapping.rules: Kafka's SslPrincipalMapperTest cases, one for one."""

from __future__ import annotations

import pytest

from common.security.ssl_principal_mapper import (
    NoMatchingRule,
    SslPrincipalMapper,
    parse_rules,
    split_rules,
)


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
])
def test_valid_rules(rules):
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper.from_rules(rules)


def test_mapper_applies_the_first_matching_rule():
    mapper = SslPrincipalMapper.from_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, "
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
        "DEFAULT")
    assert mapper.get_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.get_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.get_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.get_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.get_name("OU=JavaSoft,O=Sun Microsystems,C=US") == \
        "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_default_when_unset_is_the_name_itself():
    assert SslPrincipalMapper.from_rules(None).get_name("CN=a,O=b") == "CN=a,O=b"


def test_no_matching_rule_is_refused():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x,OU=Other"):
        mapper.get_name("CN=x,OU=Other")


@pytest.mark.parametrize("expected,text", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  , DEFAULT]", "     ,  , RULE:   /  /    ,,,   DEFAULT, ,   "),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    (("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
      "/DEFAULT, DEFAULT]"),
     ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
      "/DEFAULT/,DEFAULT")),
])
def test_rules_splitting(expected, text):
    # Kafka's testRulesSplitting compares the parsed rules' toString
    assert "[" + ", ".join(str(r) for r in parse_rules(split_rules(text))) + "]" == expected


def test_comma_with_whitespace():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.get_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


@pytest.mark.parametrize("replacement,expected", [
    ("$1", "alice"),
    ("$2", "eng"),
    ("$12", "alice2"),   # group 12 does not exist: group 1, then "2" (Java's greedy rule)
    ("$9", "$9"),        # no group 9: literal (Kafka escapes it)
    ("\\$1", "$1"),      # an escaped dollar
    ("$0!", "CN=alice,OU=eng!"),
    ("user-$1", "user-alice"),
])
def test_java_replacement_syntax(replacement, expected):
    mapper = SslPrincipalMapper.from_rules(f"RULE:^CN=([a-z]+),OU=([a-z]+)$/{replacement}/")
    assert mapper.get_name("CN=alice,OU=eng") == expected


def test_a_pattern_that_matches_empty_replaces_at_the_end_too_as_java_does():
    # "abc".replaceAll("(.*)", "x$1") is "xabcx" in Java
    assert SslPrincipalMapper.from_rules("RULE:(.*)/x$1/").get_name("abc") == "xabcx"
