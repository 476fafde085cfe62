"""The controller's work without pytest: the results gathered as they arrive, and the end of
the session (improvement rounds and SKILL.md, the typed report, the files, the gates, the
baseline).

As pytest-cov's engine is to its plugin: the pytest layer's controller calls these objects
from its hooks and keeps only the hooks and pytest's terminal. A library user can drive them
the same way.
"""
