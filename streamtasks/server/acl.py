"""Who may do what at the coordinator's listener: an ACL file of allow rules, deny by default.

A rule names a principal (``User:alice``, or ``User:*`` for every authenticated principal), a
resource (a group, or a topic for what Metadata may describe), a name matched literally or as a
prefix, and operations. As in Kafka, ``Read`` implies ``Describe``, and ``All`` is every
operation. What needs what:

- group ``Read``: ConsumerGroupHeartbeat, JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
  OffsetCommit, OffsetFetch, ConsumerGroupPrepareAssignment/InstallAssignment;
- group ``Describe``: ConsumerGroupDescribe;
- topic ``Describe``: the topic in a Metadata answer (the coordinator forwards Metadata under its
  own principal, so it filters the answer by the client's rights: ``docs/security.md``).

Two file formats, told apart by the suffix. YAML (``.yaml``/``.yml``)::

    acls:
      - principal: User:alice
        group: orders-          # or  topic: orders
        pattern: prefixed       # literal (default) or prefixed
        operations: [Read]

Text (anything else): one rule a line, ``#`` starts a comment, a trailing ``*`` on the name
makes it a prefix (``*`` alone: every name)::

    User:alice   group:orders-*   Read
    User:*       topic:orders     Describe

Pure: :func:`parse_acl_text` / :func:`parse_acl_yaml` take the text; :func:`load_acl_file`
reads the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from streamtasks.errors import ConfigError

__all__ = [
    "OPERATIONS",
    "RESOURCES",
    "AclRule",
    "Acls",
    "load_acl_file",
    "parse_acl_text",
    "parse_acl_yaml",
]

RESOURCES = ("group", "topic")
OPERATIONS = ("Read", "Describe")
_IMPLIES = {"Read": frozenset({"Read", "Describe"}), "Describe": frozenset({"Describe"})}
_PATTERNS = ("literal", "prefixed")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclRule:
    principal: str
    resource: str
    name: str
    pattern: str = "literal"
    operations: frozenset[str]

    def matches(self, principal: str, resource: str, name: str, operation: str) -> bool:
        if self.resource != resource or operation not in self.operations:
            return False
        if self.principal not in (principal, "User:*"):
            return False
        if self.pattern == "prefixed":
            return name.startswith(self.name)
        return name == self.name


@dataclass(frozen=True, slots=True)
class Acls:
    """Allow rules; anything no rule allows is denied."""

    rules: tuple[AclRule, ...]

    def allows(self, principal: str, resource: str, name: str, operation: str) -> bool:
        return any(rule.matches(principal, resource, name, operation) for rule in self.rules)


def _rule(
    principal: str, resource: str, name: str, *, pattern: str, ops: Iterable[str], where: str
) -> AclRule:
    kind, sep, _ = principal.partition(":")
    if not sep or kind != "User" or not principal[len("User:") :]:
        raise ConfigError(f"{where}: principal must be User:<name> or User:*, got {principal!r}")
    if resource not in RESOURCES:
        raise ConfigError(f"{where}: resource must be one of {', '.join(RESOURCES)}, got {resource!r}")
    if pattern not in _PATTERNS:
        raise ConfigError(f"{where}: pattern must be literal or prefixed, got {pattern!r}")
    operations: set[str] = set()
    for op in ops:
        if op == "All":
            operations.update(OPERATIONS)
        elif op in _IMPLIES:
            operations.update(_IMPLIES[op])
        else:
            raise ConfigError(f"{where}: operation must be Read, Describe or All, got {op!r}")
    if not operations:
        raise ConfigError(f"{where}: no operations")
    if resource == "topic" and operations != {"Describe"}:
        raise ConfigError(f"{where}: topics take Describe only (the coordinator forwards no reads)")
    if pattern == "literal" and not name:
        raise ConfigError(f"{where}: empty {resource} name")
    return AclRule(
        principal=principal, resource=resource, name=name, pattern=pattern, operations=frozenset(operations)
    )


def parse_acl_text(text: str, *, source: str = "ACL file") -> Acls:
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source} line {number}"
        fields = line.split()
        if len(fields) != 3:
            raise ConfigError(f"{where}: expected '<principal> <group|topic>:<name>[*] <ops>'")
        principal, target, ops = fields
        resource, sep, name = target.partition(":")
        if not sep:
            raise ConfigError(f"{where}: the resource must be group:<name> or topic:<name>")
        pattern = "literal"
        if name.endswith("*"):
            pattern, name = "prefixed", name[:-1]
        rules.append(_rule(principal, resource, name, pattern=pattern, ops=ops.split(","), where=where))
    return Acls(tuple(rules))


def parse_acl_yaml(text: str, *, source: str = "ACL file") -> Acls:
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not YAML ({exc.__class__.__name__})") from None
    entries = doc.get("acls") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: expected a mapping with a list 'acls'")
    rules = []
    for index, entry in enumerate(entries):
        where = f"{source} acls[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping")
        unknown = set(entry) - {"principal", "group", "topic", "pattern", "operations"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        named = [r for r in RESOURCES if r in entry]
        if len(named) != 1:
            raise ConfigError(f"{where}: name exactly one of group or topic")
        ops = entry.get("operations")
        if isinstance(ops, str):
            ops = [ops]
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise ConfigError(f"{where}: operations must be a list of names")
        rules.append(
            _rule(
                str(entry.get("principal", "")),
                named[0],
                str(entry[named[0]]),
                pattern=str(entry.get("pattern", "literal")),
                ops=ops,
                where=where,
            )
        )
    return Acls(tuple(rules))


def load_acl_file(path: Path) -> Acls:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"ACL file {path}: {exc.strerror or exc}") from None
    if path.suffix in (".yaml", ".yml"):
        return parse_acl_yaml(text, source=f"ACL file {path}")
    return parse_acl_text(text, source=f"ACL file {path}")
