"""Where eval sets are kept, and which skill each entry is for.

Public skill repositories keep trigger sets in more places than a skill's own folder
(``docs/reference/eval-sets.md`` describes each layout):

- beside the skill or in its ``evals/``: ``trigger-eval.json`` and the other usual names,
  as YAML (``skill-tests.yaml``), CSV (``eval.csv``) or JSON Lines (``routing-eval.jsonl``);
- in a folder above it (the plugin's, the repository's root): a set whose entries name the
  skill each is about (``expected_skill``, ``skill``, ``should_trigger: "<skill>"``), a
  routing set of the folder's skills, a plain set when that folder holds one skill alone, a
  file per skill (``evals/triggers/<skill>.json``) or a folder per skill
  (``evals/<skill>/prompts.csv``).

Everything is read before any call. A file that cannot be read is an error naming it; a
part of a file that cannot be read as meant (entries naming no skill in a folder of several,
commands, a target with no gate here) is one warning a file, and the rest runs. When a skill
has no set, one message says where it looked, what it found and why it passed each over.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pytest_skilltrigger.model.formatting import first_few
from pytest_skilltrigger.model.request_layouts import resolve_model_alias
from pytest_skilltrigger.skills.evalset import (
    EVAL_SET_NAMES,
    Document,
    EvalEntry,
    EvalSet,
    SetEntry,
    SkillNames,
    check_unique,
    for_skill,
    load_document,
)
from pytest_skilltrigger.skills.routing_set import RoutingEntry, RoutingSet
from pytest_skilltrigger.skills.skill import Skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import skill_folders, within

# a skill's own set, in its evals/ or beside its SKILL.md, most common first
SKILL_SET_NAMES = (
    *EVAL_SET_NAMES,
    "trigger-eval.yaml",
    "trigger-eval.yml",
    "trigger-evals.yaml",
    "skill-tests.yaml",
    "skill-tests.yml",
    "trigger-eval.csv",
    "eval.csv",
    "evals.csv",
    "prompts.csv",
    "trigger-eval.jsonl",
    "routing-eval.jsonl",
    "evals.json",
)
# names a file may have that is often something else (skill-creator's output evals): one
# with no trigger entries is passed over, not an error
_MAYBE_SETS = frozenset({"evals.json"})
# a set of a folder of skills (the repository's, a plugin's), naming the skill of each entry
FOLDER_SET_NAMES = (
    "trigger-eval.json",
    "trigger-evals.json",
    "trigger_eval.json",
    "trigger_evals.json",
    "trigger-eval-set.json",
    "trigger-eval.yaml",
    "routing-eval.json",
    "routing-eval.jsonl",
)
_SET_SUFFIXES = (".json", ".yaml", ".yml", ".csv", ".jsonl")
# words a file's name holds when it may be a set the plugin does not read (``my-triggers.json``
# is one; ``package.json`` is not)
_SET_WORDS = ("eval", "trigger", "test", "prompt", "case", "routing", "query", "queries")
# what a set's ``targets`` may say that means the share of its queries that must pass
_ACCURACY_TARGETS = ("accuracy", "pass_rate", "min_accuracy", "query_pass_rate")


@dataclass
class Search:
    """What was looked at for one skill: the places, and each file found there and passed
    over, with why."""

    places: list[str] = field(default_factory=list)
    passed: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Placed:
    """The sets of a session's skills: each skill's (by its folder), the routing sets of its
    folders, a warning a file for what could not be read as meant, and what was looked at
    for each skill."""

    sets: dict[str, EvalSet] = field(default_factory=dict)
    routing: list[RoutingSet] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    searches: dict[str, Search] = field(default_factory=dict)


def names_of(skill: Skill) -> frozenset[str]:
    """The names a set file may call a skill by: its id, its folder's name, its frontmatter
    name, ``plugin:name``, and each of these as a slash command."""
    names = {skill.id, skill.folder, skill.name}
    if skill.plugin is not None:
        names |= {f"{skill.plugin.name}:{skill.name}", f"{skill.plugin.name}:{skill.folder}"}
    return frozenset(names | {f"/{n}" for n in names})


def place_sets(
    skills: Sequence[Skill], paths: Sequence[str] = (), named: str | None = None
) -> Placed:
    """Every eval set of ``skills`` (``paths``: the paths given, where a search up the
    folders stops without a ``.git``; ``named``: ``--trigger-eval-set`` for the only skill)."""
    placed = Placed()
    known = frozenset().union(*(names_of(s) for s in skills)) if skills else frozenset()
    for skill in skills:
        search = placed.searches.setdefault(skill.path, Search())
        others = (known | _sibling_names(skill.path)) - names_of(skill)
        names = SkillNames(names_of(skill), others)
        own = _named_set(named, names) if named else _own_set(skill, names, search)
        if own is not None:
            placed.sets[skill.path] = own
    if named is None:
        _FolderSets(skills, paths, placed).place()
    return placed


def _sibling_names(skill_path: str) -> frozenset[str]:
    """The folder names of the skills beside one (a skill's own set may name them: what it
    should not be chosen for), whether or not the session collects them."""
    parent = os.path.dirname(skill_path)
    try:
        entries = os.listdir(parent)
    except OSError:
        return frozenset()
    return frozenset(e for e in entries if os.path.isfile(os.path.join(parent, e, "SKILL.md")))


def _named_set(path: str, names: SkillNames) -> EvalSet:
    """The set ``--trigger-eval-set`` names, in any format."""
    return _as_set(load_document(path), names)


def _own_set(skill: Skill, names: SkillNames, search: Search) -> EvalSet | None:
    """The skill's own set: the first of the usual names in its ``evals/``, then beside its
    SKILL.md; files that look like sets there and are not read are noted."""
    for folder in (os.path.join(skill.path, "evals"), skill.path):
        search.places.append(folder)
        for name in SKILL_SET_NAMES:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            found = _read_own(path, names, search)
            if found is not None:
                return found
    for folder in (os.path.join(skill.path, "evals"), skill.path):
        for other in _set_like_files(folder):
            search.passed.append((other, "not a name this plugin reads a set from"))
    return None


def _read_own(path: str, names: SkillNames, search: Search) -> EvalSet | None:
    """A skill's own set file; one with a name often used otherwise is passed over when it
    holds no trigger entries."""
    try:
        return _as_set(load_document(path), names)
    except InputError as exc:
        if os.path.basename(path) not in _MAYBE_SETS:
            raise
        search.passed.append((path, f"no trigger entries ({exc.problem})"))
        return None


def _as_set(document: Document, names: SkillNames) -> EvalSet:
    """A document as one skill's set, with what it says of its model and its target."""
    entries = for_skill(document, names)
    model, accuracy = set_fields(document)
    path = os.path.abspath(document.path)
    return EvalSet(path, tuple(entries), document.meta, model, accuracy)


