"""``eval --batch`` answered wholly from the response cache sent nothing through a batch, so its
table does not say "(batch price)"."""

from __future__ import annotations

from batch_helpers import KEYS, batch_project, summary

from conftest import run_cli


def test_a_batch_run_answered_wholly_from_the_cache_does_not_claim_the_batch_price(tmp_path, server):
    project = batch_project(tmp_path / "proj", server)
    first = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "a"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert first.code == 0 and "(batch price)" in first.out, first.err
    again = run_cli("eval", "ticket-triage", "--out", str(tmp_path / "b"), "--batch", "--quiet", cwd=project, env=KEYS)
    assert again.code == 0, again.err
    assert server.batches.creates == 1 and summary(tmp_path / "b")["cache_hits"] == 12  # the premise
    assert "(batch price)" not in again.out
    assert "pricing" not in summary(tmp_path / "b")
