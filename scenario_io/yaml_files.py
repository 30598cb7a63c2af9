"""Scenario files (docs/scenario-format.md): reading and validating YAML, writing scenarios back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from emulator.config import config_to_dict
from emulator.scenario import Scenario, ScenarioError, parse_scenario
from emulator.steps import step_to_dict


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """Decode a YAML file; errors name the file (and line) and raise ``ScenarioError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: invalid YAML: {where}{problem}") from None
    if data is None:
        raise ScenarioError(f"{path}: the {what} is empty")
    return data


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file; raises ``ScenarioError`` naming the file."""
    path = Path(path)
    data = read_yaml(path)

    def resolve(value: str) -> str:
        resolved = (path.parent / value).resolve()
        if not resolved.is_dir():
            raise ValueError(f"initial_state {value!r} is not a directory ({resolved})")
        return str(resolved)

    return parse_scenario(data, source=str(path), resolve_initial_state=resolve)


def scenario_document(s: Scenario, description: str, expect: dict | None = None) -> dict[str, Any]:
    """A scenario in the contract's YAML shape (``initial_state`` absolute, so it replays from anywhere)."""
    doc: dict[str, Any] = {
        "name": s.name, "description": description, "replicas": list(s.replicas), "config": config_to_dict(s.config),
    }
    if s.initial_state:
        doc["initial_state"] = s.initial_state
    doc["steps"] = [step_to_dict(step) for step in s.steps]
    if expect:
        doc["expect"] = expect
    return doc


def write_scenario(data: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))
    return path
