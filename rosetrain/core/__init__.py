"""Shared basics every layer uses: the ROSE protocol facts, cell regions, errors, file I/O
(atomic writes, locks, JSON) and the chat message format."""
