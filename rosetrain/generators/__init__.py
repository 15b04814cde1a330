"""The generation pipeline: a spec (YAML) -> scenes -> rendered images -> tasks and prompts -> records."""
