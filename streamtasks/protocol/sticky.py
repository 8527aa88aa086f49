"""KIP-341's sticky userdata: the codec lives with the sticky assignors, which write and read
it themselves (:mod:`assignors.partition.sticky_user_data`); re-exported here with the other
codecs."""

from assignors.partition.sticky_user_data import (
    DEFAULT_GENERATION,
    StickyUserData,
    decode_sticky_userdata,
    encode_sticky_userdata,
)

__all__ = [
    "DEFAULT_GENERATION",
    "StickyUserData",
    "decode_sticky_userdata",
    "encode_sticky_userdata",
]
