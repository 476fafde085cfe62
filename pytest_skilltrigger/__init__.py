"""pytest-skilltrigger: test and improve when Claude Agent Skills trigger.

The engine (everything but :mod:`pytest_skilltrigger.plugin`) knows nothing of pytest and can
be called directly from Python.
"""

__version__ = "0.1.0"
