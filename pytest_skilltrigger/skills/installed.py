"""The user's own Claude Code install as the crowd (``--trigger-crowd=installed``).

Read from the home folder as the pinned CLI reads it (see ``docs/how-to/own-install.md``):

- the user's skills, ``~/.claude/skills/<name>/SKILL.md``, and commands,
  ``~/.claude/commands/**/*.md``, listed first;
- the enabled plugins, in the order of the keys of ``enabledPlugins``: the user's
  ``~/.claude/settings.json``, then the project's ``.claude/settings.json`` and
  ``.claude/settings.local.json`` (a project's ``false`` turns a user's plugin off, its
  ``true`` one on; new keys come after). A plugin's folder is its ``installPath`` in
  ``~/.claude/plugins/installed_plugins.json``, except for a marketplace kept in a folder
  (``known_marketplaces.json``, ``source: directory``), whose plugins the CLI reads where the
  marketplace lists them. Enabled plugins that are not installed are left out, as the CLI
  leaves them out, and said once;
- the usage score of each listed name, from ``skillUsage`` in ``~/.claude.json``:
  ``usageCount`` decayed by half a week at a time since ``lastUsedAt``, never below a tenth.

Nothing is written, and nothing read here leaves the machine except as the listing the model
sees anyway. Built-ins and the project's own skills come from the context as before.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_skilltrigger.model.context import FIRST_PLUGIN, USER, ListedSkill, TriggerContext
from pytest_skilltrigger.model.listing_budget import how_shown
from pytest_skilltrigger.skills.commands import read_commands, read_plugin_commands
from pytest_skilltrigger.skills.marketplace import read_marketplace
from pytest_skilltrigger.skills.neighbours import folder_skills, listed_skill
from pytest_skilltrigger.skills.plugins import Plugin, is_plugin_root, plugin_skills, read_plugin
from pytest_skilltrigger.skills.skill import read_skill
from pytest_skilltrigger.support.errors import InputError

# The groups of the installed plugins: after the session's and the extra skills' plugins (the
# CLI lists the plugins it is given first, the installed ones after, in enabledPlugins order).
INSTALLED_PLUGINS_FROM = FIRST_PLUGIN + 2000
DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Install:
    """What a user's Claude Code lists beside a project's skills: their skills and commands,
    their enabled plugins' (in order), each with its usage score; the plugins by id
    (``plugin@marketplace``); and what was left out, one line each."""

    home: str
    skills: tuple[ListedSkill, ...] = ()
    plugins: tuple[str, ...] = ()
    usage: Mapping[str, float] | None = None
    left_out: tuple[str, ...] = ()

    def usage_of(self, name: str) -> float:
        """The usage score of a listed name (0 for one never used)."""
        return float((self.usage or {}).get(name, 0.0))

    def beside(self, tested: str) -> tuple[ListedSkill, ...]:
        """The installed skills a tested skill competes with: all but an installed copy of
        it (the description under test stands in its place)."""
        return tuple(s for s in self.skills if s.name != tested)

    @property
    def counts(self) -> tuple[int, int, int]:
        """User skills and commands, plugins, and the plugins' skills and commands."""
        own = sum(1 for s in self.skills if s.group == USER)
        return own, len(self.plugins), len(self.skills) - own


def read_install(home: str, project: str | None = None, now_ms: float | None = None) -> Install:
    """The install in ``home`` (for a session in ``project``). InputError naming the file
    for a settings or usage file that is not JSON."""
    claude = os.path.join(home, ".claude")
    now = time.time() * 1000 if now_ms is None else now_ms
    usage = _usage(os.path.join(home, ".claude.json"), now)
    plugins, left_out = _enabled_plugins(claude, project)
    commands = read_commands(os.path.join(claude, "commands"), USER, left_out)
    own = [*_user_skills(os.path.join(claude, "skills")), *commands]
    listed = [
        s for index, plugin in enumerate(plugins) for s in _plugin_listed(plugin, index, left_out)
    ]
    skills = tuple(replace(s, usage=usage.get(s.name, 0.0)) for s in [*own, *listed])
    return Install(home, skills, tuple(p.name for p in plugins), usage, tuple(left_out))


def usage_score(count: float, last_used_ms: float, now_ms: float) -> float:
    """The CLI's score of a listed name: uses, halved for each week since the last one,
    never below a tenth of them."""
    days = max(0.0, (now_ms - last_used_ms) / DAY_MS)
    decay: float = 0.5 ** (days / 7)
    return count * max(decay, 0.1)


def _usage(path: str, now: float) -> dict[str, float]:
    data = _json(path) or {}
    found = data.get("skillUsage") if isinstance(data, dict) else None
    scores = {}
    for name, entry in (found or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("usageCount"), (int, float)):
            last = entry.get("lastUsedAt")
            last_ms = float(last) if isinstance(last, (int, float)) else now
            scores[str(name)] = usage_score(float(entry["usageCount"]), last_ms, now)
    return scores


