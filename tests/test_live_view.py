"""The live TensorBoard view of lessons 04 and 10: who starts it, and on which address."""

from __future__ import annotations

import course_utils as cu
from course_utils.lessons import lesson04


def test_live_view_allowed(clean_env):
    clean_env.setenv("COURSE_TENSORBOARD", "1")
    assert cu.live_view_allowed() == (True, "$COURSE_TENSORBOARD=1")
    clean_env.setenv("COURSE_TENSORBOARD", "0")
    assert cu.live_view_allowed()[0] is False
    clean_env.delenv("COURSE_TENSORBOARD")
    clean_env.setenv("CI", "true")
    assert cu.live_view_allowed() == (False, "running under CI ($CI is set)")
    clean_env.delenv("CI")
    allowed, reason = cu.live_view_allowed()  # this test runs under pytest: an automated driver
    assert not allowed and "pytest" in reason


def test_live_view_host(clean_env):
    assert cu.live_view_host() == "localhost"
    clean_env.setenv("COURSE_IN_CONTAINER", "1")  # the course's Dockerfile sets it
    assert cu.live_view_host() == "0.0.0.0"


def test_lesson_04_calls_it_by_its_own_module():
    assert lesson04.live_view_allowed is cu.live_view_allowed and lesson04.live_view_host is cu.live_view_host
