"""The workspace of one Claude Code run, and how the user's login reaches it.

Each run gets its own folder: a project (an empty ``.git`` marks its root) holding the
project's skills of the context, a private config folder (``CLAUDE_CONFIG_DIR``) holding the
user's, a folder per plugin (loaded with ``--plugin-dir``, in order) and a scratch folder. Runs that
shared a folder would see each other's copies of the skill under test. The user's own skills
and settings are kept out (the private config folder, ``--setting-sources``); the login stays
usable (the credential store is pinned where it lives, the account keys are copied, the
/login key travels in the environment, never in a file). What the CLI does with each of these
is covered by ``tests/backends/test_claude_code_cli.py`` against the pinned CLI.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pytest_skilltrigger.model.context import (
    FIRST_PLUGIN,
    PROJECT,
    USER,
    ListedSkill,
    ProjectSetup,
    TriggerContext,
)
from pytest_skilltrigger.skills.plugins import MANIFEST, SAFE_NAME_RE
from pytest_skilltrigger.skills.rewrite import replace_description
from pytest_skilltrigger.support.errors import InputError

ROOT_PREFIX = "skilltrigger-cc-"
WORKSPACE_PARTS = ("project", "config", "plugins", "tmp")
# What a run's workspace shows the CLI, in the store keys of its runs and captures: a stored
# run made from another layout saw another listing. 2: the user's skills read from the
# private config folder (they were not listed before), plugins loaded with --plugin-dir.
# 3: queries given as stream-json messages to kept processes (one tool's text differs).
# 4: a plugin's skills and commands in folders its manifest declares, in the listing's order.
WORKSPACE_LAYOUT = 4
# Keys of the user's global config that carry the login's account, copied into each run.
# Keys that are (or hold pieces of) secrets are never written into a run's files: the /login
# key travels to the CLI in its environment instead (see ``ClaudeCodeBackend._env``).
ACCOUNT_KEYS = (
    "oauthAccount",
    "userID",
)  # onboarding is always marked done in the seed written for each run
SECRET_ACCOUNT_KEY = "primaryApiKey"


def skill_file(name: str, description: str, when_to_use: str | None = None) -> str:
    """A minimal SKILL.md; ``json.dumps`` of a string is a valid YAML double-quoted scalar,
    so any description (colons, quotes, newlines, leading dashes) survives the frontmatter."""
    body = f"# {name}\n\nPlaceholder body: trigger tests never get this far.\n"
    extra = f"when_to_use: {json.dumps(when_to_use, ensure_ascii=False)}\n" if when_to_use else ""
    return (
        f"---\nname: {json.dumps(name)}\n"
        f"description: {json.dumps(description, ensure_ascii=False)}\n{extra}---\n\n{body}"
    )


def credential_store_dir(env: dict[str, str]) -> str:
    """Where the user's login lives, as ``CLAUDE_SECURESTORAGE_CONFIG_DIR`` says it.

    Empty means the CLI's default store (``~/.claude`` and the default keychain entry);
    a user who moved their config with ``CLAUDE_CONFIG_DIR`` keeps their store there.
    """
    if "CLAUDE_SECURESTORAGE_CONFIG_DIR" in env:
        return env["CLAUDE_SECURESTORAGE_CONFIG_DIR"]
    return env.get("CLAUDE_CONFIG_DIR", "")


def user_account(env: dict[str, str]) -> dict[str, Any]:
    """The account keys of the user's global config file (plus, held in memory only, its
    /login key under ``SECRET_ACCOUNT_KEY``), or nothing if unreadable."""
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    path = Path(config_dir, ".claude.json") if config_dir else Path.home() / ".claude.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in (*ACCOUNT_KEYS, SECRET_ACCOUNT_KEY) if k in data}


def empty_workspace(run_dir: Path) -> None:
    """Clear a workspace for its next run; nothing of the previous run may remain."""
    for child in WORKSPACE_PARTS:
        shutil.rmtree(run_dir / child, ignore_errors=True)


def remove_stale_roots() -> None:
    """Remove the workspaces of sessions that died without cleaning up (SIGKILL, power loss).

    ``close()`` and ``atexit`` cover normal ends and Ctrl-C; a killed process leaves its root
    behind, so the next session removes every root whose owning process (in its name) is gone.
    POSIX only: probing a pid with ``os.kill(pid, 0)`` would terminate it on Windows.
    """
    if os.name != "posix":
        return
    for folder in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        pid_text = folder.name[len(ROOT_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive but not ours to signal, or unreadable: leave it


def installed_text(skill: ListedSkill, tested: bool) -> str:
    """The SKILL.md a run installs: the real file, every key and the body, so the CLI lists
    the skill by its own rules (``when_to_use``, ``disable-model-invocation``, ...); for the
    skill under test with only the description replaced (every other byte kept). A skill
    known only by name and description (a built-in, a test's) gets a minimal file."""
    name = skill.frontmatter_name
    if skill.skill_md is None:
        return skill_file(name, skill.description, skill.when_to_use)
    if not tested:
        return skill.skill_md
    try:
        return replace_description(skill.skill_md, skill.description, name)
    except InputError:  # a description no rendering reads back exactly: the minimal file
        return skill_file(name, skill.description, skill.when_to_use)


def safe_id(name: str) -> bool:
    """Whether a skill id can be laid out as folders (``folder`` or ``plugin:folder``)."""
    return all(SAFE_NAME_RE.fullmatch(part) for part in name.split(":")) and name.count(":") <= 1


def install_skills(run_dir: Path, context: TriggerContext) -> list[Path]:
    """Write the context's skills where the CLI finds each group (the user's in the private
    config folder, the project's in the project, each plugin as a plugin folder of its own
    with its manifest); the plugin folders, in the order to load them. A skill whose id
    could not be placed safely is left out, never written elsewhere."""
    plugins = _PluginFolders(run_dir)
    for skill in _own_skills(run_dir, context):  # the CLI lists its built-ins itself
        if skill.command:
            _install_command(run_dir, skill, plugins)
            continue
        if not safe_id(skill.name):
            continue
        folder = _skill_folder(run_dir, skill, plugins)
        folder.mkdir(parents=True)
        tested = skill.name == context.skill_name
        (folder / "SKILL.md").write_text(installed_text(skill, tested), encoding="utf-8")
    return plugins.write_manifests()


class _PluginFolders:
    """The plugin folders of a run: each plugin's items are written in listing order, each
    in a folder its manifest declares (``"skills"``: a folder of skills each; ``"commands"``:
    a folder of commands each), so the CLI lists them in that order, under their names."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.roots: dict[int, Path] = {}
        self.entries: dict[int, dict[str, list[str]]] = {}

    def entry(self, item: ListedSkill, kind: str) -> Path:
        """A new declared folder of ``kind`` (``skills``, ``commands``) for one item."""
        if item.group not in self.roots:
            name = f"{item.group - FIRST_PLUGIN:02d}-{item.plugin}"
            self.roots[item.group] = self.run_dir / "plugins" / name
            self.entries[item.group] = {"skills": [], "commands": []}
        declared = self.entries[item.group][kind]
        relative = f"{kind}/{len(declared):03d}"
        declared.append(f"./{relative}")
        return self.roots[item.group] / relative

    def write_manifests(self) -> list[Path]:
        """Each plugin's manifest; the plugin folders in the order to load them."""
        for group, root in self.roots.items():
            plugin = root.name.partition("-")[2]
            manifest = {"name": plugin, **self.entries[group]}
            (root / MANIFEST).parent.mkdir(parents=True, exist_ok=True)
            (root / MANIFEST).write_text(json.dumps(manifest), "utf-8")
        return [self.roots[group] for group in sorted(self.roots)]


def _own_skills(run_dir: Path, context: TriggerContext) -> list[ListedSkill]:
    """The context's skills to install where their group goes; a subfolder's skills and the
    project root's are written here, where the CLI finds them (the farther of two of one
    name too: a session started in the subfolder does not list it, but it is there)."""
    sub = context.subfolder
    if sub is None:
        return context.own_listing()
    scoped = run_dir / "project" / sub.folder
    for skill in context.folder_skills():
        folder = scoped / ".claude" / "skills" / skill.name.rpartition(":")[2]
        folder.mkdir(parents=True)
        text = installed_text(skill, skill.name == context.skill_name)
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
    if sub.read_path:
        read = run_dir / "project" / sub.read_path
        read.parent.mkdir(parents=True, exist_ok=True)
        read.write_text(read_file_text(sub.read_text), encoding="utf-8")
    others = [s for s in context.own_listing() if s.command or s.group != PROJECT]
    return [*sub.root_skills, *others]


def read_file_text(read_text: str) -> str:
    """The file's text back from its Read result (each line's number and tab taken off)."""
    return "\n".join(line.partition("\t")[2] for line in read_text.split("\n"))


def session_folder(run_dir: Path, context: TriggerContext) -> Path:
    """Where the CLI of a context's runs starts: the project, or the subfolder asked for."""
    sub = context.subfolder
    if sub is not None and sub.started_in:
        return run_dir / "project" / sub.folder
    return run_dir / "project"


def _install_command(run_dir: Path, command: ListedSkill, plugins: _PluginFolders) -> None:
    """Write a command as its file (``sub:deploy`` as ``commands/sub/deploy.md``), as it is:
    the CLI reads it by its own rules. One whose name could leave its folder is left out."""
    parts = command.name.split(":")[1 if command.plugin else 0 :]
    if not all(_safe_part(part) for part in parts):
        return
    if command.group == USER:
        folder = run_dir / "config" / "commands"
    elif command.plugin is None:
        folder = run_dir / "project" / ".claude" / "commands"
    else:
        folder = plugins.entry(command, "commands")
    path = folder.joinpath(*parts[:-1], parts[-1] + ".md")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = command.skill_md
    if text is None:  # a command known only by its text
        described = json.dumps(command.description, ensure_ascii=False)
        text = f"---\ndescription: {described}\n---\n"
    path.write_text(text, encoding="utf-8")


def _safe_part(part: str) -> bool:
    """Whether one part of a command's name is a file or folder name inside its folder."""
    return part not in ("", ".", "..") and not any(c in part for c in "/\\\0")


def _skill_folder(run_dir: Path, skill: ListedSkill, plugins: _PluginFolders) -> Path:
    """Where one skill goes: a plugin's in a declared folder of its own (named by the
    skill's folder, so the CLI lists it by its id)."""
    if skill.group == USER:
        return run_dir / "config" / "skills" / skill.folder
    if skill.group < FIRST_PLUGIN or skill.plugin is None:
        return run_dir / "project" / ".claude" / "skills" / skill.folder
    return plugins.entry(skill, "skills") / skill.folder


def install_project(project: Path, setup: ProjectSetup) -> None:
    """The project's own setup in the run's project folder, for the CLI to run as it would
    in the user's: CLAUDE.md, its settings (with its .mcp.json servers enabled, as a user
    who trusted them has), .mcp.json and the hook scripts. A path that would leave the
    folder is left out."""
    if setup.claude_md is not None:
        (project / "CLAUDE.md").write_text(setup.claude_md, encoding="utf-8")
    for name, text in setup.files:
        target = (project / name).resolve()
        if not target.is_relative_to(project.resolve()):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == ".claude/settings.json":
            settings = json.loads(text)
            if setup.file(".mcp.json") is not None:
                settings["enableAllProjectMcpServers"] = True
            text = json.dumps(settings, indent=2)
        target.write_text(text, encoding="utf-8")
        if name.startswith(".claude/hooks/"):
            target.chmod(0o755)  # a hook script runs as a command
    if setup.file(".mcp.json") is not None and setup.file(".claude/settings.json") is None:
        settings_path = project / ".claude" / "settings.json"
        settings_path.parent.mkdir(parents=True, exist_ok=True)
        settings_path.write_text(json.dumps({"enableAllProjectMcpServers": True}), "utf-8")


# what a turn's looking around may see of the project, copied into each run's project folder
COPIED_FILES = 5_000
COPIED_BYTES = 64 * 1024 * 1024
NOT_COPIED = frozenset({".git", ".claude", ".venv", "venv", "node_modules", "__pycache__"})
# the project's instructions and servers are the context's to give (--trigger-setup=project)
NOT_COPIED_FILES = frozenset({"CLAUDE.md", "CLAUDE.local.md", ".mcp.json"})


def copy_project_files(source: Path, project: Path) -> int:
    """Copy the project's files into a run's project folder (``--trigger-within=turn``: the
    CLI reads them there, in a folder it may not harm; the user's own files are never
    handed to it). Version control, the project's own ``.claude`` (its skills are installed
    as the context lists them), its instructions and servers (the context's to give, with
    ``--trigger-setup=project``), environments and caches stay out; so does whatever passes
    :data:`COPIED_FILES` files or :data:`COPIED_BYTES` bytes. Links are not followed out of
    the project. How many files were copied."""
    root = source.resolve()
    copied = size = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in NOT_COPIED)
        for name in sorted(set(files) - NOT_COPIED_FILES):
            path = Path(folder) / name
            real = path.resolve()
            if not real.is_relative_to(root) or not real.is_file():
                continue
            size += real.stat().st_size
            if copied >= COPIED_FILES or size > COPIED_BYTES:
                return copied
            target = project / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real, target)
            copied += 1
    return copied


# --trigger-within=turn: every call but a read-only one is refused and ends the turn, so the
# CLI sends no request after the run's choice (and runs no command, no edit, no skill)
TURN_HOOK_OUTPUT = {
    "continue": False,
    "stopReason": "skilltrigger: the run's choice is made",
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "skilltrigger: the run's choice is made",
    },
}
LOOKING_TOOLS_MATCHER = "^(?!(Read|Glob|Grep|LS)$).*"


def write_turn_hook(config: Path) -> None:
    """The user settings of a turn's run (its private config folder): a ``PreToolUse`` hook
    that denies every call but a read-only one and stops the turn there. Observed with the
    pinned CLI: the denied call is not run and no further request is sent."""
    command = "echo " + shlex.quote(json.dumps(TURN_HOOK_OUTPUT))
    hook = {"matcher": LOOKING_TOOLS_MATCHER, "hooks": [{"type": "command", "command": command}]}
    settings = {"hooks": {"PreToolUse": [hook]}}
    (config / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