def set_fields(document: Document) -> tuple[str | None, float | None]:
    """The model a set says to run on (an alias as Claude Code reads it) and the share of
    its queries it says must pass (``targets``), when it says so."""
    model = document.meta.get("model")
    targets = document.meta.get("targets")
    accuracy = None
    if isinstance(targets, dict):
        found = next((targets[k] for k in _ACCURACY_TARGETS if k in targets), None)
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            accuracy = found / 100 if found > 1 else float(found)
    return (resolve_model_alias(model) if isinstance(model, str) else None), accuracy


def target_warning(document: Document) -> str | None:
    """A set's ``targets`` that have no gate here (only the share of queries passed has)."""
    targets = document.meta.get("targets")
    if not isinstance(targets, dict):
        return None
    unread = [k for k in targets if k not in _ACCURACY_TARGETS]
    if not unread:
        return None
    return (
        f"{document.path}: targets {', '.join(unread)} have no gate here (a set's accuracy "
        "target is one; see --trigger-min-accuracy); left out"
    )


def _set_like_files(folder: str) -> list[str]:
    """The files of a folder that look like a set by their suffix."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        os.path.join(folder, n)
        for n in names
        if n.lower().endswith(_SET_SUFFIXES)
        and any(word in n.lower() for word in _SET_WORDS)
        and os.path.isfile(os.path.join(folder, n))
    ]


class _FolderSets:
    """The sets kept in folders above the skills: each read once, its entries given to the
    skills they name."""

    def __init__(self, skills: Sequence[Skill], paths: Sequence[str], placed: Placed) -> None:
        self.skills = skills
        self.paths = [os.path.abspath(p) for p in paths]
        self.placed = placed
        self.read: set[str] = set()

    def place(self) -> None:
        """Each skill's sets above it; then, for a skill that has none, the routing entries
        naming it as its should-trigger entries (a routing item shares their runs)."""
        self.derived: dict[str, list[tuple[SetEntry, Document]]] = {}
        for skill in self.skills:
            for folder in _folders_above(skill.path, self.paths):
                self._look(folder, skill)
        for skill in self.skills:
            routed = self.derived.get(skill.path)
            if routed and skill.path not in self.placed.sets:
                document = routed[0][1]
                entries = [
                    EvalEntry(i, e.query, True, {**e.extra, "from": d.path}, e.history)
                    for i, (e, d) in enumerate(routed)
                ]
                path = os.path.abspath(document.path)
                self.placed.sets[skill.path] = EvalSet(path, tuple(entries), document.meta)

    def _look(self, folder: str, skill: Skill) -> None:
        """The sets of ``folder`` that may hold entries for ``skill``."""
        search = self.placed.searches[skill.path]
        evals = os.path.join(folder, "evals")
        search.places.append(evals)
        for base in (evals, folder):
            for name in FOLDER_SET_NAMES:
                self._take(os.path.join(base, name), folder)
        for name in (skill.folder, skill.name):
            for suffix in (".json", ".yaml", ".csv"):
                self._take_one(os.path.join(evals, "triggers", name + suffix), skill)
            for set_name in SKILL_SET_NAMES:
                self._take_one(os.path.join(evals, name, set_name), skill)
        for other in _per_skill_folders(evals, self.skills):
            search.passed.append((other, "a folder of evals/ named after no skill here"))

    def _take_one(self, path: str, skill: Skill) -> None:
        """A file kept for one skill in a folder above it (named after the skill)."""
        if path in self.read or not os.path.isfile(path):
            return
        self.read.add(path)
        search = self.placed.searches[skill.path]
        found = _read_own(path, SkillNames(names_of(skill)), search)
        if found is not None:
            self._add(skill, found)

    def _take(self, path: str, folder: str) -> None:
        """A folder's set, split among the skills its entries name."""
        if path in self.read or not os.path.isfile(path):
            return
        self.read.add(path)
        document = load_document(path)
        under = [s for s in self.skills if within(s.path, folder)]
        split = _Split(document, under, _count_skills(folder))
        model, accuracy = set_fields(document)
        for skill in under:
            entries = split.by_skill.get(skill.path)
            if entries:
                found = EvalSet(
                    os.path.abspath(path), tuple(entries), document.meta, model, accuracy
                )
                self._add(skill, found)
        routing = split.routing_set()
        if routing is not None and any(within(path, p) for p in self.paths):
            self.placed.routing.append(routing)
            for skill_path, routed in split.derived.items():
                self.derived.setdefault(skill_path, []).extend((e, document) for e in routed)
        self.placed.warnings += split.warnings()
        why = "; ".join(split.parts()) or "its entries name none of these skills"
        for skill in under:
            if not split.by_skill.get(skill.path):
                self.placed.searches[skill.path].passed.append((path, why))
        warning = target_warning(document)
        if warning:
            self.placed.warnings.append(warning)

    def _add(self, skill: Skill, found: EvalSet) -> None:
        """A set's entries for a skill, after those it has (a query it has already is not
        asked twice)."""
        have = self.placed.sets.get(skill.path)
        if have is None:
            self.placed.sets[skill.path] = found
            return
        known = {" ".join(e.query.lower().split()) for e in have.entries}
        more = [e for e in found.entries if " ".join(e.query.lower().split()) not in known]
        index = len(have.entries)
        added = [
            replace(e, index=index + i, extra={**e.extra, "from": found.path})
            for i, e in enumerate(more)
        ]
        self.placed.sets[skill.path] = replace(have, entries=(*have.entries, *added))


