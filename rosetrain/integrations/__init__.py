"""Bridges to tools outside rosetrain (each imported only when used)."""
