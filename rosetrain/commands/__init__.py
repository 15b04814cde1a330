"""One module per CLI sub-command (see rosetrain.cli)."""