def _folders_above(skill_path: str, paths: Sequence[str]) -> list[str]:
    """The folders above a skill's folder where a set may name it: up to the repository's
    root (the nearest folder holding ``.git``), else up to the outermost path given that
    holds the skill, else its parent."""
    found = []
    at = os.path.dirname(skill_path)
    given = [p for p in paths if within(skill_path, p)]
    top = min(given, key=len) if given else at
    while True:
        found.append(at)
        if os.path.exists(os.path.join(at, ".git")):
            return found
        if at == os.path.dirname(at) or (not _in_repository(at) and at == top):
            return found
        at = os.path.dirname(at)


def _in_repository(folder: str) -> bool:
    """Whether a folder above ``folder`` holds ``.git``."""
    at = os.path.dirname(folder)
    while at != os.path.dirname(at):
        if os.path.exists(os.path.join(at, ".git")):
            return True
        at = os.path.dirname(at)
    return False


def _count_skills(folder: str) -> int:
    """How many skills a folder holds, at any depth (a set naming none is one skill's only
    when the folder holds one)."""
    try:
        return sum(1 for _ in skill_folders(folder))
    except OSError:
        return 0


def _per_skill_folders(evals: str, skills: Sequence[Skill]) -> list[str]:
    """The folders of ``evals/`` holding a set file but named after no skill here (a
    template, a skill not collected)."""
    names = {n for s in skills for n in (s.folder, s.name)}
    found = []
    for entry in sorted(os.listdir(evals)) if os.path.isdir(evals) else []:
        folder = os.path.join(evals, entry)
        if entry in names or entry == "triggers" or not os.path.isdir(folder):
            continue
        if any(os.path.isfile(os.path.join(folder, n)) for n in SKILL_SET_NAMES):
            found.append(folder)
    return found


