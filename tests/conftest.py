"""Shared fixtures: the shipped configs."""

from __future__ import annotations

import pytest

from hw.config import list_configs, load_config

CONFIG_NAMES = list_configs()


@pytest.fixture(params=CONFIG_NAMES)
def cfg(request):
    """Every shipped hardware config in turn."""
    return load_config(request.param)
