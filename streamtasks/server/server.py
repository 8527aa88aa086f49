"""``streamtasks coordinator``: the KIP-848 group coordinator and the streams-group (KIP-1071)
coordinator in front of a Kafka cluster.

Start: read the log topic back, take the cluster's topics, load the coordinator from the
records (sessions restart from now) and persist what resuming writes, then listen. Running:
client connections (:mod:`.session`), the timers (driven by the injected clock), a metadata
refresh (every few seconds, at once when a member names a topic not known yet), and a one-line
status. Stop: stop listening, let in-flight requests finish, flush the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TextIO, cast

from streamtasks.coordinator import GroupCoordinator, Record
from streamtasks.coordinator.record_codec import OffsetCommitRecord, OffsetCommitTombstone
from streamtasks.coordinator.streams import StreamsGroupCoordinator, StreamsRecord
from streamtasks.coordinator.txn_commits import TransactionalGroupRecord
from streamtasks.errors import ConfigError
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.runtime.http_server import HttpServers
from streamtasks.runtime.security import ClientSettings
from streamtasks.server.cluster_groups import ClusterGroups
from streamtasks.server.config import ServerConfig
from streamtasks.server.guard import ListenerGuard
from streamtasks.server.handlers import SERVED_VERSIONS, Handlers, advertised_apis
from streamtasks.server.log import CoordinatorLog, is_streams_record
from streamtasks.server.metadata import fetch_api_versions, fetch_image
from streamtasks.server.offsets import OffsetStore
from streamtasks.server.routing import BrokerProxies, rewrite_coordinators, rewrite_metadata
from streamtasks.server.session import ClientSession
from streamtasks.server.trust import restrict_api_versions
from streamtasks.server.txn_api import TXN_OFFSET_COMMIT
from streamtasks.server.upstream import Upstream

if TYPE_CHECKING:
    from streamtasks.runtime.otel import OtelBridge

__all__ = ["CoordinatorServer", "wall_clock_ms"]

_log = logging.getLogger("streamtasks.server")
_Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
_TIMER_TICK_S = 0.1


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorServer:
    def __init__(
        self,
        config: ServerConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        out: TextIO | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.out = out if out is not None else sys.stderr
        self.log = CoordinatorLog(config.backing, config.topic)
        self.offsets = OffsetStore()
        #: The backing cluster's group coordinators (forwarded transactional commits).
        self.cluster_groups = ClusterGroups(config.backing)
        self.coordinator: GroupCoordinator | None = None
        self.streams: StreamsGroupCoordinator | None = None
        self.handlers: Handlers | None = None
        self.replay_ms = 0.0
        self.replayed_records = 0
        self.port = config.listen_port
        self._server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sessions: set[asyncio.Task[None]] = set()
        self._listeners: list[asyncio.Server] = []
        self.proxies = BrokerProxies(self._start_proxy, port_base=config.proxy_port_base)
        self.advertised: tuple[str, int] = config.advertised
        self._metadata_poke = asyncio.Event()
        self._stopped = asyncio.Event()
        self.guard: ListenerGuard | None = None
        #: ``--metrics-port``: the metrics server and the port it listens on.
        self.metrics_http: HttpServers | None = None
        self.metrics_port: int | None = None
        #: ``--otel-metrics``: the OpenTelemetry export of the same metrics.
        self.otel: OtelBridge | None = None

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    @property
    def failed(self) -> asyncio.Event:
        """Set when the log could not be written: the server must stop (a restart replays)."""
        return self.log.failed

    def _listener_line(self) -> str:
        guard = self.guard
        if guard is None:
            return "plaintext, open"
        s = guard.settings
        parts = ["TLS" + (" with client certificates" if s.tls_client_cafile else "") if s.tls else "no TLS"]
        if s.sasl_mechanisms:
            users = len(guard.credentials.users) if guard.credentials else 0
            parts.append(f"SASL {','.join(s.sasl_mechanisms)} ({users} users)")
        if guard.acls is not None:
            parts.append(f"ACL file {s.acl_file} ({len(guard.acls.rules)} rules)")
        else:
            parts.append("no ACL file: every authenticated principal may use every group")
        return "; ".join(parts)

    async def start(self) -> None:
        started = time.monotonic()
        if self.config.listener.guarded or self.config.listener.tls:
            self.guard = ListenerGuard(self.config.listener)  # a bad file stops here, before any IO
            if "PLAIN" in self.config.listener.sasl_mechanisms and not self.config.listener.tls:
                _log.warning("SASL PLAIN without TLS: passwords cross the network in clear")
        records = await self.log.open()
        image = await fetch_image(self.config.backing)
        if self.guard is not None and self.config.listener.guarded:
            broker = advertised_apis(await fetch_api_versions(self.config.backing))
            served = set(SERVED_VERSIONS) - {TXN_OFFSET_COMMIT}  # (no Produce forwarded there)
            self.guard.apis = restrict_api_versions(broker, served, sasl=self.guard.sasl)
        coordinator = GroupCoordinator(self.config.coordinator, image=image)
        streams = StreamsGroupCoordinator(self.config.streams, image=image)
        group_records: list[Record] = []
        streams_records: list[StreamsRecord] = []
        transactional: list[TransactionalGroupRecord] = []
        for record in records:
            if isinstance(record, OffsetCommitRecord | OffsetCommitTombstone):
                self.offsets.replay(record)
            elif isinstance(record, TransactionalGroupRecord):
                transactional.append(record)
            elif is_streams_record(record):
                streams_records.append(record)
            else:
                group_records.append(cast("Record", record))
        resumed = coordinator.load(group_records, self.clock())
        coordinator.apply(resumed)
        streams.load(streams_records, self.clock())  # soft state only: nothing to write
        await self.log.append(resumed.records)
        self.coordinator, self.streams = coordinator, streams
        self.replay_ms = (time.monotonic() - started) * 1000
        self.replayed_records = len(records)
        self._server = await self._listen(self._accept, self.config.listen_port)
        self.port = self._server.sockets[0].getsockname()[1]
        host, _ = self.config.advertised
        advertised = self.advertised = (host, self.config.advertised_port or self.port)
        self.handlers = Handlers(
            coordinator=coordinator,
            offsets=self.offsets,
            log=self.log,
            clock=self.clock,
            node_id=self.config.node_id,
            advertised=advertised,
            max_groups=self.config.max_groups,
            on_unknown_topics=self._metadata_poke.set,
            streams=streams,
            create_topics=self._create_topics,
            cluster=self.cluster_groups,
        )
        for mark in transactional:
            self.handlers.txn.replay(mark)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._timers()),
            loop.create_task(self._metadata()),
            loop.create_task(self._status()),
        ]
        await self._start_metrics(loop)
        self.say(
            f"streamtasks coordinator: listening on {self.config.listen_host}:{self.port} "
            f"(advertised {advertised[0]}:{advertised[1]}, node {self.config.node_id}), "
            f"backing cluster {self.config.backing.bootstrap_servers} "
            f"({self.config.backing.security_protocol}), log {self.config.topic}: "
            f"replayed {len(records)} records ({len(coordinator.groups)} groups, "
            f"{len(streams.groups)} streams groups with assignor {self.config.streams.assignor}, "
            f"{len(self.offsets)} offsets) in {self.replay_ms:.0f} ms; listener: {self._listener_line()}"
        )

    async def _create_topics(self, specs: list[TopicSpec]) -> None:
        await create_topics_async(self.config.backing, specs, client_id="streamtasks-coordinator")

    async def _start_metrics(self, loop: asyncio.AbstractEventLoop) -> None:
        """``--metrics-port``'s ``/metrics`` and ``--otel-metrics``, from one source."""
        cfg = self.config
        if cfg.metrics_port is None and cfg.otel_metrics is None:
            return
        try:
            from streamtasks.server.metrics import CoordinatorMetrics, export_otel, serve_metrics
        except ImportError as exc:  # prometheus-client and aiohttp: the "metrics" extra
            raise ConfigError(
                f"coordinator metrics need pip install 'streamtasks[metrics]' ({exc})"
            ) from None
        metrics = CoordinatorMetrics(self)
        if cfg.otel_metrics is not None:
            self.otel = export_otel(metrics, cfg.otel_metrics)
            self._tasks.append(loop.create_task(self.otel.run(cfg.otel_refresh_s)))
        if cfg.metrics_port is not None:
            self.metrics_http, self.metrics_port = await serve_metrics(
                self, cfg.metrics_host, cfg.metrics_port, cfg.metrics_security, metrics
            )
            scheme = self.metrics_http.scheme
            self.say(
                f"streamtasks coordinator: metrics at {scheme}://{cfg.metrics_host}:{self.metrics_port}/metrics"
            )

    async def _listen(self, accept: _Accept, port: int) -> asyncio.Server:
        """A listener on ``port`` of the listen host, with the listener's TLS if it has one
        (the per-broker listeners too)."""
        ssl_context = self.guard.ssl_context if self.guard is not None else None
        return await asyncio.start_server(
            accept,
            self.config.listen_host,
            port,
            limit=1 << 20,
            ssl=ssl_context,
            ssl_handshake_timeout=10.0 if ssl_context is not None else None,
        )

    async def _start_proxy(self, node_id: int, host: str, port: int, wanted_port: int) -> int:
        broker = self.config.backing_broker(host, port)

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept(reader, writer, upstream=broker)

        listener = await self._listen(accept, wanted_port)
        self._listeners.append(listener)
        bound: int = listener.sockets[0].getsockname()[1]
        self.say(f"streamtasks coordinator: broker {node_id} ({host}:{port}) served at port {bound}")
        return bound

    async def _rewrite_metadata(self, frame: bytes, version: int) -> bytes:
        return await rewrite_metadata(
            frame,
            version,
            coordinator=(self.config.node_id, *self.advertised),
            proxies=self.proxies if self.config.routing == "proxy" else None,
            advertised_host=self.advertised[0],
        )

    async def _rewrite_coordinators(self, frame: bytes, version: int) -> bytes:
        if self.config.routing != "proxy":
            return frame
        return await rewrite_coordinators(
            frame, version, proxies=self.proxies, advertised_host=self.advertised[0]
        )

    async def _accept(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        upstream: ClientSettings | None = None,
    ) -> None:
        assert self.handlers is not None
        target = upstream or self.config.backing
        if len(self._sessions) >= self.config.max_connections or self._stopped.is_set():
            writer.close()
            return
        session = ClientSession(
            reader,
            writer,
            handlers=self.handlers,
            upstream=lambda: Upstream(target, max_frame_bytes=self.config.max_frame_bytes),
            rewrite_metadata=self._rewrite_metadata,
            rewrite_coordinators=self._rewrite_coordinators,
            max_frame_bytes=self.config.max_frame_bytes,
            max_in_flight=self.config.max_in_flight_per_connection,
            guard=self.guard if self.guard is not None and self.guard.settings.guarded else None,
            clock=self.clock,
        )
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        try:
            await session.run()
        except asyncio.CancelledError:
            pass  # stop(): end quietly (asyncio's server callback would log a cancelled task)
        except Exception:
            _log.exception("connection handler failed")
        finally:
            self._sessions.discard(task)

    async def _timers(self) -> None:
        assert self.coordinator is not None
        while True:
            now = self.clock()
            assert self.handlers is not None
            streams = self.handlers.streams.coordinator
            due = [k.group_id for k in (*self.coordinator.expired_timers(now), *streams.expired_timers(now))]
            held = self.handlers.txn.timers_due(due)  # a forwarded commit in flight: later
            for result in self.coordinator.poll(now, held):
                self.handlers.persist(result)
            self.handlers.streams.poll(held)
            deadlines = [
                self.coordinator.next_deadline_ms(),
                self.handlers.streams.coordinator.next_deadline_ms(),
            ]
            deadline = min((d for d in deadlines if d is not None), default=None)
            delay = _TIMER_TICK_S if deadline is None else (deadline - self.clock()) / 1000
            floor = 0.005 if held.intersection(due) else 0.001  # held timers stay due: no spin
            await asyncio.sleep(min(_TIMER_TICK_S, max(floor, delay)))

    async def _metadata(self) -> None:
        assert self.coordinator is not None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.metadata_refresh_s):
                    await self._metadata_poke.wait()
            self._metadata_poke.clear()
            try:
                image = await fetch_image(self.config.backing)
            except Exception as exc:
                _log.warning("metadata refresh failed: %s", exc)
                await asyncio.sleep(1)
                continue
            assert self.streams is not None
            if image.topics != self.streams.image.topics:
                self.streams.set_image(image)  # groups see it at their next heartbeat
            if image.topics != self.coordinator.image.topics:
                result = self.coordinator.on_metadata_image(image, self.clock())
                self.coordinator.apply(result)
                assert self.handlers is not None
                self.handlers.persist(result)
            await asyncio.sleep(0.2)  # at most five refreshes a second

    @property
    def connections(self) -> int:
        return len(self._sessions)

    def status_line(self) -> str:
        assert self.coordinator is not None
        assert self.handlers is not None
        groups = self.coordinator.groups
        members = sum(len(g.members) for g in groups.values())
        streams = self.handlers.streams.coordinator
        streams_epochs = " ".join(
            f"{gid}@{g.epoch}/{g.target_epoch}:{streams.group_state(gid).value}"
            for gid, g in sorted(streams.groups.items())[:5]
        )
        epochs = " ".join(
            f"{gid}@{g.group_epoch}/{g.assignment_epoch}:{g.state.value}"
            for gid, g in sorted(groups.items())[:5]
        )
        more = f" +{len(groups) - 5}" if len(groups) > 5 else ""
        s, ls = self.handlers.stats, self.log.stats
        return (
            f"status: groups={len(groups)} members={members} epochs=[{epochs}{more}] "
            f"streams_groups={len(streams.groups)} "
            f"streams_members={sum(len(g.members) for g in streams.groups.values())} "
            f"streams_epochs=[{streams_epochs}] streams_heartbeats={self.handlers.streams.heartbeats} "
            f"conversions={self.handlers.streams.conversions} "
            f"internal_topics_created={self.handlers.streams.created_topics} "
            f"connections={len(self._sessions)} heartbeats={s.heartbeats} classic={s.classic} "
            f"parked_joins={len(self.handlers.parked)} commits={s.commits} "
            f"txn_commits={self.handlers.txn.txn_commits} txn_refused={self.handlers.txn.txn_refused} "
            f"txn_groups={len(self.handlers.txn.transactional)} "
            f"fetches={s.fetches} prepares={s.by_api.get(30848, 0)} installs={s.by_api.get(30849, 0)} "
            f"forwarded={s.forwarded} closed_malformed={s.closed_malformed} "
            f"closed_by_broker={s.closed_by_broker} "
            f"log_records={ls.appended_records} log_batches={ls.batches}"
            + (f" sasl_ok={s.sasl_ok} sasl_failed={s.sasl_failed} denied={s.denied}" if self.guard else "")
        )

    async def _status(self) -> None:
        while True:
            await asyncio.sleep(self.config.status_interval_s)
            self.say(self.status_line())

    async def stop(self) -> None:
        """Stop accepting, end the connections, flush the log."""
        self._stopped.set()
        for listener in (self._server, *self._listeners):
            if listener is not None:
                listener.close()
        for task in self._tasks:
            task.cancel()
        for task in list(self._sessions):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._sessions, return_exceptions=True)
        if self.metrics_http is not None:
            await self.metrics_http.stop()
        if self.otel is not None and self.config.otel_metrics in ("console", "otlp"):
            provider = self.otel.provider  # the SDK's, built for the flag: a last export
            await asyncio.to_thread(getattr(provider, "force_flush", lambda: None))
            await asyncio.to_thread(getattr(provider, "shutdown", lambda: None))
        await self.cluster_groups.close()
        await self.log.close()
        self.say("streamtasks coordinator: stopped")
