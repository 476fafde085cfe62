"""A stand-in model whose trigger rates are spread over (0, 1), known, and drawn afresh per run;
and a stand-in improve model that reads the prompt's failures.

Why: real models trigger borderline requests at any rate from 0 to 1, so verdicts flip between
fresh runs and an optimizer sees gains through noise. To measure flakiness, wrong verdicts and
optimizer gains, the benchmarks and tests need a model whose true rates they can compute.

The rate at which a listed skill would be chosen for a query rises with the query's content
words its description covers (as the keyword model of :mod:`tests.fake_messages_api` counts
them), falls with words the description excludes ("Not for: ..."), and carries a seeded
offset per (query, skill) that spreads related requests' rates over (0, 1). Skills are tried
in the order of their rates: the first is chosen with its rate, the next with its rate of what
is left, and so on; otherwise the answer uses no skill. :meth:`GradedModel.first_choice_rates`
gives these probabilities exactly; each request draws afresh.

The improve model reads what the optimizer's prompt says went wrong: the words of the requests
it missed are added to what the description covers, the words of the requests it took wrongly
(its own and its siblings') to what it excludes. Asked for several descriptions, it varies
which failures each one addresses.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from collections.abc import Sequence

WORD_RE = re.compile(r"\w+")
NOT_FOR = "Not for:"
ALSO_FOR = "Also use it for:"
DESCRIPTION_RE = re.compile(r"<current_description>\s*(.*?)\s*</current_description>", re.DOTALL)
COUNT_RE = re.compile(r"(\d+) (?:different|distinct) descriptions")
FAILURE_RE = re.compile(r"^- (?:the request |.*?this request of .*?: )?(['\"])(.*?)\1", re.M)


class GradedModel:
    """Known trigger rates, spread over (0, 1) by a seed; a fresh draw for every request."""

    def __init__(
        self,
        seed: int = 0,
        *,
        spread: float = 3.0,
        steepness: float = 1.3,
        centre: float = 1.6,
        unrelated: float = -4.0,
    ) -> None:
        self.seed = seed
        self.spread = spread
        self.steepness = steepness
        self.centre = centre
        self.unrelated = unrelated  # the log-odds of a skill that covers no word of the query
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def reseed(self, seed: int) -> None:
        """Fresh draws for a new repetition (the true rates stay)."""
        with self._lock:
            self._rng = random.Random(seed)

    # -- true rates ---------------------------------------------------------------------------
    def offset(self, query: str, skill: str) -> float:
        """A seeded offset in [-spread, spread] for one (query, skill): the spread of rates."""
        digest = hashlib.sha256(f"{self.seed}\0{skill}\0{query}".encode()).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64
        return (2 * unit - 1) * self.spread

    def rate(self, query: str, skill: str, description: str) -> float:
        """How often the model would choose this skill for the query, were it listed alone."""
        from tests.fake_messages_api import score

        covered, _, excluded = description.partition(NOT_FOR)
        hits = score(query, covered)
        misses = score(query, excluded) if excluded else 0
        if hits == 0:
            logit = self.unrelated - 2.0 * misses
        else:
            logit = self.steepness * (hits - self.centre - 2.0 * misses)
            logit += self.offset(query, skill)
        return 1 / (1 + math.exp(-logit))

    def first_choice_rates(
        self, query: str, listing: Sequence[tuple[str, str]]
    ) -> dict[str, float]:
        """The exact probability that each listed skill is chosen first for ``query``."""
        rates = sorted(
            ((self.rate(query, name, desc), name) for name, desc in listing), reverse=True
        )
        left, out = 1.0, {}
        for rate, name in rates:
            out[name] = left * rate
            left *= 1 - rate
        return out

    def choose(self, query: str, listing: Sequence[tuple[str, str]]) -> str | None:
        """One run's choice: a skill's name, or None for an answer that uses no skill."""
        with self._lock:
            u = self._rng.random()
        acc = 0.0
        for name, p in self.first_choice_rates(query, listing).items():
            acc += p
            if u < acc:
                return name
        return None

    # -- the improve model --------------------------------------------------------------------
    def improve(self, prompt: str) -> list[str]:
        """Descriptions written from what the prompt says went wrong (as many as it asks
        for), each inside the tags the prompt asks for."""
        found = DESCRIPTION_RE.search(prompt)
        current = found.group(1).strip() if found else "A skill."
        missed, taken = _failures(prompt)
        count = int(m.group(1)) if (m := COUNT_RE.search(prompt)) else 1
        return [_rewrite(current, missed, taken, variant) for variant in range(count)]


def _failures(prompt: str) -> tuple[list[str], list[str]]:
    """The requests the prompt says the skill missed, and those it took that it should not
    (its own near-misses and its siblings' requests)."""
    missed: list[str] = []
    taken: list[str] = []
    section: list[str] | None = None
    for line in prompt.splitlines():
        lowered = line.lower()
        if "should have used the skill but did not" in lowered:
            section = missed
        elif "should not have used the skill but did" in lowered or "gets wrong" in lowered:
            section = taken
        elif not line.startswith("- ") and line.strip():
            section = None
        elif section is not None and (m := FAILURE_RE.match(line)):
            section.append(m.group(2))
    return missed, taken


def _content_words(texts: Sequence[str], known: str) -> list[str]:
    from tests.fake_messages_api import _words

    have = _words(known)
    out: list[str] = []
    for text in texts:
        for word in sorted(_words(text)):
            if word not in have and word not in out:
                out.append(word)
    return out


def _rewrite(current: str, missed: list[str], taken: list[str], variant: int) -> str:
    """The current description, covering the missed requests' words and excluding the wrongly
    taken ones'; variant 0 addresses every failure, the others a different part of them."""
    covered, _, excluded = current.partition(NOT_FOR)
    covered = covered.strip()
    rng = random.Random(variant)
    if variant:
        missed = [q for q in missed if rng.random() < 0.6]
        taken = [q for q in taken if rng.random() < 0.6]
    add = _content_words(missed, current)
    drop = _content_words(taken, excluded)
    text = covered
    if add:
        base, _, also = covered.partition(ALSO_FOR)
        words = [w for w in also.replace(".", " ").split() if w]
        text = f"{base.strip()} {ALSO_FOR} {' '.join(words + add)}."
    excluded_words = [w for w in excluded.replace(".", " ").split() if w] + drop
    if excluded_words:
        text = f"{text} {NOT_FOR} {' '.join(excluded_words)}."
    return text.replace("<", "").replace(">", "")[:1000]
