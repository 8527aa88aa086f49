"""Group membership state machines. ``classic``: the JoinGroup/SyncGroup consumer protocol;
``consumer``: the KIP-848 heartbeat protocol with client-side assignment."""

from streamtasks.membership.classic import (
    ClassicMember,
    MemberConfig,
    MemberState,
)
from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig

__all__ = ["ClassicMember", "ConsumerMember", "ConsumerMemberConfig", "MemberConfig", "MemberState"]