class _Split:
    """A folder's set split among the skills under the folder: the entries about each, the
    routing entries, and what was left out."""

    def __init__(self, document: Document, skills: Sequence[Skill], holds: int) -> None:
        self.document = document
        self.skills = skills
        self.by_name = {n: s for s in skills for n in names_of(s)}
        self.by_skill: dict[str, list[EvalEntry]] = {}  # by the skill's folder
        self.routed: list[RoutingEntry] = []
        # the routing entries naming each skill (by its folder)
        self.derived: dict[str, list[SetEntry]] = {}
        self.unnamed = 0
        self.commands: list[str] = []
        for entry in document.entries:
            self._take(entry, holds)
        for entries in self.by_skill.values():
            check_unique([(e, f"entry [{e.index:02d}]") for e in entries], document.path)

    def _take(self, entry: SetEntry, holds: int) -> None:
        if entry.expects is None:
            self._route(entry)
            return
        if not entry.names:
            if holds == 1 and len(self.skills) == 1:
                self._give(self.skills[0], entry, entry.expects)
            else:
                self.unnamed += 1
            return
        skills = {self.by_name[n].path: self.by_name[n] for n in entry.names if n in self.by_name}
        if not skills:
            self._elsewhere(entry)
        for skill in skills.values():
            self._give(skill, entry, entry.expects)

    def _give(self, skill: Skill, entry: SetEntry, should: bool) -> None:
        entries = self.by_skill.setdefault(skill.path, [])
        extra = {**entry.extra, "from": os.path.abspath(self.document.path)}
        entries.append(EvalEntry(len(entries), entry.query, should, extra, entry.history))

    def _elsewhere(self, entry: SetEntry) -> None:
        """An entry about no skill of this session: a command's is said; one about a skill
        not collected this time is left to that skill's session."""
        if entry.commands or any(n.startswith("/") for n in entry.names):
            self.commands += [n for n in entry.names if n not in self.commands]

    def _route(self, entry: SetEntry) -> None:
        """A routing entry: the one skill it names (none: no skill), the expected answer of
        a routing item over the folder's skills."""
        known = [self.by_name[n] for n in entry.names if n in self.by_name]
        if entry.names and not known:
            self._elsewhere_or_error(entry)
            return
        if len(known) > 1:
            self.unnamed += 1  # several acceptable answers: no routing item here yet
            return
        expected = known[0].id if known else None
        self.routed.append(RoutingEntry(len(self.routed), entry.query, expected))
        if known:  # the skill it names should trigger: for a skill with no other set
            self.derived.setdefault(known[0].path, []).append(entry)

    def _elsewhere_or_error(self, entry: SetEntry) -> None:
        if entry.commands or any(n.startswith("/") for n in entry.names):
            self._elsewhere(entry)
            return
        shown = ", ".join(sorted(s.id for s in self.skills)) or "none"
        raise InputError(
            self.document.path,
            f"{entry.label}: names {entry.names[0]!r}, which is no skill here (null, or one "
            f"of: {shown})",
        )

    def routing_set(self) -> RoutingSet | None:
        """The routing entries as a routing set of the folder of skills they choose among."""
        if not self.routed or not self.skills:
            return None
        check_unique([(e, f"entry [{e.index:02d}]") for e in self.routed], self.document.path)
        folder = os.path.commonpath([os.path.dirname(s.path) for s in self.skills])
        ids = tuple(sorted(s.id for s in self.skills))
        path = os.path.abspath(self.document.path)
        return RoutingSet(path, folder, ids, tuple(self.routed))

    def warnings(self) -> list[str]:
        """One line for the file: what was left out, and why."""
        parts = self.parts()
        if not parts:
            return []
        return [f"{self.document.path}: {'; '.join(parts)}: left out; the rest runs"]

    def parts(self) -> list[str]:
        """What was left out of the file, and why."""
        parts = []
        if self.unnamed:
            parts.append(
                f"{self.unnamed} entries name no skill (or several), and the folder holds "
                f"{len(self.skills)} skills"
            )
        if self.commands:
            parts.append(
                f"entries name commands ({', '.join(self.commands[:4])}), which are not tested here"
            )
        return parts


