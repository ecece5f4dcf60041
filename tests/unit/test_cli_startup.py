"""``infer-prof --help`` starts without the command modules: they load when their command runs.

Each case runs a fresh interpreter (a subprocess) and reads ``sys.modules`` after it, so what the
root command imports is seen as a user's shell would start it. That a command's module loads
when it runs is tests/integration/test_cli_startup.py's (``models`` imports transformers and
torch: ~8 s here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from infer_prof.cli import COMMANDS, app, load_command

REPO = Path(__file__).resolve().parents[2]

# the root's --help, then the infer_prof modules the interpreter holds
PROBE = """
import json, sys
from infer_prof.cli import main
sys.argv = ["infer-prof", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("infer_prof", "rich")))))
"""


def _modules_after(*args: str) -> tuple[list[str], str]:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    *text, last = p.stdout.rstrip("\n").split("\n")
    return json.loads(last), "\n".join(text)


def test_root_help_imports_no_command_module():
    modules, text = _modules_after("--help")
    assert modules == ["infer_prof", "infer_prof.cli"], modules  # nor rich's help renderer
    for name, (_, _, line) in COMMANDS.items():
        assert f"  {name}" in text and line in text, text  # each line whole, none cut with ...
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_every_listed_command_loads_and_answers_its_help():
    for name in COMMANDS:
        command = load_command(name)
        assert command.name == name
        result = CliRunner().invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, (name, result.output)


def test_a_misspelt_command_is_suggested_from_every_command():
    result = CliRunner().invoke(app, ["histroy"])
    assert result.exit_code == 2 and "Did you mean 'history'?" in result.output
