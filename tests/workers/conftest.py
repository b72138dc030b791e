"""The flush's world fixtures for every worker test (tests/support/flush_world.py)."""

from tests.support.flush_world import make_world, settings, world

__all__ = ["make_world", "settings", "world"]  # fixtures, found by name
