"""How the API backend words a failed request: one line, secrets removed, the request id kept.

Shared by live runs (:mod:`.backend`) and message batches (:mod:`.batches`), so an error reads
the same whichever path sent the request, and the request id a support ticket needs is never
lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_skilltrigger.support.redact import redact

if TYPE_CHECKING:  # the SDK is imported on the first call
    from anthropic import APIStatusError


def describe_error(exc: APIStatusError) -> str:
    """One line for an SDK ``APIStatusError``: status, error type and message."""
    message = exc.api_message or str(exc)
    return with_request_id(
        f"{exc.status_code} {exc.type or 'error'}: {redact(message)}", exc.request_id
    )


def with_request_id(message: str, request_id: str | None) -> str:
    """``message`` with the request id the API gave, when it gave one."""
    return f"{message} (request id {request_id})" if request_id else message
