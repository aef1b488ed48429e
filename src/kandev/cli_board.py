"""`kandev workspace …` and `kandev task …`: the board from a terminal, over REST
(KANDEV_URL, KANDEV_TOKEN; CONTRACT §12)."""

from __future__ import annotations

from typing import Any

import typer

from kandev.cli_http import (
    JSON_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    CommandFailed,
    KandevClient,
    client_for,
    print_json,
    render_record,
    render_table,
    run_command,
)

workspace_app = typer.Typer(no_args_is_help=True, help="Workspaces: create and list them.")
task_app = typer.Typer(no_args_is_help=True, help="Tasks: create, list, show and move them.")

DEFAULT_WORKFLOW_NAME = "Default"
TASK_FIELDS = (
    ("id", "id"),
    ("title", "title"),
    ("state", "state"),
    ("step", "step_name"),
    ("workflow", "workflow_id"),
    ("workspace", "workspace_id"),
    ("needs input", "task_pending_action"),
    ("question", "pending_clarification_id"),
    ("description", "description"),
    ("created", "created_at"),
)
TASK_COLUMNS = (
    ("ID", "id"),
    ("TITLE", "title"),
    ("STEP", "step_name"),
    ("STATE", "state"),
    ("NEEDS INPUT", "task_pending_action"),
)


# --- workspaces ---------------------------------------------------------------------------


