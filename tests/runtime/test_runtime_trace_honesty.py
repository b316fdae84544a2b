"""Issue 32: ``amplint trace`` does not print a clean bill ("findings: none") when it saw no AMP
step at all, or could not follow a process: it says ``cannot verify`` and why."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from amplint.runtime import trace  # noqa: E402


def test_no_amp_at_all_is_cannot_verify_not_a_clean_bill():
    lines = trace.summary_lines([], [], [], [])
    assert "  findings: none (cannot verify: nothing was checked, see below)" in lines
    assert lines[-1].startswith("amplint trace: nothing was checked: no traced Python process used torch AMP")


def test_a_process_without_a_report_is_cannot_verify(monkeypatch):
    monkeypatch.setattr(trace, "_unchecked_reason", lambda reports: None)  # what the others did was checked
    started = [{"pid": 4242, "argv": ["python", "worker.py"]}]
    why = trace.cannot_verify_reason([], started, [])
    assert why == "1 process ended without a report, so their findings are unknown"
    lines = trace.summary_lines([], started, [], [])
    assert f"  findings: none (cannot verify: {why})" in lines
    assert trace.cannot_verify_reason([], [], ["boom"]).startswith("amplint's hook failed in a process")
    assert trace.cannot_verify_reason([], [], []) is None  # and then the summary says "findings: none"
    assert trace.summary_lines([], [], [], [])[-1] == "  findings: none"
