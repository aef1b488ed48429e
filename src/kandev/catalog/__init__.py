"""The vocabulary every layer shares: session and task states, message kinds and their
statuses and metadata keys, event types. Leaf modules: they import nothing from Kandev, so
any package may use them without creating an edge upward."""
