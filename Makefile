# The course's two commands (see README.md):
#   make lab    install everything and open JupyterLab on the notebooks (the main job)
#   make test   install everything and run the whole test suite (unit tests + nbval on every notebook)
# The virtual environment lives outside the checkout, keyed by the Python version and the hash of
# requirements.lock (every package, transitive ones included, with its hashes: `make lock` makes it from
# requirements.txt): a changed lock gets a fresh install, an unchanged one reuses the last.

SHELL := /bin/bash
# GNU make >= 3.82 runs recipes with these flags; Apple's make 3.81 ignores them, so no recipe relies on them.
.SHELLFLAGS := -eu -o pipefail -c
# The pinned stack has wheels for Python 3.11 to 3.13 (tests/test_platforms.py). Without PYTHON=..., take the
# first of python3.11, python3.12, python3.13 on the PATH (3.11 made the stored outputs), else python3.
SUPPORTED_PYTHONS := 3.11 3.12 3.13
PYTHON ?= $(firstword $(foreach v,$(SUPPORTED_PYTHONS),$(shell command -v python$(v) 2>/dev/null)) python3)
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PLATFORM ?= $(shell uname -s)-$(shell uname -m)
REQ_HASH := $(shell $(PYTHON) -c 'import hashlib; print(hashlib.sha256(open("requirements.lock", "rb").read()).hexdigest()[:16])' 2>/dev/null)
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

.PHONY: lab test test-colab venv venv-path lock check-python browser doctor execute full links slides handouts site screenshots clean-venv

# Before pip starts: a Python and a platform that the pinned wheels exist for, or a message that says what to do.
check-python:
	@case "$(PLATFORM)" in \
	  Linux-x86_64|Linux-aarch64|Darwin-arm64) ;; \
	  Darwin-x86_64) echo "Intel Macs have no wheels of torch 2.14 or TensorFlow 2.21: use Docker or Colab (README)."; exit 1;; \
	  MINGW*|MSYS*|CYGWIN*|Windows*) echo "On Windows, run the course in WSL2 (README, Windows): this Makefile and lessons 03 and 05 need Linux."; exit 1;; \
	  *) echo "warning: $(PLATFORM) is not a platform the course is tested on (Linux x86-64/aarch64, macOS arm64); trying.";; \
	esac
	@case " $(SUPPORTED_PYTHONS) " in \
	  *" $(PY_VERSION) "*) ;; \
	  *) echo "$(PYTHON) is Python $(or $(PY_VERSION),(not found)); the course needs one of Python $(SUPPORTED_PYTHONS) (3.11 made the stored outputs)."; \
	     echo "Install one (python.org, Homebrew: brew install python@3.11, Debian/Ubuntu: apt install python3.11-venv, or pyenv), then run make again, or name it: make $(or $(MAKECMDGOALS),test) PYTHON=python3.11"; exit 1;; \
	esac

# uv installs the lock about 8 times faster than pip (from scratch, no cache: 28 s against 3 min 38 s, measured on
# 2 cores); where uv cannot run (no wheel of it for the platform, or it fails), pip installs the same lock.
UV_PIN := $(shell sed -n 's/^uv==//p' requirements.txt)
$(VENV)/.installed: | check-python  # the path holds the hash of requirements.lock: no timestamp rule needed
	rm -rf "$(VENV)"
	$(PYTHON) -m venv "$(VENV)"
	{ "$(BIN)/python" -m pip install --quiet "uv==$(UV_PIN)" && \
	  "$(BIN)/uv" pip install --quiet --require-hashes -r requirements.lock --python "$(BIN)/python"; } || \
	{ echo "uv could not install the lock: pip installs it (a few minutes)"; \
	  "$(BIN)/python" -m pip install --quiet --require-hashes -r requirements.lock; }
	touch "$@"

venv: check-python $(VENV)/.installed
	"$(BIN)/python" -m pip install --quiet --no-deps --editable .

# After changing requirements.txt: resolve it again into requirements.lock, for every platform and Python the course
# supports at once (uv's universal resolution, with hashes; versions already locked stay unless a pin moves them),
# then ask the package registry whether each platform and Python has wheels of exactly the locked versions
# (tests/test_platforms.py with uv: about two minutes, so `make test` leaves it out). Commit both files.
lock: venv
	"$(BIN)/uv" pip compile requirements.txt --universal --generate-hashes --python-version $(firstword $(SUPPORTED_PYTHONS)) \
	  --custom-compile-command "make lock" --quiet --output-file requirements.lock
	COURSE_ASK_REGISTRY=1 "$(BIN)/python" -m pytest -q tests/test_lock.py tests/test_platforms.py

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

# Colab's runtime as a tested stack: the newest package list Colab publishes (tests/colab/), built with Python 3.13 as
# Colab has it, the course installed without its dependencies as Colab's setup cell does, and every lesson run under
# nbval in the quick profile (COURSE_DATA_DIR as for `make test`). Not part of `make test`: it downloads about 7 GB
# (PyPI's torch brings its CUDA libraries; Colab's own CPU build comes from download.pytorch.org) and takes about
# 15 minutes on 2 cores. The README's "Verified on" records each run.
COLAB_LIST := $(lastword $(sort $(wildcard tests/colab/pip-freeze-*.txt)))
COLAB_PYTHON ?= python3.13
COLAB_VENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/accelerated-dl/colab-$(subst pip-freeze-,,$(basename $(notdir $(COLAB_LIST))))
# What the lessons import, held to Colab's versions by the list; the test tools Colab lacks, at the course's pins.
COLAB_PACKAGES := torch torchvision torchao tensorflow keras tensorboard numpy pandas matplotlib tqdm ipywidgets \
  ipykernel nbformat nbclient psutil pytest scipy pyyaml $(shell grep -E '^(nbval|pytest-timeout)==' requirements.txt)
