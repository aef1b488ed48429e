"""Offline admin commands: `kandev user create`, `kandev token create` and `kandev gc`.

They open the configured database directly (migrating it first, like the server does), so
the first admin and a first token can be made before the server ever runs. Register with
`app.add_typer(user_app, name="user")` and `app.add_typer(token_app, name="token")`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:  # imported when a command runs, so `kandev --help` stays quick
    from kandev.config import Settings
    from kandev.services import Services

T = TypeVar("T")

user_app = typer.Typer(help="Manage users in the configured database.", no_args_is_help=True)
token_app = typer.Typer(help="Manage personal access tokens.", no_args_is_help=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", envvar="KANDEV_HOME", help="Data directory (default ~/.kandev)."),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="KANDEV_DATABASE_URL",
        help="postgresql://… or sqlite:///…; default: SQLite in the data dir.",
    ),
]


def load_settings(data_dir: Path | None, database_url: str | None) -> Settings:
    from kandev.config import Settings

    overrides: dict[str, Any] = {}
    if data_dir is not None:
        overrides["data_dir"] = data_dir.expanduser()
    if database_url is not None:
        overrides["database_url"] = database_url
    return Settings.model_validate(overrides)


def run_offline(settings: Settings, action: Callable[[Services], Awaitable[T]]) -> T:
    """Bring the configured database to the current schema, run one action, close; errors
    exit 1. Only storage is prepared: a running server's agents, questions and turns are its
    own (startup recovery belongs to `kandev serve`)."""
    from kandev.errors import KandevError
    from kandev.services import build_services

    _refuse_another_servers_database(settings)

    async def _main() -> T:
        services = build_services(settings)
        try:
            await services.prepare_storage()
            return await action(services)
        finally:
            await services.close()

    try:
        import asyncio

        return asyncio.run(_main())
    except KandevError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc


def _refuse_another_servers_database(settings: Settings) -> None:
    """Without --database-url an offline command works on the data dir's SQLite file. When
    the server holding that data dir has no such file, it runs on another database (say,
    PostgreSQL): writing a user or a token into a new SQLite file there would be lost."""
    from kandev.config import SQLITE_FILE_NAME
    from kandev.startup import live_server_pid

    if settings.database_url:
        return
    pid = live_server_pid(settings.data_dir)
    if pid is not None and not (settings.data_dir / SQLITE_FILE_NAME).exists():
        typer.echo(
            f"error: the Kandev server using {settings.data_dir} (pid {pid}) runs on another "
            "database; give that database with --database-url (or KANDEV_DATABASE_URL)",
            err=True,
        )
        raise typer.Exit(1)


def _prompted_password() -> str:
    """The password typed twice (at the terminal, or piped in); a one-line error when there
    is none to read (an empty pipe, Ctrl-D, Ctrl-C)."""
    try:
        return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))
    except (EOFError, typer.Abort):
        typer.echo(
            "\nerror: no password entered (give --password or KANDEV_USER_PASSWORD); "
            "nothing was created",
            err=True,
        )
        raise typer.Exit(1) from None


@user_app.command("create")
def user_create(
    email: Annotated[str, typer.Option("--email", help="The user's login email.")],
    password: Annotated[
        str | None,
        typer.Option(
            "--password",
            envvar="KANDEV_USER_PASSWORD",
            help="At least 8 characters; prompted (hidden) when not given.",
        ),
    ] = None,
    display_name: Annotated[
        str, typer.Option("--display-name", help="The name shown for the user (default: none).")
    ] = "",
    role: Annotated[str, typer.Option("--role", help="admin or member.")] = "member",
    admin: Annotated[bool, typer.Option("--admin", help="Same as --role admin.")] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a user with a local password. The first admin becomes the server's owner."""
    if password is None:
        password = _prompted_password()
    from kandev.auth.identity import ROLE_ADMIN

    settings = load_settings(data_dir, database_url)
    chosen_role = ROLE_ADMIN if admin else role

    async def action(services: Services) -> dict[str, Any]:
        return await services.auth.create_user(
            email, password, display_name, chosen_role, actor=None
        )

    user = run_offline(settings, action)
    typer.echo(f"created {user['role']} {user['email']} (id {user['id']})")


@token_app.command("create")
def token_create(
    email: Annotated[str, typer.Option("--email", help="Owner of the new token.")],
    name: Annotated[str, typer.Option("--name", help="A label to recognise it by.")] = "cli",
    ttl_hours: Annotated[
        int, typer.Option("--ttl-hours", help="Hours until it expires; 0 = never.")
    ] = 0,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Mint a personal access token and print it once (only its hash is stored)."""
    settings = load_settings(data_dir, database_url)

    async def action(services: Services) -> str:
        identity = await services.auth.identity_for_email(email)
        raw, _record = await services.auth.create_token(identity, name, ttl_hours)
        return raw

    raw = run_offline(settings, action)
    typer.echo("token created; it is shown only this once:", err=True)
    typer.echo(raw)


def gc_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Remove worktrees (and their spare branches) of deleted tasks, and worktree
    directories git no longer knows; report the disk reclaimed."""
    settings = load_settings(data_dir, database_url)

    async def action(services: Services) -> dict[str, Any]:
        return (await services.worktree_gc.collect(dry_run=dry_run)).to_json()

    report = run_offline(settings, action)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        verb = "would remove" if dry_run else "removed"
        for item in report["removed"]:
            what = "worktree" if item["kind"] == "worktree" else "directory (unknown to git)"
            line = f"{verb} {what} {item['path']}"
            if item["branch"]:
                kept = "deleted" if item["branch_deleted"] else "kept: it has unmerged commits"
                if item["branch_deleted"] and dry_run:
                    kept = "would be deleted"
                line += f" (branch {item['branch']} {kept})"
            typer.echo(line)
        for error in report["errors"]:
            typer.echo(f"could not remove {error}", err=True)
        total = len(report["removed"])
        reclaimed = "would reclaim" if dry_run else "reclaimed"
        typer.echo(f"{total} removed, {reclaimed} {report['reclaimed']} ({report['bytes']} bytes)")
    if report["errors"]:
        raise typer.Exit(1)
