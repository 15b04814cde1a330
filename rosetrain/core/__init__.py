"""The pieces every part of rosetrain shares: errors, the ROSE protocol, regions, files."""
