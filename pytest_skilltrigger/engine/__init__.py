"""The engine: sampling and verdicts over a backend, the store, the cost guard, batches.

It knows nothing of pytest. Its front door is
:class:`~pytest_skilltrigger.engine.session.TriggerSession`; the value types it works on are
the ground floor's (:mod:`pytest_skilltrigger.model`).
"""
