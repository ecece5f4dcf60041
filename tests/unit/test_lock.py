"""lock/ pins what the set-up installs (scripts/setup_env.sh, install_ray.sh, install_litellm.sh):
every package named there or in pyproject.toml is pinned, in the range pyproject.toml allows,
the lock is closed under the requirements of what it pins, and a venv installed from it holds
exactly its versions. So the lock cannot silently fall behind the set-up."""

import importlib.metadata as md
import re
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "lock"
PYVER = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _pins(path: Path) -> dict[str, str]:
    """The lock's pins, ``{canonical name: version}``."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) and version, (
            f"{path.name}: {line!r} is not NAME==VERSION")
        pins[canonicalize_name(name)] = version.strip()
    return pins


def _locks(engine: str) -> list[Path]:
    return sorted(LOCKS.glob(f"{engine}-py*.txt"))


def _declared(engine: str) -> list[Requirement]:
    """What ``setup_env.sh`` asks pip for with ``-e .[<engine>,dev]``, plus the packages the
    set-up scripts name with their own pins."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"][engine],
             *project["optional-dependencies"]["dev"]]
    scripts = [(REPO / "scripts" / "setup_env.sh").read_text()]
    if engine == "cpu":
        scripts.append((REPO / "scripts" / "install_ray.sh").read_text())
    for text in scripts:
        specs += re.findall(r'"([a-z][a-z0-9-]*==[0-9][^"]*)"', text)
    return [Requirement(s) for s in specs]


def test_there_is_a_cpu_lock_for_this_python_and_a_gpu_lock():
    assert (LOCKS / f"cpu-py{PYVER}.txt").exists() or PYVER != "3.11", (
        "CI runs Python 3.11: run `make lock`")
    assert _locks("cpu") and _locks("gpu") and _locks("litellm")
    for path in LOCKS.glob("*.txt"):
        assert f"# python: {path.stem.rsplit('-py', 1)[1]}" in path.read_text(), path.name
        assert _pins(path)


@pytest.mark.parametrize("engine", ["cpu", "gpu"])
def test_every_package_the_setup_names_is_pinned_within_its_range(engine):
    for path in _locks(engine):
        pins = _pins(path)
        for req in _declared(engine):
            name = canonicalize_name(req.name)
            assert name in pins, f"{path.name} does not pin {req.name}: run `make lock`"
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"{path.name} pins {req.name}=={pins[name]}, outside {req}: run `make lock`")


def test_litellm_lock_pins_litellm():
    for path in _locks("litellm"):
        assert "litellm" in _pins(path)


def _requirements_of(name: str) -> list[Requirement]:
    reqs = []
    for text in md.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            reqs.append(req)
    return reqs


def _installed_without_dependencies() -> set[str]:
    """The packages setup_env.sh installs with ``--no-deps`` (vllm-bnb-plugin names ``vllm``,
    the GPU build, as a dependency)."""
    text = (REPO / "scripts" / "setup_env.sh").read_text()
    lines = [line for line in text.splitlines() if "--no-deps" in line and "install" in line]
    return {canonicalize_name(m.split("==")[0]) for line in lines
            for m in re.findall(r'"([a-z][a-z0-9-]*==[^"]*)"', line)}


def test_the_cpu_lock_is_closed_under_its_packages_requirements():
    """Every requirement of every pinned package installed here is itself pinned (read from the
    installed packages' metadata), so pip adds nothing the lock does not name."""
    path = LOCKS / f"cpu-py{PYVER}.txt"
    if not path.exists():
        pytest.skip(f"no CPU lock for Python {PYVER}")
    pins = _pins(path)
    installed = {canonicalize_name(d.metadata["Name"]) for d in md.distributions()}
    no_deps = _installed_without_dependencies()
    assert "vllm-bnb-plugin" in no_deps
    checked = 0
    for name in sorted((pins.keys() & installed) - no_deps):
        for req in _requirements_of(name):
            assert canonicalize_name(req.name) in pins, (
                f"{path.name} pins {name}, which requires {req.name}, not pinned: run `make lock`")
        checked += 1
    assert checked > 50


def test_a_venv_installed_from_the_lock_holds_its_versions():
    record = Path(sys.prefix) / ".infer-prof-lock"
    if not record.exists() or record.read_text().strip() == "none":
        pytest.skip("this environment was not installed from a lock (make test-latest, or by hand)")
    pins = _pins(REPO / record.read_text().strip())
    wrong = []
    # what pip installed in this venv, not whatever sys.path holds by now: importing setuptools
    # (vLLM, torch's extension builder) appends setuptools/_vendor, whose vendored packaging
    # 24.2 and typing-extensions 4.12.2 are no installed packages
    site = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    for dist in md.distributions(path=site):
        name = canonicalize_name(dist.metadata["Name"])
        if name in pins and dist.version != pins[name]:
            wrong.append(f"{name} {dist.version} (locked {pins[name]})")
    assert not wrong, f"installed versions differ from {record.read_text().strip()}: {wrong}"
