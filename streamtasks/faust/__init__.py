"""faust-streaming apps with streamtasks' placement: :class:`StreamtasksAssignor`, a drop-in
``PartitionAssignor`` (``faust.App(..., PartitionAssignor="streamtasks.faust:StreamtasksAssignor")``).

Needs faust-streaming (``pip install streamtasks[faust]``).
"""

from streamtasks.faust.assignor import StreamtasksAssignor, configured

__all__ = ["StreamtasksAssignor", "configured"]
