"""Whether a notebook starts a live TensorBoard (``%tensorboard``) for the person running it, and on which address.

Lessons 04 (scalars, hparams) and 10 (profiles) show their logs in a live TensorBoard when a person runs the
notebook, and skip it, saying why, when a machine executes it (CI, nbval, ``make execute``)::

    show, reason = cu.live_view_allowed()
    if show:
        %load_ext tensorboard
        %tensorboard --logdir {logdir} --host {cu.live_view_host()}
"""

from __future__ import annotations

import os

LIVE_ENV = "COURSE_TENSORBOARD"  # 1: always start the live view, 0: never
CONTAINER_ENV = "COURSE_IN_CONTAINER"  # set by the course's Dockerfile
AUTOMATED_DRIVERS = ("nbconvert", "nbclient", "pytest", "papermill", "course_utils execute")


def live_view_allowed() -> tuple[bool, str]:
    """Whether a notebook may start an interactive TensorBoard (``%tensorboard``), and why.

    ``$COURSE_TENSORBOARD`` decides when set (``1`` yes, ``0`` no). Otherwise no under CI (``$CI``)
    or when an automated runner drives the kernel (nbconvert, nbclient, pytest/nbval, papermill, the course's
    ``python -m course_utils execute``: they would leave a server behind and gain nothing), yes for a person
    in Jupyter or Colab.
    """
    explicit = os.environ.get(LIVE_ENV, "").strip()
    if explicit in ("0", "1"):
        return explicit == "1", f"${LIVE_ENV}={explicit}"
    if os.environ.get("CI"):
        return False, "running under CI ($CI is set)"
    driver = automated_driver()
    if driver:
        return False, f"the notebook is executed by {driver}, not by a person"
    return True, "interactive session"


def live_view_host() -> str:
    """The address the live TensorBoard listens on: every interface in the course's container (``localhost``
    there is the container's own, out of reach of the published port 6006), else ``localhost`` only."""
    return "0.0.0.0" if os.environ.get(CONTAINER_ENV) == "1" else "localhost"


def automated_driver() -> str | None:
    """The automated runner that is this process or one of its ancestors, if any."""
    import psutil

    me = psutil.Process()
    for proc in [me, *me.parents()]:
        try:
            cmdline = " ".join(proc.cmdline())
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for driver in AUTOMATED_DRIVERS:
            if driver in cmdline:
                return driver
    return None
