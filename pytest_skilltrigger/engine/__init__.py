"""The engine: settings, the trigger context, sampling and verdicts, the store and cost.

It knows nothing of pytest. Its front door is
:class:`~pytest_skilltrigger.engine.session.TriggerSession`.
"""
