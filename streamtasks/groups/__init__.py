"""``streamtasks groups``: list a cluster's groups and describe one (members, partitions, and
the tasks streamtasks' assignor gave each member). See docs/operations.md."""

__all__: list[str] = []
