"""The example alert rules and Grafana dashboard the operators' guide links: both parse, and
every broker metric they query is one a broker exposes (a renamed metric would otherwise leave
an alert that can never fire)."""

from __future__ import annotations

import json
import re

import yaml

from queen_timers.metrics import Metrics
from queen_webhooks.metrics import WebhookMetrics

from .scan import DOCS

ALERTS = DOCS / "operators" / "alerts.yml"
DASHBOARD = DOCS / "operators" / "grafana-dashboard.json"
_METRIC = re.compile(r"\bqueen_[a-z0-9_]+")
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def _exposed() -> set[str]:
    metrics = Metrics()
    WebhookMetrics(metrics.registry)  # the webhook delivery registers into the broker's registry
    return {
        f.name + suffix
        for f in metrics.registry.collect()
        for suffix in _SUFFIXES.get(f.type, ("",))
    }


def _alert_exprs() -> list[str]:
    doc = yaml.safe_load(ALERTS.read_text())
    rules = [r for group in doc["groups"] for r in group["rules"]]
    assert rules and all({"alert", "expr"} <= r.keys() for r in rules)
    return [r["expr"] for r in rules]


def _dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", ())]
    assert exprs
    return exprs


def test_alert_rules_query_only_exposed_metrics():
    exposed = _exposed()
    used = {m for e in _alert_exprs() for m in _METRIC.findall(e)}
    assert used and used <= exposed, sorted(used - exposed)


def test_dashboard_queries_only_exposed_metrics():
    exposed = _exposed()
    used = {m for e in _dashboard_exprs() for m in _METRIC.findall(e)}
    assert used and used <= exposed, sorted(used - exposed)


def test_dashboard_shows_every_timer_metric():
    used = {m for e in _dashboard_exprs() for m in _METRIC.findall(e)}
    families = {f.name for f in Metrics().registry.collect()}
    shown = {f for f in families if any(u.startswith(f) for u in used)}
    assert shown == families, sorted(families - shown)


def test_the_guide_links_both_files():
    guide = (DOCS / "guides" / "operators.md").read_text()
    assert "../operators/alerts.yml" in guide and "../operators/grafana-dashboard.json" in guide
