# infer-prof: two commands for a fresh clone.
#   make run   - set up (virtual environment + engine) and profile the embedded default model
#   make test  - set up and run the whole test suite
# Setup runs once; running either again reuses what is installed. Versions come from lock/.
#   make lock         - refresh lock/ to the newest releases pyproject.toml allows
#   make test-latest  - the whole suite on the newest releases, in .venv-latest (finds drift)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.infer-prof-installed
ARGS   ?=
LOCK   ?= locked
LITELLM_VENV ?= .venv-litellm

.PHONY: setup run test test-latest lock lint typecheck unit integration e2e calibrate clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup_env.sh $(wildcard lock/*.txt)
	PYTHON=$(PYTHON) VENV=$(VENV) INFER_PROF_LOCK=$(LOCK) bash scripts/setup_env.sh
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/infer-prof run $(ARGS)

test: $(STAMP)
	bash scripts/install_browser.sh
	bash scripts/install_postgres.sh
	bash scripts/install_nginx.sh
	PYTHON=$(PYTHON) LITELLM_VENV=$(LITELLM_VENV) INFER_PROF_LOCK=$(LOCK) bash scripts/install_litellm.sh
	VENV=$(VENV) bash scripts/install_ray.sh
	$(VENV)/bin/ruff check infer_prof tests benchmarks
	$(VENV)/bin/mypy infer_prof
	LITELLM_VENV=$(LITELLM_VENV) $(PY) -m pytest -ra $(ARGS)

test-latest:
	$(MAKE) test VENV=.venv-latest LOCK=latest LITELLM_VENV=.venv-litellm-latest

lock:
	PYTHON=$(PYTHON) bash scripts/lock_env.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check infer_prof tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy infer_prof

# make unit keeps the compiled bytecode (the package's and pytest's rewritten test modules) in
# .cache/pycache, also where PYTHONDONTWRITEBYTECODE is set: compiling them afresh took ~6 s of
# each run on the 2-core VM.
UNIT_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/.cache/pycache

unit: $(STAMP)
	$(UNIT_ENV) $(PY) -m pytest -ra tests/unit $(ARGS)

integration: $(STAMP)
	bash scripts/install_postgres.sh
	$(PY) -m pytest -ra tests/integration $(ARGS)

e2e: $(STAMP)
	$(PY) -m pytest -ra tests/e2e $(ARGS)

calibrate: $(STAMP)
	$(VENV)/bin/infer-prof calibrate $(ARGS)

clean:
	rm -rf $(VENV) .venv-latest build *.egg-info