@workspace_app.command("create")
def workspace_create(
    name: str = typer.Argument(..., help="The workspace's name."),
    description: str = typer.Option("", "--description", help="What it is for."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a workspace and print it."""

    def action() -> None:
        body = {"name": name, "description": description}
        workspace = client_for(url, token).post("/api/v1/workspaces", body)
        if as_json:
            print_json(workspace)
        else:
            typer.echo(f"Created workspace {workspace['name']} ({workspace['id']})")

    run_command(action)


@workspace_app.command("list")
def workspace_list(
    url: str = URL_OPTION, token: str = TOKEN_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """List the workspaces you can see."""

    def action() -> None:
        workspaces = client_for(url, token).get("/api/v1/workspaces")["workspaces"]
        if as_json:
            print_json(workspaces)
        elif not workspaces:
            typer.echo("No workspaces yet: kandev workspace create NAME")
        else:
            columns = (("ID", "id"), ("NAME", "name"), ("DESCRIPTION", "description"))
            typer.echo(render_table(workspaces, columns))

    run_command(action)


# --- tasks --------------------------------------------------------------------------------


def _workflows(client: KandevClient, workspace_id: str) -> list[dict[str, Any]]:
    return client.get("/api/v1/workflows", workspace_id=workspace_id)["workflows"]


def _step_names(workflows: list[dict[str, Any]]) -> dict[str, str]:
    return {step["id"]: step["name"] for flow in workflows for step in flow["steps"]}


def _with_step_name(task: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    step_id: str | None = task.get("workflow_step_id")
    return {**task, "step_name": names.get(step_id, step_id) if step_id is not None else None}


def _find_step(workflow: dict[str, Any], wanted: str) -> dict[str, Any] | None:
    """A step of the workflow by id, or else by name (case-insensitive)."""
    for step in workflow["steps"]:
        if step["id"] == wanted:
            return step
    matches = [s for s in workflow["steps"] if s["name"].casefold() == wanted.casefold()]
    return matches[0] if len(matches) == 1 else None


def _workflow_for_new_task(
    client: KandevClient, workspace_id: str, workflow_id: str
) -> dict[str, Any]:
    if workflow_id:
        return client.get(f"/api/v1/workflows/{workflow_id}")
    workflows = _workflows(client, workspace_id)
    if workflows:
        return workflows[0]
    # The workspace has no board yet: the server's default one (Backlog … Done).
    return client.post(
        "/api/v1/workflows", {"workspace_id": workspace_id, "name": DEFAULT_WORKFLOW_NAME}
    )


@task_app.command("create")
def task_create(
    title: str = typer.Argument(..., help="The task's title."),
    workspace_id: str = typer.Option(..., "--workspace", help="Workspace id."),
    workflow_id: str = typer.Option(
        "", "--workflow", help="Workflow id; default the workspace's first (created if none)."
    ),
    step: str = typer.Option(
        "", "--step", help="Step id (or name) to land on; default the start step."
    ),
    description: str = typer.Option("", "--description", help="What to do."),
    repository_id: str = typer.Option("", "--repository", help="Repository id (of the workspace)."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a task on a workspace's board and print it."""

    def action() -> None:
        client = client_for(url, token)
        workflow = _workflow_for_new_task(client, workspace_id, workflow_id)
        body: dict[str, Any] = {
            "workspace_id": workspace_id,
            "workflow_id": workflow["id"],
            "title": title,
            "description": description,
        }
        if step:
            found = _find_step(workflow, step)
            body["workflow_step_id"] = found["id"] if found else step
        if repository_id:
            body["repository_id"] = repository_id
        task = client.post("/api/v1/tasks", body)
        if as_json:
            print_json(task)
            return
        task = _with_step_name(task, _step_names([workflow]))
        typer.echo(f"Created task {task['title']} ({task['id']}) in {task['step_name']}")

    run_command(action)


@task_app.command("list")
def task_list(
    workspace_id: str = typer.Option(..., "--workspace", help="Workspace id."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List a workspace's tasks with their step, state and whether they need you."""

    def action() -> None:
        client = client_for(url, token)
        tasks = client.get("/api/v1/tasks", workspace_id=workspace_id)["tasks"]
        if as_json:
            print_json(tasks)
            return
        if not tasks:
            # An unknown (or invisible) workspace says so rather than "no tasks".
            client.get(f"/api/v1/workspaces/{workspace_id}")
            typer.echo(f"No tasks yet: kandev task create TITLE --workspace {workspace_id}")
            return
        names = _step_names(_workflows(client, workspace_id))
        typer.echo(render_table([_with_step_name(t, names) for t in tasks], TASK_COLUMNS))

    run_command(action)


@task_app.command("show")
def task_show(
    task_id: str = typer.Argument(..., help="Task id."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a task and its sessions."""

    def action() -> None:
        client = client_for(url, token)
        task = client.get(f"/api/v1/tasks/{task_id}")
        if as_json:
            print_json(task)
            return
        workflow = client.get(f"/api/v1/workflows/{task['workflow_id']}")
        typer.echo(render_record(_with_step_name(task, _step_names([workflow])), TASK_FIELDS))
        sessions = client.get(f"/api/v1/tasks/{task_id}/sessions")["sessions"]
        if sessions:
            columns = (
                ("SESSION", "id"),
                ("STATE", "state"),
                ("PRIMARY", "is_primary"),
                ("NEEDS INPUT", "pending_action"),
                ("STARTED", "started_at"),
            )
            typer.echo("\n" + render_table(sessions, columns))
        else:
            typer.echo(f"\nNo sessions yet: kandev session start {task_id} --profile demo")

    run_command(action)


@task_app.command("move")
def task_move(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str = typer.Argument(..., help="Step id (or name) of the task's workflow."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Move a task to another step (a human move: allowed while its agent runs)."""

    def action() -> None:
        client = client_for(url, token)
        task = client.get(f"/api/v1/tasks/{task_id}")
        workflow = client.get(f"/api/v1/workflows/{task['workflow_id']}")
        found = _find_step(workflow, step)
        if found is None:
            names = ", ".join(f"{s['name']} ({s['id']})" for s in workflow["steps"])
            raise CommandFailed(f"no step {step!r} in the task's workflow; its steps: {names}")
        body = {"workflow_id": workflow["id"], "workflow_step_id": found["id"]}
        result = client.post(f"/api/v1/tasks/{task_id}/move", body)
        if as_json:
            print_json(result)
            return
        moved = result["task"]
        typer.echo(f"Moved {moved['title']} ({moved['id']}) to {result['workflow_step']['name']}")

    run_command(action)
