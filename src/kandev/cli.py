"""The `kandev` command line (CONTRACT §1)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import typer

from kandev import __version__
from kandev.cli_admin import token_app, user_app
from kandev.cli_questions import questions_app
from kandev.config import Settings, default_data_dir, normalize_database_url

app = typer.Typer(
    name="kandev",
    help="Kandev: a self-hosted control plane for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(user_app, name="user", help="Manage users (offline, against the database).")
app.add_typer(token_app, name="token", help="Manage personal access tokens (offline).")
app.add_typer(
    questions_app,
    name="questions",
    help="Answer agents from the terminal (KANDEV_URL, KANDEV_TOKEN).",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kandev {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Kandev: a kanban board of tasks, agent sessions, and agents that ask you questions."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8420, min=0, max=65535, help="TCP port."),
    data_dir: Path = typer.Option(
        default_data_dir(),
        "--data-dir",
        envvar="KANDEV_HOME",
        help="Where Kandev keeps its SQLite database and agent folders.",
    ),
    database_url: str = typer.Option(
        "",
        "--database-url",
        envvar="KANDEV_DATABASE_URL",
        help="postgresql://user:pass@host/db for PostgreSQL; default: SQLite in the data dir.",
    ),
    auth: bool = typer.Option(
        False, "--auth/--no-auth", envvar="KANDEV_AUTH", help="Require sign-in (default off)."
    ),
) -> None:
    """Serve REST, MCP, events and the web UI (migrations are applied on start)."""
    import uvicorn

    from kandev.app import create_app

    try:
        url = normalize_database_url(database_url, data_dir)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--database-url") from None
    settings = Settings(
        host=host, port=port, data_dir=data_dir, database_url=database_url, auth=auth
    )
    store = "PostgreSQL" if url.startswith("postgresql") else f"SQLite at {url.split(':///', 1)[1]}"
    typer.echo(
        f"Kandev {__version__} on http://{host}:{port} — {store}; auth {'on' if auth else 'off'}"
    )
    if not auth and not _is_loopback(host):
        typer.echo(
            "warning: auth is off and Kandev listens beyond loopback; anyone who can reach "
            "this port can drive your agents. Use --auth.",
            err=True,
        )
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level="info",
        # Open SSE streams must not hold a shutdown (or a restart) hostage.
        timeout_graceful_shutdown=5,
    )


@app.command("demo-agent")
def demo_agent() -> None:
    """Run the bundled demo agent: an ACP agent on stdio (for the built-in `demo` profile)."""
    from kandev.agents.demo_agent import main as run_demo_agent

    run_demo_agent()


def main() -> None:
    app()
