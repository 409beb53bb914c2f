# The course's two commands (see README.md):
#   make lab    install everything and open JupyterLab on the notebooks (the main job)
#   make test   install everything and run the whole test suite (unit tests + nbval on every notebook)
# The virtual environment lives outside the checkout, keyed by the Python version and the hash of
# requirements.txt: a changed pin gets a fresh install, an unchanged one reuses the last.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
REQ_HASH := $(shell sha256sum requirements.txt | cut -c1-16)
VENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/accelerated-dl/venv-py$(PY_VERSION)-$(REQ_HASH)
BIN := $(VENV)/bin
NOTEBOOKS ?= $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))

# Notebooks run with their folder as working directory: make a relative data root absolute,
# whether it comes from the environment or the command line (`make test COURSE_DATA_DIR=...`).
ifdef COURSE_DATA_DIR
override COURSE_DATA_DIR := $(abspath $(COURSE_DATA_DIR))
export COURSE_DATA_DIR
endif
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONHASHSEED ?= 0

.PHONY: lab test venv execute full clean-venv

$(VENV)/.installed:  # the path holds the hash of requirements.txt: no timestamp rule needed
	rm -rf "$(VENV)"
	$(PYTHON) -m venv "$(VENV)"
	"$(BIN)/python" -m pip install --quiet -r requirements.txt
	touch "$@"

venv: $(VENV)/.installed
	"$(BIN)/python" -m pip install --quiet --no-deps --editable .

# Jupyter refuses to run as root unless told; containers and some clusters log in as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: venv
	"$(BIN)/jupyter" lab --notebook-dir=notebooks $(ALLOW_ROOT) $(LAB_ARGS)

test: venv
	COURSE_PROFILE=quick "$(BIN)/python" -m pytest $(PYTEST_ARGS)

# Re-execute notebooks in place (quick profile) to refresh their committed outputs.
execute: venv
	for nb in $(NOTEBOOKS); do \
	  start=$$(date +%s); \
	  COURSE_PROFILE=quick "$(BIN)/jupyter" nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=900 "$$nb"; \
	  echo "$$nb: $$(( $$(date +%s) - start )) s (quick)"; \
	done

# Run notebooks with the full profile into build/full/ and record each one's wall time there;
# the full-profile results quoted in the README come from these executed copies.
full: venv
	mkdir -p build/full
	for nb in $(NOTEBOOKS); do \
	  start=$$(date +%s); \
	  COURSE_PROFILE=full "$(BIN)/jupyter" nbconvert --to notebook --execute \
	    --ExecutePreprocessor.timeout=7200 --output-dir build/full "$$nb"; \
	  echo "$$(basename $$nb),$$(( $$(date +%s) - start ))" | tee -a build/full/wall_seconds.csv; \
	done

clean-venv:
	rm -rf "$(VENV)"
