"""The `kandev` command line (CONTRACT §1, §12).

Imports stay light here and in the cli_* modules (typer only): each command imports the
server, the database or the MCP SDK when it runs, so `kandev --help` is quick.
"""

from __future__ import annotations

import ipaddress
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kandev import __version__
from kandev.cli_admin import gc_command, token_app, user_app
from kandev.cli_board import task_app, workspace_app
from kandev.cli_permissions import permissions_app
from kandev.cli_questions import questions_app
from kandev.cli_sessions import session_app

if TYPE_CHECKING:
    from kandev.config import Settings

app = typer.Typer(
    name="kandev",
    help="Kandev: a self-hosted control plane for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(workspace_app, name="workspace", help="Workspaces, over REST (KANDEV_URL).")
app.add_typer(task_app, name="task", help="Tasks: create, list, show, move (KANDEV_URL).")
app.add_typer(session_app, name="session", help="Agent sessions: start, prompt, watch.")
app.add_typer(
    questions_app,
    name="questions",
    help="Answer agents from the terminal (KANDEV_URL, KANDEV_TOKEN).",
)
app.add_typer(
    permissions_app,
    name="permissions",
    help="Decide agents' permission requests (KANDEV_URL, KANDEV_TOKEN).",
)
app.add_typer(user_app, name="user", help="Manage users (offline, against the database).")
app.add_typer(token_app, name="token", help="Manage personal access tokens (offline).")
app.command("gc")(gc_command)


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
    host: str = typer.Option("127.0.0.1", envvar="KANDEV_HOST", help="Interface to listen on."),
    port: int = typer.Option(
        8420, min=0, max=65535, envvar="KANDEV_PORT", help="TCP port (0: any free port)."
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        envvar="KANDEV_HOME",
        show_default="~/.kandev",
        help="Where Kandev keeps its SQLite database and agent folders (one server at a time).",
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
    allowed_hosts: str = typer.Option(
        "",
        "--allowed-hosts",
        envvar="KANDEV_ALLOWED_HOSTS",
        help="More Host names to answer, comma-separated (loopback and --host always are).",
    ),
    trust_proxy: str = typer.Option(
        "",
        "--trust-proxy",
        envvar="KANDEV_TRUST_PROXY",
        help="Addresses of reverse proxies whose X-Forwarded-* headers are believed.",
    ),
    debug: bool = typer.Option(
        False, "--debug", envvar="KANDEV_DEBUG", help="Show tracebacks of startup failures."
    ),
) -> None:
    """Serve REST, MCP, events and the web UI (migrations are applied on start).

    Any startup failure is one line on stderr and exit status 2 (kandev.startup).
    """
    from kandev import startup
    from kandev.config import Settings, default_data_dir

    data_dir = data_dir or default_data_dir()
    serving = False

    def started(settings: Settings, auth_mode: str) -> None:
        nonlocal serving
        serving = True
        typer.echo(startup_banner(settings, auth_mode))
        if not settings.auth and not _is_loopback(settings.host):
            typer.echo(
                "warning: auth is off and Kandev listens beyond loopback; anyone who can reach "
                "this port can drive your agents. Use --auth.",
                err=True,
            )

    try:
        _check_database_url(database_url, data_dir)
        settings = Settings(
            host=host,
            port=port,
            data_dir=data_dir,
            database_url=database_url,
            auth=auth,
            allowed_hosts=allowed_hosts,
            trust_proxy=trust_proxy,
            debug=debug,
        )
        startup.serve(settings, on_started=started)
    except KeyboardInterrupt:  # Ctrl-C before the server was up
        raise typer.Exit(130) from None
    except Exception as exc:
        if debug:
            traceback.print_exception(exc)
        typer.echo(f"kandev: {startup.describe_failure(exc, serving=serving)}", err=True)
        # 2: it did not start (CONTRACT §8); 1: it served, then failed (e.g. while stopping).
        raise typer.Exit(1 if serving else 2) from None


def startup_banner(settings: Settings, auth_mode: str) -> str:
    """What `kandev serve` prints once it accepts work: where everything is, and how to sign
    in (in setup mode: how to make the first admin)."""
    url = settings.resolved_database_url()
    store = "PostgreSQL" if url.startswith("postgresql") else f"SQLite at {url.split(':///', 1)[1]}"
    base = settings.public_base_url()
    lines = [
        f"Kandev {__version__} on {base} — {store}; auth {'on' if settings.auth else 'off'}",
        f"  Web UI       {base}/",
        f"  REST         {base}/api/v1",
        f"  MCP          {base}/mcp  (external: people, bots, other agents)",
        f"  Agent MCP    {base}/agent/mcp  (agents of Kandev sessions, with their token)",
        f"  Health       {base}/health",
    ]
    if auth_mode == "disabled":
        lines.append(
            "  Auth         off: every request acts as the local user (--auth to require sign-in)"
        )
    elif auth_mode == "setup":
        # The same database as this server's: its data dir, or (never echoed) its URL.
        data_dir = (
            f" --data-dir {settings.data_dir}"
            if not settings.database_url
            else " --database-url <this server's URL>"
        )
        lines += [
            "  Auth         on, setup: no admin yet. Create the first one with",
            f"               kandev user create --admin --email you@example.com{data_dir}",
            f"               or open {base}/setup",
        ]
    else:
        lines.append(
            f"  Auth         on: sign in at {base}/login; scripts use a personal access token"
            f" ({base}/settings/tokens)"
        )
    return "\n".join(lines)


def _check_database_url(database_url: str, data_dir: Path) -> None:
    """Refuse a URL we cannot even parse, without echoing a password back."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from kandev.config import normalize_database_url
    from kandev.startup import StartupError

    try:
        url = normalize_database_url(database_url, data_dir)
    except ValueError as exc:
        raise StartupError(f"--database-url: {exc}") from None
    try:
        make_url(url)
    except (ArgumentError, ValueError):
        raise StartupError(
            "--database-url: cannot parse it; expected postgresql://user:password@host:port/db "
            "or sqlite:///path/to/file.db"
        ) from None


@app.command("demo-agent")
def demo_agent() -> None:
    """Run the bundled demo agent: an ACP agent on stdio (for the built-in `demo` profile)."""
    from kandev.agents.demo_agent import main as run_demo_agent

    run_demo_agent()


def main() -> None:
    """The `kandev` process: a usage error is one line on stderr and exit 2 (CONTRACT §12);
    Typer's own rendering is a multi-line box."""
    # Typer bundles its own click: its exceptions live there, not in the `click` package.
    from typer._click import exceptions as click

    try:
        code = app(standalone_mode=False)
    except click.NoArgsIsHelpError as exc:
        exc.show()  # bare `kandev` / `kandev task`: the help, as before
        raise SystemExit(2) from None
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "kandev"
        typer.echo(f"error: {exc.format_message()} (see `{where} -h`)", err=True)
        raise SystemExit(2) from None
    raise SystemExit(code if isinstance(code, int) else 0)
