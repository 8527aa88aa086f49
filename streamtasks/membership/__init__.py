"""Group membership state machines. ``classic``: the JoinGroup/SyncGroup consumer protocol."""

from streamtasks.membership.classic import (
    ClassicMember,
    MemberConfig,
    MemberState,
)

__all__ = ["ClassicMember", "MemberConfig", "MemberState"]