$(COLAB_VENV)/.installed: $(COLAB_LIST)
	@$(COLAB_PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null || \
	  { echo "Colab runs Python 3.13: install it (pyenv, python.org, deadsnakes) or name it: make test-colab COLAB_PYTHON=..."; exit 1; }
	rm -rf "$(COLAB_VENV)"
	$(COLAB_PYTHON) -m venv "$(COLAB_VENV)"
	# Every pinned line of the list, but the CUDA libraries: PyPI's torch needs its own.
	grep -E '^[A-Za-z0-9_.-]+==' "$(COLAB_LIST)" | grep -v '^nvidia-' > "$(COLAB_VENV)/constraints.txt"
	sed -nE 's/^(torch|torchvision|torchaudio) @ .*\/[a-z]+-([0-9.]+)%2B.*/\1==\2/p' "$(COLAB_LIST)" >> "$(COLAB_VENV)/constraints.txt"
	PIP_CONSTRAINT="$(COLAB_VENV)/constraints.txt" "$(COLAB_VENV)/bin/python" -m pip install --quiet $(COLAB_PACKAGES)
	"$(COLAB_VENV)/bin/python" -m pip install --quiet --no-deps --editable .
	touch "$@"

# The course's sanitizing rules, and what truly depends on the versions (tests/colab/nbval_sanitize.cfg).
test-colab: $(COLAB_VENV)/.installed
	cat tests/nbval_sanitize.cfg tests/colab/nbval_sanitize.cfg > "$(COLAB_VENV)/nbval_sanitize.cfg"
	COURSE_PROFILE=quick "$(COLAB_VENV)/bin/python" -m pytest -o addopts="" -p no:cacheprovider --nbval \
	  --nbval-current-env --nbval-sanitize-with "$(COLAB_VENV)/nbval_sanitize.cfg" --nbval-cell-timeout=900 \
	  $(NOTEBOOKS) $(PYTEST_ARGS)

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
	set -e; for pkg in $(SLIDES_JS); do \
	  tarball=$$(cd "$(@D)" && npm pack --silent "$$pkg"); \
	  mkdir "$(@D)/$${pkg%@*}"; \
	  tar -xzf "$(@D)/$$tarball" -C "$(@D)/$${pkg%@*}" --strip-components=1; \
	  rm "$(@D)/$$tarball"; \
	done
	touch "$@"

slides: venv $(SLIDES_DIR)/vendor/.fetched
	"$(BIN)/jupyter" nbconvert --to slides --output-dir "$(SLIDES_DIR)" \
	  --TemplateExporter.extra_template_basedirs=docs/slides_template --template course_reveal \
	  --SlidesExporter.reveal_width=1280 --SlidesExporter.reveal_height=720 \
	  --SlidesExporter.reveal_url_prefix=vendor/reveal.js \
	  --SlidesExporter.require_js_url=vendor/requirejs/require.js \
	  --SlidesExporter.jquery_url=vendor/jquery/dist/jquery.min.js \
	  --SlidesExporter.mathjax_url='vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe' \
	  --SlidesExporter.preprocessors="['course_utils.slides.Excerpts', 'course_utils.slides.ColabLink']" \
	  $(NOTEBOOKS)

# PDF handouts of the decks in build/handouts/, one page per slide: reveal.js's print mode in headless Chromium
# (Debian's chromium; `make browser` installs it as root).
handouts: slides
	"$(BIN)/python" -m course_utils handouts --out build/handouts $(NOTEBOOKS)

# The course's static site (mkdocs-jupyter over the executed notebooks) in build/site/. The site is
# built from the committed outputs, not re-executed. (MkDocs 1.x prints a notice about MkDocs 2.0,
# which mkdocs-jupyter does not support: silenced.) Its formulas use the MathJax that the decks vendor.
site: venv $(SLIDES_DIR)/vendor/.fetched
	NO_MKDOCS_2_WARNING=1 "$(BIN)/mkdocs" build --strict --site-dir build/site

# Refresh the README's screenshots: run the browser tests that take them (into build/screenshots/,
# ignored by git) and copy their pictures to docs/images/.
screenshots: venv browser
	COURSE_PROFILE=quick "$(BIN)/python" -m pytest -q tests/test_lab.py::test_a_lesson_renders_in_chromium \
	  tests/test_tensorboard_browser.py tests/test_slides.py::test_make_slides_renders_lesson_01_in_chromium
	mkdir -p docs/images
	cp build/screenshots/jupyterlab.png build/screenshots/tensorboard-hparams.png \
	  build/screenshots/slides-01-derivation.png build/screenshots/slides-01-speaker-view.png docs/images/

# After changing REPOSITORY or REF in course_utils/colab.py (a fork, a release tag): rewrite every badge, Colab
# install line and project URL to match.
links: venv
	"$(BIN)/python" -m course_utils links

clean-venv:
	rm -rf "$(VENV)"
