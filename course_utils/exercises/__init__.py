"""Checks for the exercises of each lesson: ``from course_utils.exercises import lesson01``."""