def _json(path: str) -> Any:
    """A JSON file's value; None when there is none. InputError when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(
            path, f"--trigger-crowd=installed: cannot be read as JSON ({exc})"
        ) from None


def _user_skills(folder: str) -> list[ListedSkill]:
    """The user's skills, read as a folder of skills is (what the CLI cannot read is left
    out), listed in the user's group."""
    return [replace(s, group=USER) for s in folder_skills(folder, read_skill, ())]


def _enabled(claude: str, project: str | None) -> dict[str, bool]:
    """The merged ``enabledPlugins``: the user's keys in their order, then the project's."""
    files = [os.path.join(claude, "settings.json")]
    if project is not None:
        files += [
            os.path.join(project, ".claude", name)
            for name in ("settings.json", "settings.local.json")
        ]
    merged: dict[str, bool] = {}
    for path in files:
        data = _json(path)
        enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(enabled, dict):
            merged.update({str(k): v is True for k, v in enabled.items()})
    return merged


def _enabled_plugins(claude: str, project: str | None) -> tuple[list[Plugin], list[str]]:
    plugins_dir = os.path.join(claude, "plugins")
    installed = _json(os.path.join(plugins_dir, "installed_plugins.json")) or {}
    known = _json(os.path.join(plugins_dir, "known_marketplaces.json")) or {}
    found: list[Plugin] = []
    left_out: list[str] = []
    for plugin_id, on in _enabled(claude, project).items():
        if not on:
            continue
        plugin = _plugin(plugin_id, installed, known, project)
        if isinstance(plugin, str):
            left_out.append(f"{plugin_id}: {plugin}")
        elif all(p.root != plugin.root for p in found):
            found.append(plugin)
    return found, left_out


def _plugin(plugin_id: str, installed: Any, known: Any, project: str | None) -> Plugin | str:
    """The enabled plugin's folder read as the CLI reads it, or why it is not listed."""
    name, _, market = plugin_id.partition("@")
    source = (known.get(market) or {}).get("source") if isinstance(known, dict) else None
    if isinstance(source, dict) and source.get("source") == "directory":
        return _from_directory(name, str(source.get("path") or ""))
    entries = (
        (installed.get("plugins") or {}).get(plugin_id) if isinstance(installed, dict) else None
    )
    path = _install_path(entries, project)
    if path is None:
        return "enabled but not installed"
    if not is_plugin_root(path):
        return f"no plugin manifest in {path}"
    try:
        return read_plugin(path)
    except InputError as exc:
        return str(exc)


def _install_path(entries: Any, project: str | None) -> str | None:
    """The install of a plugin this session sees: the user's, or the project's own."""
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("installPath"), str):
            continue
        scope = entry.get("scope")
        if scope == "user" or (project is not None and entry.get("projectPath") == project):
            return str(entry["installPath"])
    return None


def _from_directory(name: str, root: str) -> Plugin | str:
    try:
        market = read_marketplace(root)
    except InputError as exc:
        return str(exc)
    plugin = next((p for p in market.plugins if p.name == name), None)
    return plugin if plugin is not None else f"not in the marketplace at {root}"


def _plugin_listed(plugin: Plugin, index: int, left_out: list[str]) -> list[ListedSkill]:
    """A plugin's listed skills, then its commands, in its group; a file the CLI cannot read
    is left out, and said in ``left_out``."""
    group = INSTALLED_PLUGINS_FROM + index
    listed = []
    for place in plugin_skills(plugin):
        try:
            skill = read_skill(place.folder, (plugin, place))
        except InputError as exc:
            left_out.append(str(exc))
            continue
        if skill.model_invocable:
            listed.append(listed_skill(skill, group))
    try:
        commands = read_plugin_commands(plugin, group, left_out)
    except InputError as exc:  # the manifest's list of commands itself
        left_out.append(str(exc))
        commands = []
    return listed + commands


def install_notes(
    install: Install, tested: Sequence[tuple[str, TriggerContext]], model: str | None
) -> list[str]:
    """What the header says of the install: how many installed skills each tested one (its
    name and starting context) competes with, where they come from, and how the tested one
    is listed on ``model``'s listing budget (full, cut, bare)."""
    own, plugins, of_plugins = install.counts
    home = display_home(install.home)
    lines = [
        f"your install ({home}): {own} user skills and commands, {plugins} enabled plugin(s) "
        f"with {of_plugins} skills and commands, usage from {home}/.claude.json"
    ]
    lines += [f"your install: left out {reason}" for reason in install.left_out]
    for name, context in tested:
        shown, fit = how_shown(context.on_model(model), model)
        lines.append(
            f"{name}: among {len(context.listing()) - 1} listed skills and commands of your "
            f"install, listed {shown} (the listing takes {fit.size} of {fit.budget} characters)"
        )
    return lines


def display_home(home: str) -> str:
    """The home folder as the header shows it."""
    return "~" if os.path.abspath(home) == os.path.abspath(os.path.expanduser("~")) else home
