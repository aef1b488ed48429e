"""Task moves: one service for every way a task changes step (REST, both MCP surfaces,
turn-complete automation), deferred moves applied at turn end, and step events."""
