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

.PHONY: lab test venv venv-path browser doctor execute full slides site screenshots clean-venv

$(VENV)/.installed:  # the path holds the hash of requirements.txt: no timestamp rule needed
	rm -rf "$(VENV)"
	$(PYTHON) -m venv "$(VENV)"
	"$(BIN)/python" -m pip install --quiet -r requirements.txt
	touch "$@"

venv: $(VENV)/.installed
	"$(BIN)/python" -m pip install --quiet --no-deps --editable .

# Where the virtual environment is: `source $$(make -s venv-path)/bin/activate`.
venv-path:
	@echo "$(VENV)"

# Jupyter refuses to run as root unless told; containers and some clusters log in as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: venv
	"$(BIN)/jupyter" lab --notebook-dir=notebooks $(ALLOW_ROOT) $(LAB_ARGS)

# The browser tests drive Debian's Chromium (never a browser downloaded by a test tool). As root with
# apt (CI, containers) it is installed here; elsewhere install the `chromium` package yourself, or
# leave those tests out with PYTEST_ARGS="-m 'not browser'".
browser:
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	else echo "Chromium not found: install Debian's chromium package, or run without the browser tests."; fi

test: venv browser
	COURSE_PROFILE=quick "$(BIN)/python" -m pytest $(PYTEST_ARGS)

# What this machine has, and what each lesson will do on it.
doctor: venv
	"$(BIN)/python" -m course_utils doctor $(DOCTOR_ARGS)

# Re-execute notebooks in place with the quick profile: their committed outputs (nbval compares them).
# Run as nbval runs them, with the notebook metadata policy of CONTRIBUTING.md (course_utils/execute.py).
execute: venv
	"$(BIN)/python" -m course_utils execute --profile quick $(NOTEBOOKS)

# Run notebooks with the full profile into notebooks/full/, the published lecture-scale results, each with a
# record of its run (wall time, machine, versions, each cell's seconds). A lesson whose published copy came from
# its current code is skipped (an interrupted run resumes); FORCE=1 runs it again.
full: venv
	"$(BIN)/python" -m course_utils execute --profile full $(if $(FORCE),--force) $(NOTEBOOKS)

# Reveal.js slides of every lesson, for instructors, in build/slides/ (open NN_*.slides.html).
# The decks' JavaScript is fetched once from the npm registry into build/slides/vendor/, so a deck
# works offline in a lecture hall. reveal.js 4.0.2 is the release nbconvert's template is written for;
# docs/slides_template/ extends that template so that a slide taller than the screen scrolls.
SLIDES_DIR := build/slides
SLIDES_JS := reveal.js@4.0.2 requirejs@2.1.10 jquery@2.2.4 mathjax@2.7.7

$(SLIDES_DIR)/vendor/.fetched:
	@command -v npm >/dev/null || { echo "make slides needs npm (Node.js) once, to fetch reveal.js and MathJax."; exit 1; }
	rm -rf "$(@D)" && mkdir -p "$(@D)"
	for pkg in $(SLIDES_JS); do \
	  tarball=$$(cd "$(@D)" && npm pack --silent "$$pkg"); \
	  mkdir "$(@D)/$${pkg%@*}"; \
	  tar -xzf "$(@D)/$$tarball" -C "$(@D)/$${pkg%@*}" --strip-components=1; \
	  rm "$(@D)/$$tarball"; \
	done
	touch "$@"

slides: venv $(SLIDES_DIR)/vendor/.fetched
	"$(BIN)/jupyter" nbconvert --to slides --output-dir "$(SLIDES_DIR)" \
	  --TemplateExporter.extra_template_basedirs=docs/slides_template --template course_reveal \
	  --SlidesExporter.reveal_url_prefix=vendor/reveal.js \
	  --SlidesExporter.require_js_url=vendor/requirejs/require.js \
	  --SlidesExporter.jquery_url=vendor/jquery/dist/jquery.min.js \
	  --SlidesExporter.mathjax_url='vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe' \
	  $(NOTEBOOKS)

# The course's static site (mkdocs-jupyter over the executed notebooks) in build/site/. The site is
# built from the committed outputs, not re-executed. (MkDocs 1.x prints a notice about MkDocs 2.0,
# which mkdocs-jupyter does not support: silenced.)
site: venv
	NO_MKDOCS_2_WARNING=1 "$(BIN)/mkdocs" build --strict --site-dir build/site

# Refresh the README's two screenshots: run the browser tests that take them (into build/screenshots/,
# ignored by git) and copy their pictures to docs/images/.
screenshots: venv browser
	COURSE_PROFILE=quick "$(BIN)/python" -m pytest -q tests/test_lab.py::test_a_lesson_renders_in_chromium \
	  tests/test_tensorboard_browser.py
	mkdir -p docs/images
	cp build/screenshots/jupyterlab.png build/screenshots/tensorboard-hparams.png docs/images/

clean-venv:
	rm -rf "$(VENV)"
