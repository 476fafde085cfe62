"""The rival catalog: skills a crowded install holds, for ``--trigger-crowd``.

A skill under test rarely meets its users alone: they install dozens of skills, and a new one
is listed after all of theirs, so it is the first to lose its description to the listing
budget. The catalog (``rivals.json``, shipped with the package) holds descriptions written for
this plugin, across the domains people install skills for, in the shape real descriptions
have (what the skill does, then when to use it); none is copied from a published skill.
:func:`nearest` ranks them by the words they share with the skill under test, so a crowd of
ten holds its closest competitors.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache
from importlib import resources

from pytest_skilltrigger.model.context import USER, ListedSkill, TriggerContext
from pytest_skilltrigger.support.errors import InputError

_WORD = re.compile(r"[a-z0-9]+")
# words too common in descriptions to say what a skill is about
_COMMON = frozenset(
    "a an and or the to of in on for with from into by as is are be it its use when this that "
    "someone user users needs need must new".split()
)


@cache  # the shipped file never changes while the process runs
def rivals() -> tuple[tuple[str, str, str], ...]:
    """Every rival as ``(domain, name, description)``, in the catalog's order."""
    text = resources.files("pytest_skilltrigger.skills").joinpath("rivals.json").read_text("utf-8")
    return tuple((r["domain"], r["name"], r["description"]) for r in json.loads(text)["rivals"])


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _COMMON and len(w) > 2)


def nearest(description: str, exclude: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Every rival as ``(name, description)``, those sharing most words with ``description``
    first (ties in catalog order); ``exclude`` names are left out (a name already listed)."""
    wanted = _words(description)
    ranked = sorted(
        (-len(wanted & _words(text)), position, name, text)
        for position, (_domain, name, text) in enumerate(rivals())
        if name not in exclude
    )
    return [(name, text) for _score, _position, name, text in ranked]


# a rival is a skill in use: the CLI's usage score of one use this week
RIVAL_USAGE = 1.0


def crowd_context(context: TriggerContext, size: int, usage: float = 0.0) -> TriggerContext:
    """``context`` in an install of ``size`` other user skills: the user's own (the installed
    skills of the user group, ``--trigger-extra-skills``) first, then the catalog's rivals
    nearest to the skill under test, each a skill in use; the skill under test with
    ``usage`` (a new skill has none, so past the budget it is the first to lose its text).
    InputError when the catalog and the user's skills hold fewer than ``size``."""
    own = [s for s in context.installed if s.group == USER][:size]
    taken = {s.name for s in context.listing()}
    wanted = size - len(own)
    found = nearest(context.description, exclude=frozenset(taken))[:wanted]
    if len(found) < wanted:
        raise InputError(
            "--trigger-crowd",
            f"{size} is more skills than your own and the rival catalog hold "
            f"({len(own) + len(found)})",
        )
    rivals_listed = [ListedSkill(name, text, group=USER, usage=RIVAL_USAGE) for name, text in found]
    others = tuple(s for s in context.installed if s.group != USER)
    in_use = tuple(replace(s, usage=max(s.usage, RIVAL_USAGE)) for s in own)
    return replace(context, installed=in_use + tuple(rivals_listed) + others, usage=usage)
