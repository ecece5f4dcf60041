"""``infer-prof COMMAND`` loads the command's module when it runs, and only that one: a fresh
interpreter (a subprocess) runs ``infer-prof models`` and ``sys.modules`` is read after it
(the root's ``--help`` importing no command module is tests/unit/test_cli_startup.py's).

Here, not in tests/unit: ``models`` builds the tiny models' configs with the installed
transformers, which imports torch: ~8 s in a fresh interpreter on the 2-core VM.
"""

from __future__ import annotations

import pytest

from tests.unit.test_cli_startup import _modules_after

pytestmark = pytest.mark.integration


def test_a_command_loads_its_module_when_it_runs():
    modules, text = _modules_after("models")
    assert "infer_prof.cli.models" in modules and "infer_prof.cli.run" not in modules
    assert "tiny-llama" in text
