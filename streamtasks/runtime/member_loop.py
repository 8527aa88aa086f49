"""The asyncio loop shared by the group members' drivers (classic and KIP-848).

A sans-IO member takes events and returns actions; :class:`MemberLoop` feeds it responses,
failures and timer ticks, executes the action vocabulary both members share (coordinator lookup,
the commit before a revocation, listener calls, assignment bookkeeping, error reports) in order,
and sleeps until the member's next deadline or the next event. Requests run as tasks, so
heartbeats keep going while the application processes records. What differs between protocols
(how a request goes on the wire, what the metadata event carries, which states end the loop) is
left to the subclass: :class:`~streamtasks.runtime.classic_driver.MemberDriver` (classic) and
:class:`~streamtasks.runtime.consumer_driver.ConsumerGroupDriver` (KIP-848).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from streamtasks.errors import BrokerError, ConnectionSecurityError, DecodeError
from streamtasks.membership.classic import (
    AssignmentChanged,
    CommitOffsets,
    CoordinatorDiscovered,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    Leave,
    ListenerCompleted,
    RequestFailed,
)
from streamtasks.membership.common import MemberState, lookup_backoff_ms
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.epoch_rebalances import EpochRebalances
from topology.ids import TopicPartition

__all__ = ["DriverHost", "EpochMemberLoop", "LoopMember", "MemberLoop", "monotonic_ms"]

log = logging.getLogger("streamtasks.driver")


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class DriverHost(Protocol):
    """What a driver needs from the consumer that embeds it (the fetch side: positions, the
    fetcher's assignment, the listener, the metadata)."""

    def positions(self) -> Mapping[TopicPartition, int]: ...

    def commit_metadata(self) -> Mapping[TopicPartition, str]: ...

    async def assignment_changed(self, change: AssignmentChanged) -> None: ...

    async def invoke_listener(self, call: InvokeListener) -> None: ...

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None: ...

    def error_reported(self, error: ErrorReported) -> None: ...

    async def partition_counts(self, topics: tuple[str, ...]) -> Mapping[str, int]: ...


class LoopMemberConfig(Protocol):
    @property
    def topics(self) -> tuple[str, ...]: ...

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def request_timeout_ms(self) -> int: ...


class LoopMember(Protocol):
    """The part of a sans-IO member the loop calls."""

    @property
    def config(self) -> LoopMemberConfig: ...

    def handle(self, event: Any, now_ms: int) -> list[Any]: ...

    def poll(self, now_ms: int) -> list[Any]: ...

    def next_deadline_ms(self) -> int | None: ...


M = TypeVar("M", bound=LoopMember)


class MemberLoop(Generic[M]):
    """Runs one member until it has left the group (or failed); see the module docstring."""

    def __init__(
        self,
        member: M,
        client: GroupCoordinatorClient,
        host: DriverHost,
        *,
        metadata_interval_ms: int = 300_000,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.member = member
        self._client = client
        self._host = host
        self._clock = clock
        self._topics = member.config.topics
        self._retry_backoff_ms = member.config.retry_backoff_ms
        self._request_timeout_ms = member.config.request_timeout_ms
        self._metadata_interval_ms = metadata_interval_ms
        #: Subscribed topics the last metadata refresh did not know (refreshed sooner).
        self._missing_topics: tuple[str, ...] = ()
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._listener_error: BaseException | None = None
        #: A TLS or authentication failure: fatal, the loop ends raising it (no retry).
        self.security_failure: ConnectionSecurityError | None = None
        self.done = asyncio.Event()
        #: A KIP-848 / streams member's rebalance metrics, from its states after each step.
        self.rebalances = EpochRebalances(clock())

    def rebalance_metrics(self) -> Mapping[str, float]:
        """An epoch member's ``rebalance-*`` metrics (a classic member keeps its own)."""
        return self.rebalances.snapshot(self._clock())

    # -- what a protocol's driver supplies ---------------------------------------------------

    def finished(self) -> bool:
        """The member has left the group or failed: the loop ends."""
        raise NotImplementedError

    def left(self) -> bool:
        """The member ended by leaving (its last request, the leave, should reach the broker)."""
        raise NotImplementedError

    def describe(self) -> tuple[object, str, int]:
        """(state, member id, generation or epoch) for the state-change log line."""
        raise NotImplementedError

    async def request(self, request: Any, timeout_ms: int) -> Any:
        """Send ``request`` to the coordinator; the decoded response. Raises BrokerError or
        DecodeError when there is none."""
        raise NotImplementedError

    def response_event(self, request_id: int, response: Any) -> Any:
        """The member's event for a response."""
        raise NotImplementedError

    def request_timeout_ms(self, request: Any) -> int:
        return self._request_timeout_ms

    async def metadata_event(self) -> tuple[Any, tuple[str, ...]]:
        """The member's metadata event and the subscribed topics the metadata did not name."""
        raise NotImplementedError

    def due_events(self, now_ms: int) -> list[Any]:
        """Events the driver raises itself when their time has come (none by default)."""
        return []

    def own_deadline_ms(self) -> int | None:
        """When :meth:`due_events` may next have one (``None``: only after another event)."""
        return None

    def other_action(self, action: Any) -> None:
        """An action of the protocol's own (its ``SendRequest``)."""
        request_id, request = action.request_id, action.request
        log.debug("-> %s", type(request).__name__)
        self._spawn(self._send(request_id, request))

    # -- inputs ----------------------------------------------------------------------------

    def post(self, event: Any) -> None:
        self._events.put_nowait(event)

    def wake(self) -> None:
        """Make the loop poll the member now (after a direct call such as enforce_rebalance)."""
        self._wake.set()

    def take_listener_error(self) -> BaseException | None:
        """The first exception a rebalance callback raised since the last call, if any."""
        error, self._listener_error = self._listener_error, None
        return error

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        metadata = asyncio.get_running_loop().create_task(self._metadata_loop())
        try:
            while True:
                await self._step()
                if self.security_failure is not None:
                    raise self.security_failure
                if self.finished():
                    break
                await self._wait()
        finally:
            metadata.cancel()
            if self._tasks and self.left():
                # The member has just sent its leave: let it reach the broker, or the group
                # notices the departure only when the session times out.
                grace_s = min(self._request_timeout_ms, 5_000) / 1000
                await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await metadata
            self.done.set()

    async def _step(self) -> None:
        before = self.describe()[0]
        for event in self.due_events(self._clock()):
            await self._execute(self.member.handle(event, self._clock()))
        while not self._events.empty():
            event = self._events.get_nowait()
            await self._execute(self.member.handle(event, self._clock()))
        await self._execute(self.member.poll(self._clock()))
        state, member_id, epoch = self.describe()
        self.rebalances.observe(state, self._clock())
        if state is not before:
            log.info(
                "member %s: %s -> %s (epoch %d)",
                member_id or "-",
                getattr(before, "value", before),
                getattr(state, "value", state),
                epoch,
            )

    async def _wait(self) -> None:
        deadlines = [d for d in (self.member.next_deadline_ms(), self.own_deadline_ms()) if d is not None]
        timeout = max(0.0, (min(deadlines) - self._clock()) / 1000) if deadlines else None
        if not self._events.empty():
            return
        getter = asyncio.ensure_future(self._events.get())
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            done, _ = await asyncio.wait(
                {getter, waker}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waker.cancel()
            if not getter.done():
                getter.cancel()
        self._wake.clear()
        if getter in done and not getter.cancelled():
            self._events.put_nowait(getter.result())

    async def _execute(self, actions: list[Any]) -> None:
        first_error: BaseException | None = None
        for action in actions:
            if isinstance(action, FindCoordinator):
                self._spawn(self._find(action.request_id, silent=action.silent))
            elif isinstance(action, CommitOffsets):
                await self._host.before_commit(action.partitions)
                self._spawn(
                    self._send(
                        action.request_id,
                        action.to_request(self._host.positions(), self._host.commit_metadata()),
                    )
                )
            elif isinstance(action, AssignmentChanged):
                await self._host.assignment_changed(action)
            elif isinstance(action, InvokeListener):
                failed = False
                try:
                    await self._host.invoke_listener(action)
                except Exception as exc:  # KIP-429: run the rest, re-raise the first
                    failed = True
                    first_error = first_error or exc
                    log.warning("rebalance callback %s raised: %r", action.kind.value, exc)
                self.post(ListenerCompleted(invocation_id=action.invocation_id, failed=failed))
            elif isinstance(action, ErrorReported):
                self._host.error_reported(action)
            else:
                self.other_action(action)
        if first_error is not None and self._listener_error is None:
            self._listener_error = first_error

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _security_failed(self, error: ConnectionSecurityError) -> None:
        if self.security_failure is None:
            log.error("group membership stops: %s", error)
            self.security_failure = error
        self._wake.set()

    async def _send(self, request_id: int, request: Any) -> None:
        try:
            response = await self.request(request, self.request_timeout_ms(request))
        except ConnectionSecurityError as exc:
            self._security_failed(exc)
        except (BrokerError, DecodeError) as exc:
            log.debug("request %s failed: %s", type(request).__name__, exc)
            self.post(RequestFailed(request_id=request_id, error=KafkaErrorCode.NETWORK_EXCEPTION))
        except Exception:
            # Anything else is a bug on this side; the member still hears of the failure now
            # instead of waiting out the request timeout with nothing in flight.
            log.exception("request %s failed unexpectedly", type(request).__name__)
            self.post(RequestFailed(request_id=request_id, error=KafkaErrorCode.NETWORK_EXCEPTION))
        else:
            self.post(self.response_event(request_id, response))

    async def _find(self, request_id: int, *, silent: bool = False) -> None:
        try:
            if silent:  # the member gave it up: drop its connection (FindCoordinator.silent)
                await self._client.abandon()
            await self._client.ensure_coordinator()
        except ConnectionSecurityError as exc:
            self._security_failed(exc)
        except BrokerError as exc:
            log.debug("coordinator lookup failed: %s", exc)
            self.post(RequestFailed(request_id=request_id, error=KafkaErrorCode.COORDINATOR_NOT_AVAILABLE))
        except Exception:
            log.exception("coordinator lookup failed unexpectedly")
            self.post(RequestFailed(request_id=request_id, error=KafkaErrorCode.COORDINATOR_NOT_AVAILABLE))
        else:
            self.post(CoordinatorDiscovered(request_id=request_id))

    async def refresh_metadata(self) -> None:
        """Post fresh metadata to the member. A failed refresh is logged and retried soon (as
        for a topic the metadata does not know yet)."""
        try:
            event, missing = await self.metadata_event()
        except ConnectionSecurityError as exc:
            self._security_failed(exc)
            return
        except BrokerError as exc:
            log.warning("metadata refresh failed: %s", exc)
            self._missing_topics = self._topics
            return
        self._missing_topics = missing
        self.post(event)

    async def _metadata_loop(self) -> None:
        """Refresh the metadata every ``metadata_interval_ms``; while a subscribed topic is
        missing from it (just created, its metadata not yet everywhere), sooner, with a backoff
        that doubles from ``retry_backoff_ms`` up to one second, as Kafka's consumer does for
        topics it does not know yet."""
        first_ms = max(50, self._retry_backoff_ms)
        misses = 0
        while True:
            if self._missing_topics:
                misses += 1
                await asyncio.sleep(lookup_backoff_ms(first_ms, max(1_000, first_ms), misses) / 1000)
            else:
                misses = 0
                await asyncio.sleep(self._metadata_interval_ms / 1000)
            await self.refresh_metadata()

    async def leave(self, reason: str, timeout_s: float) -> None:
        """Ask the member to leave (commit, revoke, leave the group) and wait until it has."""
        if not self.finished():
            self.post(Leave(reason=reason))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), timeout_s)


E = TypeVar("E", bound=LoopMember)


class EpochMemberLoop(MemberLoop[E]):
    """The loop of a member with a member epoch: it ends when the member has left the group
    (``UNSUBSCRIBED``) or failed (``FATAL``). Its member has ``state`` (the common
    :class:`MemberState`), ``member_id`` and ``member_epoch`` (read through ``Any``: the KIP-848
    member exposes them as read-only descriptors, which a protocol cannot name)."""

    def finished(self) -> bool:
        member: Any = self.member
        return bool(member.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL))

    def left(self) -> bool:
        member: Any = self.member
        return bool(member.state is MemberState.UNSUBSCRIBED)

    def describe(self) -> tuple[object, str, int]:
        member: Any = self.member
        return member.state, member.member_id, member.member_epoch
