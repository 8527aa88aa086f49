"""One hook for the member side of an assignment: the assignor registered under the chosen
protocol reads the bytes; KIP-848 (no protocol name) goes to the client-side assignor."""

from __future__ import annotations

from assignors.partition.hooks import MemberAssignment
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.errors import DecodeError
from streamtasks.protocol.userdata import AssignmentInfo, encode_assignment_info
from streamtasks.streams import StreamsPartitionAssignor
from streamtasks.streams.assignment_reader import AssignmentReader, AssignmentReaders
from streamtasks.streams.faust_protocol import FaustProtocolAssignor
from topology import TaskId, Topology, TopologyBuilder


def _topology() -> Topology:
    builder = TopologyBuilder("app")
    builder.stream("in").store("counts")
    return builder.build()


def _streams() -> StreamsPartitionAssignor:
    return StreamsPartitionAssignor(
        _topology(),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(),
        end_offsets=dict,
        now_ms=lambda: 0,
    )


def test_each_assignor_reads_the_assignments_of_its_own_protocol() -> None:
    streams, faust = _streams(), FaustProtocolAssignor(_topology(), url="streamtasks://w/", replicas=1)
    assert isinstance(streams, AssignmentReader)
    assert isinstance(faust, AssignmentReader)
    readers = AssignmentReaders((faust, streams), client_side=streams)
    info = AssignmentInfo(standby_tasks=frozenset({TaskId(0, 1)}))
    mine = MemberAssignment(user_data=encode_assignment_info(info), generation=3)
    for protocol in (streams.name, None):
        read = readers.read(protocol, mine, follow_version=False)
        assert read is not None
        assert read.versioned
        assert read.error is None
        assert read.info == info
    # The same bytes under faust's protocol are faust's to read: not faust's format, an error.
    as_faust = readers.read(faust.name, mine, follow_version=True)
    assert as_faust is not None
    assert not as_faust.versioned
    assert not as_faust.rejoin
    assert isinstance(as_faust.error, DecodeError)
    assert "unreadable faust assignment" in str(as_faust.error)
    assert as_faust.info == AssignmentInfo()


def test_a_protocol_no_assignor_is_registered_under_reads_nothing() -> None:
    faust = FaustProtocolAssignor(_topology(), url="streamtasks://w/", replicas=1)
    readers = AssignmentReaders((faust,), client_side=None)
    assert readers.read(None, MemberAssignment(user_data=b"x"), follow_version=True) is None
    assert readers.read("streamtasks", MemberAssignment(), follow_version=True) is None
    empty = readers.read(faust.name, MemberAssignment(), follow_version=True)
    assert empty is not None
    assert empty.info == AssignmentInfo()
    assert empty.error is None
