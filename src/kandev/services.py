"""The composition root: every service built once per app, wired by constructor.

`Services` holds everything (the app's lifespan and offline CLI commands prepare and close
it); the surfaces get `SurfaceServices`, the domain services only — never the database, the
bus or the access rules — and each REST/page handler names the ones it uses
(`kandev.api.deps`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

from kandev.agents.deferred_runtime import DeferredRuntime
from kandev.agents.processes import AgentProcessLedger
from kandev.agents.runtime import AgentRuntime
from kandev.auth.agent_tokens import AgentTokenService
from kandev.auth.service import AuthService
from kandev.board.agent_profiles import AgentProfileService
from kandev.board.tasks import TaskService
from kandev.board.workflows import WorkflowService
from kandev.board.workspaces import WorkspaceService
from kandev.clarification.recovery import (
    RecoveryReport,
    recover_on_startup,
    settle_sessions_on_startup,
)
from kandev.clarification.service import ClarificationService
from kandev.clarification.store import ClarificationStore
from kandev.clock import Clock, SystemClock
from kandev.config import Settings
from kandev.db.engine import Database
from kandev.db.migrate import upgrade_to_head
from kandev.db.ownership import check_database_is_kandevs
from kandev.events.bus import EventBus
from kandev.ids import IdFactory, new_id
from kandev.moves.service import MoveService
from kandev.pending.describe import PendingDescriber
from kandev.pending.presenter import TaskPresenter
from kandev.permissions.service import PermissionService
from kandev.repos.changes import ChangesService
from kandev.repos.gc import WorktreeCollector
from kandev.repos.git import GitRunner
from kandev.repos.service import RepositoryService
from kandev.repos.worktrees import WorktreeService
from kandev.sessions.access import AccessRules
from kandev.sessions.orchestrator import Orchestrator
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.service import SessionService
from kandev.sessions.task_agents import TaskAgentStopper
from kandev.streams.events import EventsService


@dataclass(frozen=True)
class SurfaceServices:
    """What REST, MCP and the pages may call."""

    settings: Settings
    auth: AuthService
    agent_tokens: AgentTokenService
    workspaces: WorkspaceService
    workflows: WorkflowService
    tasks: TaskService
    agent_profiles: AgentProfileService
    sessions: SessionService
    clarifications: ClarificationService
    permissions: PermissionService
    moves: MoveService
    repositories: RepositoryService
    changes: ChangesService
    events: EventsService
    presenter: TaskPresenter


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    new_id: IdFactory
    auth: AuthService
    access: AccessRules
    workspaces: WorkspaceService
    workflows: WorkflowService
    tasks: TaskService
    agent_profiles: AgentProfileService
    bus: EventBus
    agent_tokens: AgentTokenService
    orchestrator: Orchestrator
    sessions: SessionService
    clarifications: ClarificationService
    permissions: PermissionService
    moves: MoveService
    agent_processes: AgentProcessLedger
    repositories: RepositoryService
    worktrees: WorktreeService
    changes: ChangesService
    events: EventsService
    presenter: TaskPresenter
    worktree_gc: WorktreeCollector

    @cached_property
    def surface(self) -> SurfaceServices:
        """The same service objects, minus what surfaces must not touch."""
        return SurfaceServices(**{f.name: getattr(self, f.name) for f in fields(SurfaceServices)})

    async def prepare_storage(self) -> None:
        """The schema current and the built-in rows there: all an offline command (`kandev
        user create`, `token create`, `gc`) needs. It touches no live state, because a
        server may be running on the same database right now."""
        await check_database_is_kandevs(self.db)  # before anything writes to it
        await upgrade_to_head(self.db)
        await self.auth.ensure_default_user()
        await self.auth.refresh_mode()
        await self.agent_profiles.ensure_builtin_profiles()

    async def prepare(self) -> None:
        """A server's start: storage, then everything a previous server left behind."""
        await self.prepare_storage()
        recovered = await self.recover()
        # After each agent turn, a task on a repository announces changed changes.
        self.orchestrator.run_in_background(self.changes.follow_turns())
        # Worktrees that deleted tasks left behind go every so often (0 = never).
        if self.settings.worktree_sweep_seconds > 0:
            sweep = self.worktree_gc.sweep_forever(self.settings.worktree_sweep_seconds)
            self.orchestrator.run_in_background(sweep)
        if recovered.undelivered:
            # Answers claimed before the crash but never confirmed delivered reach their
            # agents as resumed turns, in the background (the start does not wait for them).
            self.orchestrator.run_in_background(
                self.clarifications.redeliver_after_restart(recovered.undelivered)
            )

    async def recover(self) -> RecoveryReport:
        """What a previous server left behind, put right before this one runs (only a
        server's start calls it). Set-based: the same statements for any number of live
        sessions (tests/clarification/test_session_settlement.py counts them)."""
        # Agents an earlier server left running (it was killed and they escaped the guard)
        # are killed before anything here can relaunch one: never two agents per session.
        await self.agent_processes.reap()
        # Claimed-but-undelivered answers and half-made resume turns are put right before
        # anything else runs; an inconsistency stops the start (RecoveryError).
        recovered = await recover_on_startup(self.db, self.clock.now())
        # Permission requests a previous server left open can never reach their agent.
        await self.permissions.expire_on_startup()
        # Agent processes died with the previous server; their sessions wait for a prompt,
        # or for the answer to a question that is still open (all at once, set-based).
        await settle_sessions_on_startup(self.db, self.clock.now())
        # Deferred moves of sessions that ended can never apply: dropped (with an event).
        await self.moves.drop_orphaned()
        return recovered

    async def begin_shutdown(self) -> None:
        """SIGINT / SIGTERM, before the HTTP server waits for open requests: event streams
        end (`bus.shutting_down`), waiting ask calls end with a clear tool result (their
        questions stay open for after the restart), then the agents stop."""
        self.bus.shutting_down.set()
        await self.clarifications.begin_shutdown()
        await self.orchestrator.shutdown()

    async def close(self) -> None:
        await self.orchestrator.shutdown()
        # A permission call cancelled at the end leaves its expiry running: done first.
        await self.permissions.settle_background()
        await self.db.dispose()


