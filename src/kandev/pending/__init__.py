"""What a session or task waits on a human for (reference §1.7, §2.5): the pending-action
projection over clarifications and permission requests, and the task / session JSON that
carries it. Sits above sessions and clarification; the layers below receive it as a
describer (`board.describe.TaskDescriber`, `sessions.describe.SessionDescriber`)."""
