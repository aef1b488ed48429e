"""The live event stream a caller follows (SSE), authorized and filtered to what the
caller may see: the one service the REST events endpoint and the pages use."""
