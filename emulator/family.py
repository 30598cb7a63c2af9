"""A protocol family: what every engine needs from one family of protocols, in one object.

replemu models families of protocols: partition replication (``hw`` ... ``kip966``,
``emulator.partition_family.PARTITION``) and KRaft's metadata quorum (``kraft595`` ...
``kraft996``, ``emulator.quorum_family.QUORUM``).  An engine -- ``replemu run``, campaign, shrink,
explore, the stream, the dashboard -- is one code path over a ``Family``: it asks the family for its
variants, parses steps with its step table, builds and steps its model, judges with its checker,
encodes its state, and never asks which family it holds.  ``emulator.families`` is the registry:
``--protocol`` and ``--knob`` become ``(family, variant)`` there, once.

A new family is a package that subclasses ``Family`` and one row in ``emulator.families.FAMILIES``
(docs/architecture.md says, file by file, what that takes; tests/test_family_toy.py builds one).

The hooks are grouped by the engine that calls them; a family that some engine cannot serve raises
``NotImplementedError`` from that engine's hooks and the engine says so.
"""

from __future__ import annotations

from typing import Any, Callable

from ._build import mypyc_attr
from .search import SearchSpace
from .search_command import Counterexample, SearchOption


@mypyc_attr(allow_interpreted_subclasses=True)
class Family:
    """One family of protocols (a base class: the families subclass it)."""

    # -- identity ----------------------------------------------------------------------------------
    name: str = ""  # the result's ``family`` and the stream's: "partition", "quorum"
    title: str = ""  # how messages name a protocol of the family: "partition", "metadata-quorum"
    docs: str = ""  # the document that describes the family's rules (docs/protocol.md, docs/quorum.md)

    # -- variants and knobs ------------------------------------------------------------------------
    def variant_names(self) -> tuple[str, ...]:
        """The presets, in the family's order (``--protocol all`` runs them in this order)."""
        raise NotImplementedError

    def knob_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    def variant(self, protocol: str, knobs: dict[str, Any] | None = None) -> Any:
        """The preset ``protocol`` with ``knobs`` set (``ValueError`` / ``KnobError`` naming what is wrong)."""
        raise NotImplementedError

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        """``--knob NAME=VALUE`` texts of this family's knobs -> ``{name: value}`` (``KnobError``)."""
        raise NotImplementedError

    # -- steps -------------------------------------------------------------------------------------
    def step_kinds(self) -> tuple[str, ...]:
        raise NotImplementedError

    def parse_step(self, kind: Any, args: Any, ids: tuple[int, ...]) -> Any:
        """One step's ``{kind: args}`` validated against the family's step table (``StepError``)."""
        raise NotImplementedError

    def step_to_dict(self, step: Any) -> dict[str, Any]:
        """The step in the scenario file's shape; ``parse_step`` reads it back to the same step."""
        raise NotImplementedError

    def describe_step(self, step: Any) -> str:
        raise NotImplementedError

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        """Whether a decoded scenario document belongs to this family."""
        raise NotImplementedError

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        """A decoded scenario document validated (``ScenarioError`` naming ``source``, the key or step)."""
        raise NotImplementedError

    # -- run / campaign / shrink -------------------------------------------------------------------
    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Replay ``scenario`` under ``protocol`` (+ knobs): the result document (``StepRefused`` at a
        step the variant cannot take; with ``refusal_as_result``, the "not expressible" result)."""
        raise NotImplementedError

    # -- search (explore) --------------------------------------------------------------------------
    # ``replemu explore`` builds a family's spaces here and runs one engine on them
    # (``emulator.search``: the engine's hooks are the ``SearchSpace`` a family returns); what the
    # command prints and writes of a space comes from the family too.
    search_owner: str = ""  # how a flag of this family's refused elsewhere names it: "partition protocols"
    search_kind: str = ""  # how a refusal names one of its protocols: "a partition protocol"

    def search_options(self) -> tuple[SearchOption, ...]:
        """The flags of ``replemu explore`` this family's search takes, with their defaults (a
        flag another family takes and this one does not is refused)."""
        raise NotImplementedError

    def search_engines(self) -> tuple[str, ...]:
        """The engines that search this family: ``local`` (``emulator.search.search_local``),
        ``spark`` (``streaming.explore.search_spark``)."""
        return ("local",)

    def search_checkpoints(self) -> bool:
        """Whether a search keeps its levels under ``--out`` (``DIR/PROTOCOL/ENGINE``: rerunning the
        same command resumes it)."""
        return False

    def search_reductions(self) -> tuple[str, ...]:
        """The reductions ``--reduce`` may ask of this family's searches (docs/explore.md "Reductions")."""
        return ()

    def search_spaces(self, protocols: list[str], knobs: dict[str, Any],
                      options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
        """One space per protocol, and the properties ``--until`` names, from the values of
        ``search_options`` (given or default; ``config``: ``--config`` values by key);
        ``ValueError`` names the flag that is wrong."""
        raise NotImplementedError

    def describe_search(self, space: Any) -> tuple[str, str]:
        """What the first line of ``replemu explore`` says of a space: before the engine's
        settings, and after them."""
        raise NotImplementedError

    def search_notes(self, space: Any) -> list[str]:
        """Lines said before the search of ``space`` (a reduction asked for that does not apply)."""
        return []

    def search_result(self, space: Any) -> dict[str, Any]:
        """The result object's fields that say what was searched (``protocol``, ``bounds`` ...),
        first in the object ``--json`` prints."""
        raise NotImplementedError

    def counterexample(self, space: Any, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
        """The shortest path ``path`` (``depth`` actions) that breaks ``invariant`` as a scenario of
        the family that replays with ``replemu run FILE --check``."""
        raise NotImplementedError

    def search_chart_marks(self) -> tuple[str, ...] | None:
        """The invariants ``explore.svg`` marks where they first broke (None: no picture)."""
        return None

    # -- stream ------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<family {self.name}>"
