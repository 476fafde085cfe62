"""``--trigger-harvest`` on 1,000 session files of realistic size: the time to read them and
write the harvest, through the command as a user runs it.

The files are laid out as the pinned CLI writes them (``tests/skills/test_own_install.py``
holds the reader against files the CLI itself wrote): per turn a prompt line, the attachment
lines (a skill listing, a prompt snapshot of 7 to 60 KB as the CLI keeps one), one assistant
line per content block (thinking, text, a ``Skill`` or ``Read`` call), the tool result and the
loaded skill's text. Sessions hold 2 to 40 turns (a median near 8), so files run from about
20 KB to a few MB, 1,000 of them in one project folder. A few turns load the skill under test,
a few force it next, a few undo it.

    .venv/bin/python benchmarks/bench_harvest.py [--quick]
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import uuid
from typing import Any

from _common import ROOT, bench_parser, run_pytest, temp_dir

SKILL = "pdf-tools"
WORDS = "merge split rotate report contract pages scan invoice chapter table photo notes".split()


def _line(kind: str, parent: str | None, stamp: str, cwd: str, **more: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "parentUuid": parent,
        "isSidechain": False,
        "uuid": str(uuid.uuid4()),
        "timestamp": stamp,
        "userType": "external",
        "entrypoint": "cli",
        "cwd": cwd,
        "sessionId": "s",
        "version": "2.1.328",
        "gitBranch": "main",
        **more,
    }


def session(rng: random.Random, cwd: str, day: int) -> list[dict[str, Any]]:
    """One session's lines."""
    lines: list[dict[str, Any]] = []
    parent = None
    turns = min(40, max(2, int(rng.lognormvariate(2.1, 0.7))))
    for turn in range(turns):
        stamp = f"2026-11-{day:02d}T10:{turn % 60:02d}:00.000Z"
        prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 20)))
        forced = rng.random() < 0.05
        text = f"/{SKILL} {prompt}" if forced else prompt
        content = (
            f"<command-message>{SKILL}</command-message>\n<command-name>/{SKILL}</command-name>\n"
            f"<command-args>{prompt}</command-args>"
            if forced
            else text
        )
        user = _line("user", parent, stamp, cwd, message={"role": "user", "content": content})
        lines.append(user)
        parent = user["uuid"]
        if turn == 0:
            listing = "\n".join(f"- skill-{n}: does job {n} well" for n in range(40))
            names = [f"skill-{n}" for n in range(40)] + [SKILL]
            attachment = {"type": "skill_listing", "content": listing, "names": names}
            lines.append(_line("attachment", parent, stamp, cwd, attachment=attachment))
            parent = lines[-1]["uuid"]
        snapshot = {"type": "prompt_snapshot", "content": "x" * rng.randint(7_000, 60_000)}
        lines.append(_line("attachment", parent, stamp, cwd, attachment=snapshot))
        parent = lines[-1]["uuid"]
        blocks: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": "t" * rng.randint(200, 3000), "signature": "s" * 200},
            {"type": "text", "text": " ".join(rng.choice(WORDS) for _ in range(60))},
        ]
        if rng.random() < 0.3:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{turn}",
                    "name": "Skill",
                    "input": {"skill": SKILL},
                }
            )
        for index, block in enumerate(blocks):
            message = {"id": f"msg_{turn}", "role": "assistant", "content": [block]}
            line = _line("assistant", parent, stamp, cwd, message=message, apiBlockIndex=index)
            lines.append(line)
            parent = line["uuid"]
        if blocks[-1]["type"] == "tool_use":
            result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": "Launching"}
            lines.append(
                _line("user", parent, stamp, cwd, message={"role": "user", "content": [result]})
            )
            parent = lines[-1]["uuid"]
            body = {"type": "text", "text": "Base directory for this skill\n" + "b" * 4000}
            lines.append(
                _line(
                    "user",
                    parent,
                    stamp,
                    cwd,
                    isMeta=True,
                    message={"role": "user", "content": [body]},
                )
            )
            parent = lines[-1]["uuid"]
    return lines


def main() -> int:
    quick = bench_parser(__doc__).parse_args().quick
    count = 100 if quick else 1000
    rng = random.Random(5)
    with temp_dir() as tmp:
        home, project = tmp / "home", tmp / "proj"
        skill = project / ".claude" / "skills" / SKILL
        (skill / "evals").mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Merge PDFs.\n---\n")
        (skill / "evals" / "trigger-eval.json").write_text(
            '[{"query": "merge", "should_trigger": true}]'
        )
        sys.path.insert(0, str(ROOT))
        from pytest_skilltrigger.skills.harvest import folder_name

        folder = home / ".claude" / "projects" / folder_name(str(project))
        folder.mkdir(parents=True)
        size = 0
        for n in range(count):
            text = "\n".join(json.dumps(line) for line in session(rng, str(project), 1 + n % 28))
            (folder / f"{uuid.UUID(int=n)}.jsonl").write_text(text + "\n")
            size += len(text) + 1
        out = tmp / "harvest.json"
        env_home = os.environ.get("HOME")
        os.environ["HOME"] = str(home)
        try:
            start = time.perf_counter()
            result = run_pytest(
                ["--trigger-skill-path=.claude/skills", f"--trigger-harvest={out}"], project, None
            )
            wall = time.perf_counter() - start
        finally:
            if env_home is not None:
                os.environ["HOME"] = env_home
        cases = len(json.loads(out.read_text())["cases"]) if out.exists() else 0
    print(result.tail(4))
    print(
        f"{count} session files, {size / 1e6:.0f} MB: harvested in {wall:.1f} s through the "
        f"command ({count / wall:.0f} files/s, {size / 1e6 / wall:.0f} MB/s, client CPU "
        f"{result.cpu:.1f} s), {cases} entries written; no call"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
