"""Chaos at CI size: ``scripts/chaos.py`` kill -9s the running ``replemu stream`` (its whole process
group and session: driver, JVM, source runner, Python workers) at seeded points of four kinds —
during start-up, inside a batch's state function, inside the sink after an output landed, right
after a commit — restarts it from its checkpoint each time, and the outputs are byte-identical to
an uninterrupted run.  The full-size run is ``python scripts/chaos.py --partitions 1000 --kills 20``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_chaos():
    """``scripts/chaos.py`` as a module (it is a script, not a package)."""
    name = "replemu_scripts_chaos"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "chaos.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[name]


chaos = load_chaos()

# 100 partitions, 6 micro-batches; seed 2 plans: state@0, sink@2 (after validations), a start-up
# kill of a restart, commit@5 (the last batch: the restart only finishes the run).
SEED, PARTITIONS, STEPS_PER_BATCH, MAX_STEPS, KILLS = 2, 100, 2, 12, 4


def test_the_plan_is_the_seeds_one_kill_of_each_kind_at_increasing_points():
    plan = chaos.plan_kills(SEED, KILLS, chaos.batches_of(MAX_STEPS, STEPS_PER_BATCH))
    assert plan == chaos.plan_kills(SEED, KILLS, 6)  # a replay with the same seed aims at the same points
    assert sorted(p.kind for p in plan) == sorted(chaos.KINDS)
    points = [p.point() for p in plan if p.kind != "startup"]
    assert points == sorted(points) and len(set(points)) == len(points)
    big = chaos.plan_kills(12345, 20, 30)
    assert len(big) == 20 and set(p.kind for p in big) == set(chaos.KINDS)
    assert len({p.batch for p in big if p.batch is not None}) >= 8  # spread over the run


def test_the_comparison_sees_a_changed_byte_a_lost_file_and_a_leftover_one_but_not_the_excluded(tmp_path):
    ref, got = tmp_path / "ref", tmp_path / "got"
    for root in (ref, got):
        for rel, data in {"log/batch_id=0/part-0.parquet": b"PAR1 a", "log/batch_id=1/part-0.parquet": b"PAR1 b",
                          "gaps.json": b"[]\n", "progress.jsonl": root.name.encode(),
                          "data_docs/index.html": root.name.encode()}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
    assert chaos.compare_trees(ref, got).ok
    (got / "log/batch_id=1/part-0.parquet").write_bytes(b"PAR1 c")
    (got / "gaps.json").unlink()
    (got / "log/.batch_id=2.tmp").mkdir()
    (got / "log/.batch_id=2.tmp/part-0.parquet").write_bytes(b"PAR1")  # a half-written batch left behind
    c = chaos.compare_trees(ref, got)
    assert (c.missing, c.extra, c.different) == (["gaps.json"], ["log/.batch_id=2.tmp/part-0.parquet"],
                                                 ["log/batch_id=1/part-0.parquet"])
    assert (c.identical, c.total, c.ok) == (1, 3, False)
    assert c.first_difference == "gaps.json (missing)"
    assert c.excluded == {"progress.jsonl": 2, "data_docs/": 2}


def test_kill_9_at_seeded_points_of_every_kind_then_restart_gives_the_uninterrupted_bytes(spark, tmp_path):
    cfg = chaos.Config(partitions=PARTITIONS, kills=KILLS, seed=SEED, steps_per_batch=STEPS_PER_BATCH,
                       max_steps=MAX_STEPS, workdir=tmp_path)
    result = chaos.run_chaos(cfg, spark=spark)  # the reference in-process, the killed run through the CLI

    assert result.error is None, result.error
    assert [k.kind for k in result.kills] == [p.kind for p in result.plan]  # every kill made, where planned
    assert result.starts == KILLS + 1
    c = result.comparison
    assert "validations/batch_id=5/part-00000.parquet" in c.compared  # the GX results are outputs too
    assert c.by_ext[".parquet"] >= 4 * 6 and {"run.json", "gaps.json"} <= set(c.compared)
    assert (c.missing, c.extra, c.different) == ([], [], [])
    assert c.docs["missing"] == []  # every batch's Data Docs page survives the kills (GX results kept on disk)
    assert c.identical == c.total
    assert result.ok
