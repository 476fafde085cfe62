"""The Claude Code backend: the real CLI run in an isolated workspace per run."""
