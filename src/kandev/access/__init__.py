"""Who may see what: the scoping rules (rules.py) and their SQL forms for list queries
(sql.py). The row-level authorization built on them lives with the rows:
`board.access.BoardAccess` (workspaces, workflows, tasks) and `sessions.access.AccessRules`
(adds sessions)."""
