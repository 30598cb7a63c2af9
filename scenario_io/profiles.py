"""Workload profiles: the table of ``conf/workloads.yaml``, shipped as package data."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from emulator.scenario import ScenarioError
from emulator.workload import Profile, ProfileError, profile_from_mapping

from .yaml_files import parse_yaml_text

PACKAGED = "data/workloads.yaml"


def default_profiles_text() -> str:
    return resources.files("scenario_io").joinpath(PACKAGED).read_text(encoding="utf-8")


def load_profiles(path: str | Path | None = None) -> dict[str, Profile]:
    """The profiles of ``path``, or of the packaged table (``conf/workloads.yaml``) by default."""
    source = str(path) if path else "workloads.yaml (packaged)"
    try:
        text = Path(path).read_text(encoding="utf-8") if path else default_profiles_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{source}: cannot read the workload profiles: {exc}") from None
    data = parse_yaml_text(text, source, "workload profiles file")
    if not isinstance(data, dict) or not data:
        raise ScenarioError(f"{source}: expected a mapping of profile name to profile")
    try:
        return {str(name): profile_from_mapping(str(name), p) for name, p in data.items()}
    except ProfileError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
