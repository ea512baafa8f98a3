"""deploy/prometheus: the alert rules load (``promtool check rules``), pass their unit tests
(``promtool test rules``: series that fire and series that must not), each alert has a test and
the parts an operator reads, and every metric a rule names is one the running app exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from receiver.service.app import create_app
from tests.adminsupport import admin_settings, deliver
from tests.services import services_required
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import Iterator

PROMETHEUS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = PROMETHEUS / "alerts.yml"
RULE_TESTS = PROMETHEUS / "alerts.test.yml"
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}
DOCUMENTED_IN = ("operating.md", "monitoring.md")
PENDING = {
    "jobhook_field_confidence": "registered by the per-field confidence work (issue 21, item 2)",
}
"""Metrics the rules may name before the app exports them, each with who registers it. Once the
app exports one, it is checked as every other (its type and names must then agree)."""


def promtool() -> str:
    """promtool's path; skip without it (Debian package ``prometheus``), or fail where the
    services are mandatory (``JOBHOOK_REQUIRE_SERVICES=1``, CI: .ci/run installs it)."""
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool not found (apt-get install prometheus)"
        if services_required():
            pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes this test mandatory")
        pytest.skip(reason)
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120
    )


def alerts() -> Iterator[dict[str, Any]]:
    for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]:
        yield from group["rules"]


def test_promtool_accepts_the_rules() -> None:
    checked = run_promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(list(alerts()))} rules found" in checked.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    tested = run_promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_tested_firing_and_has_what_an_operator_reads() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    assert tests["rule_files"] == [RULES.name]
    fired: dict[str, int] = {}
    quiet: dict[str, int] = {}
    for group in tests["tests"]:
        for case in group["alert_rule_test"]:
            counts = fired if case["exp_alerts"] else quiet
            counts[case["alertname"]] = counts.get(case["alertname"], 0) + 1
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))
    for rule in alerts():
        name = rule["alert"]
        assert fired.get(name), f"{name}: no test where it fires"
        assert re.fullmatch(r"\d+m", rule["for"]), f"{name}: `for:` is missing"
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"].strip(), name
        assert rule["annotations"]["description"].strip(), name
    # The seed's three and the operational ones are all there.
    assert set(names) >= {
        "JobhookJobFailureRateHigh", "JobhookJobProcessingSlow", "JobhookFieldConfidenceLow",
        "JobhookDeadDeliveriesRising", "JobhookConfirmationsBehind", "JobhookCircuitOpen",
        "JobhookStoreDown",
    }  # fmt: skip


def rule_metrics() -> set[str]:
    """Every ``jobhook_*`` name in the rules' expressions."""
    return {name for rule in alerts() for name in re.findall(r"\bjobhook_\w+", rule["expr"])}


async def exported(tmp_path: Path) -> dict[str, str]:
    """The sample names the real app's ``/metrics`` can hold, after some traffic: name -> family."""
    extra = (
        '[[handlers]]\nname = "broken"\ntype = "command"\ncommand = ["false"]\nmax_attempts = 1\n'
    )
    app = create_app(admin_settings(tmp_path, token=None, extra=extra))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "job-1")
        await deliver(client, "job-2", status="Failed")
        text = (await client.get("/metrics")).text
    names: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for suffix in SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = family.name
    return names


async def test_every_metric_the_rules_name_is_exported(tmp_path: Path) -> None:
    names = await exported(tmp_path)
    missing = set()
    for metric in sorted(rule_metrics()):
        if metric in names:
            continue
        pending = [family for family in PENDING if metric.startswith(family + "_")]
        owner = PENDING.get(pending[0]) if pending else None
        if owner is not None and not any(n.startswith(pending[0]) for n in names):
            continue  # not registered yet, by whom PENDING says
        missing.add(metric)
    assert not missing, f"rules name metrics jobhook does not export: {sorted(missing)}"
    # The job metrics and the gauges the rules read are all there.
    for metric in ("jobhook_jobs_failed_total", "jobhook_jobs_finished_total",
                   "jobhook_job_processing_seconds_bucket", "jobhook_handler_deliveries_total",
                   "jobhook_circuit_open", "jobhook_store_up"):  # fmt: skip
        assert metric in rule_metrics(), metric
        assert metric in names, metric


async def test_every_exported_metric_is_documented(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    text = "".join((docs / page).read_text(encoding="utf-8") for page in DOCUMENTED_IN)
    # The parser reads some counters' and histograms' _created samples as families of their own.
    families = {f for f in (await exported(tmp_path)).values() if not f.endswith("_created")}
    undocumented = sorted(f for f in families if not re.search(rf"`{f}(_total)?[`{{]", text))
    assert not undocumented, f"not in {DOCUMENTED_IN}: {undocumented}"
