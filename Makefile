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

# Kernels started by nbconvert capture what C libraries write to the process's stdout/stderr (TensorFlow's
# C++ log lines, for example); nbval's kernels do not (ipykernel skips it under pytest). Executed the same
# way as nbval runs them, the committed outputs hold only what nbval can compare.
KERNEL_AS_NBVAL := --ExecutePreprocessor.extra_arguments='["--IPKernelApp.capture_fd_output=False"]'
# The notebook metadata policy (CONTRIBUTING.md): a notebook keeps its kernelspec, a cell its tags and
# slide type; no execution timestamps, no Python version, nothing a re-run would change.
CLEAN_METADATA := --ClearMetadataPreprocessor.enabled=True --ClearMetadataPreprocessor.preserve_nb_metadata_mask='["kernelspec"]' \
  --ClearMetadataPreprocessor.preserve_cell_metadata_mask='["tags","slideshow"]'

# Re-execute notebooks in place (quick profile) to refresh their committed outputs.
execute: venv
	for nb in $(NOTEBOOKS); do \
	  start=$$(date +%s); \
	  COURSE_PROFILE=quick "$(BIN)/jupyter" nbconvert --to notebook --execute --inplace $(KERNEL_AS_NBVAL) $(CLEAN_METADATA) \
	    --ExecutePreprocessor.timeout=900 "$$nb"; \
	  echo "$$nb: $$(( $$(date +%s) - start )) s (quick)"; \
	done

# Run notebooks with the full profile into build/full/ and record each one's wall time there;
# the full-profile results quoted in the README come from these executed copies.
full: venv
	mkdir -p build/full
	for nb in $(NOTEBOOKS); do \
	  start=$$(date +%s); \
	  COURSE_PROFILE=full "$(BIN)/jupyter" nbconvert --to notebook --execute $(KERNEL_AS_NBVAL) $(CLEAN_METADATA) \
	    --ExecutePreprocessor.timeout=7200 --output-dir build/full "$$nb"; \
	  echo "$$(basename $$nb),$$(( $$(date +%s) - start ))" | tee -a build/full/wall_seconds.csv; \
	done

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
