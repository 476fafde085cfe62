"""Trigger runs as Message Batches: the same requests as live runs, sent whole, half the price.

A batch request is the live run's request (the builtin one, or the installed CLI's captured
one with the query spliced in) as a JSON object, with two changes only: no ``stream`` (a batch
answer comes back whole), and ``max_tokens`` capped to what a decision needs (plus the
thinking budget when the context thinks first). Prompt-caching markers stay where they are.

A whole answer is decided by the rule the streams use
(:func:`~pytest_skilltrigger.backends.first_choice.decide_message`): its first ``tool_use``
block, else "text". An answer cut at the cap before its first tool call was complete decides
nothing: it is sent again in the next wave with the live request's own ``max_tokens``, and
that answer is read as a live stream would be (one that ends without a tool is "text").

Everything goes through the SDK's ``messages.batches`` resources (``beta.messages.batches``
when the captured request carries ``anthropic-beta``) on the backend's one client, so its
retries, authentication and transport apply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pytest_skilltrigger.backends.api.errors import describe_error
from pytest_skilltrigger.backends.api.request import MARKER, RequestTemplate
from pytest_skilltrigger.backends.api.sdk_client import retry_after
from pytest_skilltrigger.backends.base import BatchAnswer, BatchError, BatchRequest, BatchStatus
from pytest_skilltrigger.backends.first_choice import StreamError, decide_message
from pytest_skilltrigger.backends.prompt_hooks import HookFailed
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.support.redact import redact

if TYPE_CHECKING:
    from pytest_skilltrigger.backends.api.sdk_client import SdkClient


class BatchingHost(Protocol):
    """What message batches need of the API backend: its SDK connection, model and live
    request (a Protocol, so that this module, which that backend uses, names nothing of it)."""

    connection: SdkClient
    model: str

    def template(self, context: TriggerContext) -> RequestTemplate: ...


# Output a decision needs: a short preamble and one tool call fit with room to spare.
DECISION_MAX_TOKENS = 2048
BATCH_LIMIT = 100_000  # requests the API takes in one batch
BATCH_BYTES = 200 * 1024 * 1024  # under the API's 256 MB a batch, with room for the framing
CREATE_TIMEOUT = 600.0  # a create uploads up to BATCH_BYTES
CREATE_TRIES = 3
# result error types after which no request can succeed (as a live run's 401/403/404)
FATAL_ERRORS = {"authentication_error", "permission_error", "not_found_error"}
# statuses no further call can get past, as a live run's 401/403: bad credentials, no access
FATAL_STATUSES = frozenset({401, 403})
# a create's 404 too (no batch endpoint here), as a live run's unknown model; a poll's 404 is
# about one batch, not the session
FATAL_CREATE_STATUSES = FATAL_STATUSES | {404}
# statuses with which the API says it did not take a create (rate limited, overloaded), so
# sending it again cannot start a second batch; a 500, 502 or 504 may come after the API took
# it, and a batch sent again would be billed twice
NOT_TAKEN_STATUSES = frozenset({429, 529})
CAPPED = "the answer reached max_tokens before a complete tool call (no decision)"


def batch_params(live: dict[str, Any], capped: bool = True) -> dict[str, Any]:
    """A live request's parameters as batch ``params``: not streamed, and ``max_tokens``
    capped to what a decision needs (above the thinking budget, which the API requires)
    unless not ``capped``."""
    params = {k: v for k, v in live.items() if k != "stream"}
    if not capped:
        return params
    thinking = params.get("thinking")
    budget = thinking.get("budget_tokens", 0) if isinstance(thinking, dict) else 0
    cap = DECISION_MAX_TOKENS + int(budget or 0)
    params["max_tokens"] = min(int(params.get("max_tokens") or cap), cap)
    return params


def _splice(frame: tuple[bytes, bytes], query: str) -> bytes:
    """A request's serialised params with ``query`` where the marker was (as JSON string
    content): nothing is parsed or serialised per request."""
    head, tail = frame
    return head + json.dumps(query, ensure_ascii=False)[1:-1].encode("utf-8") + tail


class MessageBatches:
    """The API backend's :class:`~pytest_skilltrigger.backends.base.BatchClient`."""

    def __init__(self, backend: BatchingHost) -> None:
        self.backend = backend
        self._beta: dict[str, bool] = {}  # batch id -> made on the beta resource
        self._uncapped: set[str] = set()  # custom ids sent with the live max_tokens
        self._frames: dict[tuple[TriggerContext, bool], tuple[tuple[bytes, bytes] | None, str]] = {}

    def _resource(self, beta: bool) -> Any:
        client = self.backend.connection.client()
        return client.beta.messages.batches if beta else client.messages.batches

    def create(self, requests: Sequence[BatchRequest]) -> list[str]:
        """Batches within the API's limits (:data:`BATCH_LIMIT` requests,
        :data:`BATCH_BYTES`), one set per header set. Each request is its context's batch
        frame with the query spliced in, as live runs splice theirs: nothing is parsed or
        serialised per request. When one batch cannot be made, those already made are
        cancelled: nothing runs unread."""
        groups: dict[str, list[list[bytes]]] = {}
        sizes: dict[str, int] = {}
        for request in requests:
            params, betas = self._params(request)
            if not request.capped:
                self._uncapped.add(request.custom_id)
            item = b'{"custom_id": %s, "params": %s}' % (
                json.dumps(request.custom_id).encode("ascii"),
                params,
            )
            chunks = groups.setdefault(betas, [[]])
            if len(chunks[-1]) >= BATCH_LIMIT or sizes.get(betas, 0) + len(item) > BATCH_BYTES:
                chunks.append([])
                sizes[betas] = 0
            chunks[-1].append(item)
            sizes[betas] = sizes.get(betas, 0) + len(item) + 1
        ids: list[str] = []
        try:
            for betas, chunks in groups.items():
                for chunk in chunks:
                    if chunk:
                        ids.append(self._create(b'{"requests": [%s]}' % b",".join(chunk), betas))
        except BaseException:
            for batch_id in ids:
                try:
                    self.cancel(batch_id)
                except BatchError:
                    pass
            raise
        return ids

    def _params(self, request: BatchRequest) -> tuple[bytes, str]:
        """A request's serialised batch ``params`` and its betas: its context's frame with
        the query spliced in, or (a template that adds per-query text) built for it."""
        frame, betas = self._frame(request.context, request.capped)
        if frame is not None:
            return _splice(frame, request.query), betas
        try:
            live = self.backend.template(request.context).for_query(request.query).params
        except HookFailed as exc:
            raise BatchError(redact(str(exc))) from None
        params = json.dumps(batch_params(live, request.capped), ensure_ascii=False)
        return params.encode("utf-8"), betas

    def _frame(
        self, context: TriggerContext, capped: bool
    ) -> tuple[tuple[bytes, bytes] | None, str]:
        """A context's batch ``params`` around the query, built once (and its betas): the
        live request for a marker query, as :func:`batch_params` changes it (None: the
        template adds per-query text, each request is built)."""
        key = (context, capped)
        if key not in self._frames:
            try:
                template = self.backend.template(context)
                if not template.fixed:
                    self._frames[key] = (None, template.headers.get("anthropic-beta", ""))
                    return self._frames[key]
                params = template.for_query(MARKER).params
                headers = template.headers
                whole = json.dumps(batch_params(params, capped), ensure_ascii=False)
            except Exception as exc:  # a capture that failed, a body that is not JSON
                message = f"cannot build the request: {type(exc).__name__}: {exc}"
                raise BatchError(message) from None
            head, _marker, tail = whole.encode("utf-8").partition(MARKER.encode("ascii"))
            self._frames[key] = ((head, tail), headers.get("anthropic-beta", ""))
        return self._frames[key]

    def _create(self, body: bytes, betas: str) -> str:
        """One batch, posted as built. Not retried by the SDK (it sends no idempotency key,
        so a create that timed out after the API took it would start a second, unread
        batch); retried here only when the API answered that it did not take it (429, 529).
        Any other failure fails the wave (its queries error); a 401, 403 or 404 stops the
        session, as a live run's does."""
        from anthropic.types.messages import MessageBatch  # deferred: the SDK, loaded by now

        connection = self.backend.connection
        client = connection.client().with_options(max_retries=0, timeout=CREATE_TIMEOUT)
        path = "/v1/messages/batches" + ("?beta=true" if betas else "")
        headers = {"anthropic-beta": betas} if betas else {}
        for attempt in range(CREATE_TRIES):
            try:
                batch = self._call(
                    lambda: client.post(
                        path, cast_to=MessageBatch, content=body, options={"headers": headers}
                    ),
                    fatal_statuses=FATAL_CREATE_STATUSES,
                )
                break
            except BatchError as exc:
                if not exc.rejected or attempt == CREATE_TRIES - 1:
                    raise
                # a 429 says how long to wait; otherwise back off; a closing session stops it
                wait = exc.retry_after if exc.retry_after is not None else 2.0**attempt
                if connection.closed.wait(wait):
                    raise BatchError("the session closed while a batch waited to be sent") from None
        self._beta[batch.id] = bool(betas)
        return str(batch.id)

    def status(self, batch_id: str) -> BatchStatus:
        """One poll of the batch (the request counts are progress only until it ends)."""
        resource = self._resource(self._beta.get(batch_id, False))
        batch = self._call(lambda: resource.retrieve(batch_id))
        counts = batch.request_counts
        return BatchStatus(
            batch_id,
            ended=batch.processing_status == "ended",
            processing=counts.processing,
            succeeded=counts.succeeded,
            errored=counts.errored,
            expired=counts.expired,
            canceled=counts.canceled,
        )

    def results(self, batch_id: str, contexts: dict[str, TriggerContext]) -> Iterator[BatchAnswer]:
        """The answers, read as the SDK streams the JSONL (a read that fails midway is a
        :class:`BatchError` like any other)."""
        resource = self._resource(self._beta.get(batch_id, False))
        lines = iter(self._call(lambda: resource.results(batch_id)))
        while True:
            line = self._call(lambda: next(lines, None))
            if line is None:
                return
            custom_id = str(line.custom_id)
            if custom_id in contexts:
                yield self._answer(custom_id, line.result.model_dump(), contexts[custom_id])

    def _answer(
        self, custom_id: str, result: dict[str, Any], context: TriggerContext
    ) -> BatchAnswer:
        kind = result.get("type")
        if kind == "succeeded":
            message = result.get("message") or {}
            usage = Usage.from_dict(message.get("usage"))
            model = message.get("model") or self.backend.model
            content = message.get("content") or []
            # the live request's own cap: a stream would have ended there, undecided by a
            # tool, so an answer cut at it reads as one that ended
            stop = message.get("stop_reason")
            uncapped = stop == "max_tokens" and custom_id in self._uncapped
            try:
                decision = decide_message(content, "end_turn" if uncapped else stop, usage)
            except StreamError as exc:  # an empty answer: an error, sent again
                outcome = RunOutcome("error", error=str(exc), usage=usage, model=model, batch=True)
                return BatchAnswer(custom_id, outcome, retry=True)
            if decision is None:
                outcome = RunOutcome("error", error=CAPPED, usage=usage, model=model, batch=True)
                return BatchAnswer(custom_id, outcome, retry=True, capped=True)
            outcome = RunOutcome.of_choice(
                decision.chosen,
                context,
                usage=usage,
                request_id=message.get("id"),
                model=model,
                batch=True,
            )
            return BatchAnswer(custom_id, outcome)
        if kind == "errored":
            # processed, so a call, but not billed (no usage): Anthropic bills succeeded
            # requests only
            error = (result.get("error") or {}).get("error") or {}
            etype = str(error.get("type") or "api_error")
            text = f"{etype}: {redact(str(error.get('message') or 'error'))} (batch request)"
            fatal = etype in FATAL_ERRORS
            outcome = RunOutcome("error", error=text, fatal=fatal, batch=True)
            return BatchAnswer(custom_id, outcome, retry=not fatal)
        # expired or canceled: never processed, so never billed
        text = f"the batch request {kind} before it was processed"
        outcome = RunOutcome("error", error=text, requests=0, batch=True)
        return BatchAnswer(custom_id, outcome, retry=kind == "expired")

    def cancel(self, batch_id: str) -> None:
        """Ask the batch to stop (an interrupt, the timeout): what it processed stays."""
        resource = self._resource(self._beta.get(batch_id, False))
        self._call(lambda: resource.cancel(batch_id))

    def _call(self, call: Any, fatal_statuses: frozenset[int] = FATAL_STATUSES) -> Any:
        """One SDK call (with the SDK's retries); its failures as :class:`BatchError`, fatal
        for ``fatal_statuses``, ``rejected`` when the API surely did not take the request
        (:data:`NOT_TAKEN_STATUSES`)."""
        sdk = self.backend.connection.sdk()
        try:
            return call()
        except sdk.APIStatusError as exc:
            status = exc.status_code
            raise BatchError(
                describe_error(exc),
                fatal=status in fatal_statuses,
                rejected=status in NOT_TAKEN_STATUSES,
                retry_after=retry_after(exc.response.headers),
            ) from None
        except Exception as exc:  # the SDK's other errors, the HTTP library's read errors
            raise BatchError(f"{type(exc).__name__}: {redact(str(exc))}") from None
