"""The demo's options completed for its cluster (:func:`streamtasks.drills.demo_cluster.prepare_cluster`)."""

from __future__ import annotations

import io

from streamtasks.drills.demo_cluster import prepare_cluster
from streamtasks.drills.demo_options import DemoOptions


def test_no_static_pause_and_no_tansu_workarounds_on_an_existing_cluster() -> None:
    """The quiet time between static bounces is for Tansu; an existing cluster (or the
    embedded Apache Kafka) replaces static members back to back."""
    options, cluster, _ = prepare_cluster(DemoOptions(bootstrap_servers="127.0.0.1:1"), io.StringIO())
    try:
        assert (options.static_pause_s, options.tansu_workarounds) == (0.0, False)
        given, other, _ = prepare_cluster(
            DemoOptions(bootstrap_servers="127.0.0.1:1", static_pause_s=2.5), io.StringIO()
        )
        other.stop()
        assert given.static_pause_s == 2.5
    finally:
        cluster.stop()
