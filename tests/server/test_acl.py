"""The listener's ACL file: literal and prefixed names, the ``User:*`` wildcard, Read implying
Describe, deny by default, both file formats, and one clear error per bad line."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.errors import ConfigError
from streamtasks.server.acl import load_acl_file, parse_acl_text, parse_acl_yaml

TEXT = """
# who           what              may
User:alice      group:orders      Read
User:bob        group:report-*    Describe
User:*          group:public-*    Read      # everyone authenticated
User:alice      topic:orders      Describe
"""


def test_literal_names_match_only_themselves() -> None:
    acls = parse_acl_text(TEXT)
    assert acls.allows("User:alice", "group", "orders", "Read")
    assert not acls.allows("User:alice", "group", "orders2", "Read")
    assert not acls.allows("User:alice", "group", "order", "Read")


def test_read_implies_describe_but_not_the_reverse() -> None:
    acls = parse_acl_text(TEXT)
    assert acls.allows("User:alice", "group", "orders", "Describe")
    assert acls.allows("User:bob", "group", "report-daily", "Describe")
    assert not acls.allows("User:bob", "group", "report-daily", "Read")


def test_prefixes_and_the_wildcard_principal() -> None:
    acls = parse_acl_text(TEXT)
    assert acls.allows("User:bob", "group", "report-", "Describe")
    assert not acls.allows("User:bob", "group", "repor", "Describe")
    for who in ("User:alice", "User:bob", "User:carol", "User:CN=client"):
        assert acls.allows(who, "group", "public-x", "Read")
    assert not acls.allows("User:carol", "group", "orders", "Read")


def test_deny_by_default_and_resources_are_separate() -> None:
    acls = parse_acl_text(TEXT)
    assert not acls.allows("User:mallory", "group", "anything", "Describe")
    assert acls.allows("User:alice", "topic", "orders", "Describe")
    assert not acls.allows("User:bob", "topic", "orders", "Describe")
    assert not acls.allows("User:alice", "topic", "orders", "Read")
    assert not parse_acl_text("").allows("User:alice", "group", "orders", "Read")


def test_star_alone_is_every_name_and_all_is_every_operation() -> None:
    acls = parse_acl_text("User:admin group:* All")
    assert acls.allows("User:admin", "group", "x", "Read")
    assert acls.allows("User:admin", "group", "", "Describe")
    assert not acls.allows("User:admin2", "group", "x", "Read")


def test_yaml_matches_the_text_format(tmp_path: Path) -> None:
    yaml_file = tmp_path / "acls.yaml"
    yaml_file.write_text(
        """
acls:
  - {principal: "User:alice", group: orders, operations: [Read]}
  - {principal: "User:bob", group: report-, pattern: prefixed, operations: Describe}
  - {principal: "User:*", group: public-, pattern: prefixed, operations: [Read]}
  - {principal: "User:alice", topic: orders, operations: [Describe]}
"""
    )
    text_file = tmp_path / "acls.txt"
    text_file.write_text(TEXT)
    assert load_acl_file(yaml_file) == load_acl_file(text_file)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("alice group:orders Read", "principal must be User:"),
        ("User: group:orders Read", "principal must be User:"),
        ("User:alice orders Read", "group:<name> or topic:<name>"),
        ("User:alice cluster:x Read", "resource must be one of group, topic"),
        ("User:alice group:orders Write", "operation must be Read, Describe or All"),
        ("User:alice group:orders", "expected '<principal>"),
        ("User:alice topic:orders Read", "topics take Describe only"),
        ("User:alice group: Read", "empty group name"),
    ],
)
def test_bad_lines_name_the_line(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        parse_acl_text("# header\n" + text, source="acl.txt")
    assert "acl.txt line 2" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[]", "a list 'acls'"),
        ("acls: [1]", "expected a mapping"),
        ("acls: [{principal: 'User:a', group: g, topic: t, operations: [Read]}]", "exactly one of"),
        ("acls: [{principal: 'User:a', group: g, operations: [Read], extra: 1}]", "unknown key"),
        (
            "acls: [{principal: 'User:a', group: g, pattern: regex, operations: [Read]}]",
            "literal or prefixed",
        ),
        ("acls: [{principal: 'User:a', group: g, operations: {Read: 1}}]", "list of names"),
        ("acls: [{principal: 'User:a', group: g", "not YAML"),
    ],
)
def test_bad_yaml_is_one_config_error(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_acl_yaml(text)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ACL file .*missing\.txt"):
        load_acl_file(tmp_path / "missing.txt")
