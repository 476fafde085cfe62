"""The Quick start's first command, as a new user runs it: its header and what it spent.

The example skills are run with the default rule and model against the local fake Messages
API with graded trigger rates (``tests/graded_model.py``, seed 7: most rates near 0 or 1, as in
real eval sets), in a throw-away copy and a throw-away home (so the default store is new, as
on a first run). It prints the header lines the README shows (the estimate is made before
any call, from the requests the plugin would send; the controls' line says what they spent)
and the calls the server saw.

    .venv/bin/python benchmarks/bench_first_run.py
"""

from __future__ import annotations

import os
import shutil
import sys

from _common import ROOT, fake_api, run_pytest, temp_dir

from tests.graded_model import GradedModel


def main() -> int:
    calls = []
    for repeat in range(3):  # the stand-in draws afresh: the calls differ a little each time
        with temp_dir() as tmp, fake_api(awkward=False) as api:
            api.graded = model = GradedModel(seed=7)  # the same true rates each time
            model.reseed(1000 + repeat)  # fresh draws
            shutil.copytree(ROOT / "example_skills", tmp / "example_skills")
            os.environ.pop("XDG_CACHE_HOME", None)
            os.environ["HOME"] = str(tmp)  # the child's default store: a new one under it
            # -v undoes the helper's -q: the header is shown at the default verbosity
            result = run_pytest(
                ["--trigger-skill-path=example_skills", "-p", "no:randomly", "-v"], tmp, api
            )
        if repeat == 0:
            for line in result.output.splitlines():
                if line.startswith("skilltrigger: "):
                    print(line.replace(str(tmp), "~"))
                    if "controls" in line:  # the header's last line before the items
                        break
        calls.append(result.calls)
    print(
        f"the first run made {', '.join(map(str, calls))} calls in three fresh runs (server "
        f"side): {sum(calls) / len(calls):.0f} on average"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