def _acp_runtime(
    ledger: AgentProcessLedger, permissions: PermissionService, start_timeout: float
) -> AgentRuntime:
    """The real runtime: agents as local ACP subprocesses, their permission requests decided
    by the profile's policy (maybe a person)."""
    from kandev.agents.acp_permissions import DecidingPolicy
    from kandev.agents.acp_runtime import AcpRuntime

    return AcpRuntime(
        ledger=ledger, start_timeout=start_timeout, permission_policy=DecidingPolicy(permissions)
    )


def build_services(
    settings: Settings,
    *,
    db: Database | None = None,
    clock: Clock | None = None,
    id_factory: IdFactory | None = None,
    runtime: AgentRuntime | None = None,
) -> Services:
    db = db or Database(
        settings.resolved_database_url(), queue_timeout=settings.db_queue_timeout_seconds
    )
    clock = clock or SystemClock()
    id_factory = id_factory or new_id
    agent_processes = AgentProcessLedger(db, clock)
    access = AccessRules()
    bus = EventBus()
    describer = PendingDescriber()  # task/session JSON with pending actions, for all below
    agent_tokens = AgentTokenService(db, clock, id_factory, auth_enabled=settings.auth)
    recorder = SessionRecorder(db, clock, id_factory, bus, describer)
    # An agent's permission requests are decided by its profile's policy (maybe a person).
    permissions = PermissionService(db, clock, id_factory, access, recorder)
    if runtime is None:
        # The ACP SDK is imported when the first agent starts: a server that serves the
        # board, REST and MCP without launching an agent never pays for it.
        runtime = DeferredRuntime(
            lambda: _acp_runtime(agent_processes, permissions, settings.agent_start_timeout)
        )
    git = GitRunner()  # one per server: its per-repository locks serialize git work
    repositories = RepositoryService(db, clock, id_factory, access, git=git)
    worktrees = WorktreeService(db, clock, git, settings, recorder)
    # The agent of a task on a repository runs in the task's worktree.
    orchestrator = Orchestrator(db, recorder, runtime, agent_tokens, settings, workdirs=worktrees)
    clarifications = ClarificationService(
        db,
        clock,
        id_factory,
        access,
        ClarificationStore(),
        recorder,
        orchestrator,
        progress_seconds=settings.clarification_progress_seconds,
    )
    moves = MoveService(db, clock, id_factory, access, bus, orchestrator, describer)
    # The turn lifecycle calls up into clarification and moves, in this order.
    hooks = orchestrator.hooks
    hooks.superseded.append(clarifications.supersede_waiters)
    hooks.turn_ending.append(clarifications.turn_ending_in)
    hooks.turn_ending.append(permissions.turn_ending_in)
    hooks.turn_ended.append(moves.on_turn_end_in)
    hooks.view_columns.append(moves.turn_end_columns)  # what on_turn_end_in reads
    hooks.session_ended.append(clarifications.expire_session)
    hooks.session_ended.append(permissions.expire_session)
    hooks.session_ended.append(moves.on_session_ended)
    # Its agent token was revoked in the ending transaction; no principal of it stays cached.
    hooks.session_ended.append(agent_tokens.forget_session)
    tasks = TaskService(
        db,
        clock,
        id_factory,
        access,
        bus=bus,
        describer=describer,
        agents=TaskAgentStopper(orchestrator),  # deleting or archiving a task stops them
        repositories=repositories,  # a task may name a repository (validated at create)
        worktrees=worktrees,  # deleting a task removes its worktree
    )
    workspaces = WorkspaceService(db, clock, id_factory, access, bus=bus)
    workflows = WorkflowService(db, clock, id_factory, access, bus=bus)
    sessions = SessionService(
        db, clock, id_factory, access, orchestrator, agent_tokens, bus, describer
    )
    changes = ChangesService(db, git, repositories, bus, sessions, describer)
    services = Services(
        settings=settings,
        db=db,
        clock=clock,
        new_id=id_factory,
        auth=AuthService(db, clock, settings, id_factory),
        access=access,
        workspaces=workspaces,
        workflows=workflows,
        tasks=tasks,
        agent_profiles=AgentProfileService(db, clock, id_factory),
        bus=bus,
        agent_tokens=agent_tokens,
        orchestrator=orchestrator,
        sessions=sessions,
        clarifications=clarifications,
        permissions=permissions,
        moves=moves,
        agent_processes=agent_processes,
        repositories=repositories,
        worktrees=worktrees,
        changes=changes,
        events=EventsService(db, access, bus),
        presenter=TaskPresenter(db),
        worktree_gc=WorktreeCollector(db, git, settings),
    )
    return services
