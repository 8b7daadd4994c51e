"""Tests for diagnose.fleet: grouping many nodes' results by cause and normalised signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose import diagnose_text
from diagnose.fleet import diagnose_paths, group, signature, summarize
from diagnose.render.json import render_jsonl

EXAMPLE = Path(__file__).resolve().parents[1] / "diagnose" / "examples" / "sm120-ep8-smem.log"


def node_log(node: int, message: str = "an illegal memory access was encountered") -> str:
    """One node's crash: same failure, different rank, pid, paths and addresses."""
    return "\n".join(
        [
            f"[2031-07-04 12:00:0{node % 10} TP{node % 8}] Decode batch. #running-req: {node}",
            f"[2031-07-04 12:00:0{node % 10} TP{node % 8}] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            f'  File "/home/node{node}/venv/srv/loop.py", line {80 + node}, in run_loop',
            "    self.step()",
            f"RuntimeError: CUDA error: {message} (ptr 0x7f{node:04x}beef)",
        ]
    )


def test_signature_masks_what_differs_between_nodes() -> None:
    a = diagnose_text(node_log(1))
    b = diagnose_text(node_log(7))
    c = diagnose_text(node_log(1, "misaligned address"))
    assert signature(a) == signature(b) != ""
    assert signature(a) != signature(c)
    assert "0x" not in signature(a) and "node1" not in signature(a)


def test_group_counts_nodes_by_cause_and_signature() -> None:
    results = [diagnose_text(node_log(n), source=f"node{n}") for n in range(5)]
    results += [diagnose_text(node_log(n, "misaligned address"), source=f"n{n}") for n in (8, 9)]
    results.append(diagnose_text("all good\n", source="healthy"))
    groups = group(results)
    assert [g.count for g in groups] == [5, 2]
    assert groups[0].sources == tuple(f"node{n}" for n in range(5))
    assert groups[0].describe() == f"5 nodes: {groups[0].label}"
    assert groups[1].describe("logs").startswith("2 logs: ")
    assert len(group(results, include_clean=True)) == 3


def test_label_names_arch_and_tile() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    results = [diagnose_text(text.replace("rank", f"rank{n}"), source=f"n{n}") for n in range(3)]
    (g,) = group(results)
    assert g.describe() == "3 nodes: smem-overflow on sm_120, tile 128x256x128"


def test_every_record_shape_groups_the_same() -> None:
    d = diagnose_text(EXAMPLE.read_text(encoding="utf-8"), source="n0")
    shapes = [d, d.to_dict(), summarize(d), json.loads(json.dumps(summarize(d)))]
    keys = {(g.cause, g.label, g.signature) for s in shapes for g in group([s])}
    assert len(keys) == 1


def test_jsonl_records_from_nodes_group_per_failure() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert len(diagnose_text(text).crashes) > 1  # several regions ...
    records = [
        json.loads(line)
        for n in range(4)
        for line in render_jsonl(diagnose_text(text, source=f"n{n}")).splitlines()
    ]
    assert len(records) == 4  # ... are one failure: one record per node
    (g,) = group(records)
    assert g.count == 4 and g.cause == "smem-overflow"
    assert all(r["crash_count"] > 1 for r in records)


def _write_logs(folder: Path) -> list[Path]:
    paths = []
    for n in range(6):
        p = folder / f"node{n}.log"
        message = "misaligned address" if n >= 4 else "an illegal memory access was encountered"
        p.write_text(node_log(n, message) + "\n", encoding="utf-8")
        paths.append(p)
    paths.append(folder / "missing.log")
    return paths


def test_diagnose_paths_in_process(tmp_path: Path) -> None:
    records = diagnose_paths(_write_logs(tmp_path))
    assert [r["source"] for r in records][:2] == [str(tmp_path / "node0.log")] * 1 + [
        str(tmp_path / "node1.log")
    ]
    assert records[-1]["cause"] == "unreadable"
    assert sorted(g.count for g in group(records)) == [1, 2, 4]


def test_dask_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="the 'fleet' extra is not installed")
    paths = _write_logs(tmp_path)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        records = diagnose_paths(paths, executor=client.get_executor())
    assert records == diagnose_paths(paths)
    counts = sorted(g.count for g in group(records))
    assert counts == [1, 2, 4]