def no_set_message(skills: Sequence[Skill], placed: Placed) -> tuple[str, str]:
    """Where the one message about skills without a set goes, and what it says: where it
    looked, what it found there and passed over (with why), and how to name one. The same
    for every layout."""
    if len(skills) == 1:
        where = skills[0].path
        who = f"no eval set found for {skills[0].id}"
    else:
        where = os.path.commonpath([s.path for s in skills])
        shown = first_few([s.id for s in skills], 5)
        who = f"none of the {len(skills)} skills here has an eval set ({shown})"
    places: list[str] = []
    passed: list[tuple[str, str]] = []
    for skill in skills:
        search = placed.searches.get(skill.path, Search())
        places += [p for p in search.places if p not in places]
        passed += [p for p in search.passed if p not in passed]
    looked = "; looked for trigger-eval.json (and .yaml, .csv, skill-tests.yaml, the other "
    looked += f"usual names) in {_shown_places(places, where)}"
    over = ""
    if passed:
        over = "; passed over: " + "; ".join(
            f"{os.path.relpath(p, where)} ({why})" for p, why in passed[:5]
        )
    how = "; name one with --trigger-eval-set=FILE (one skill), or draft them with --trigger-draft"
    return where, who + looked + over + how


def _shown_places(places: Sequence[str], base: str) -> str:
    """The places looked in, relative to ``base``, a few and a count."""
    relative = [os.path.relpath(p, base) for p in places]
    shown = ", ".join(relative[:6])
    more = len(relative) - 6
    return shown + (f" and {more} more folders" if more > 0 else "")
