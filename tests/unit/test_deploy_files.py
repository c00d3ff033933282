"""The deployment files under deploy/ (compose, nginx, Kubernetes, Prometheus) stay consistent with the code:
they parse, name only real settings, wire the app to the shared services, and alert only on metrics that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from core.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
YAML_FILES = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
TEXT_FILES = sorted(p for p in DEPLOY.rglob("*") if p.is_file())
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "info": ("_info",)}


def _load(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _rules() -> list[dict]:
    (doc,) = _load(DEPLOY / "prometheus" / "tandem-alerts.yaml")
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _exported_metric_names() -> set[str]:
    """Sample names the app can export; labelled metrics have no samples until first used, so also by type."""
    from prometheus_client import REGISTRY

    import chains.metrics  # noqa: F401  (registers the metrics)
    import ops.alerts  # noqa: F401

    names: set[str] = set()
    for metric in REGISTRY.collect():
        names.update(sample.name for sample in metric.samples)
        names.update(metric.name + suffix for suffix in SUFFIXES.get(metric.type, ("",)))
    return names


def test_deploy_has_the_expected_yaml_files():
    relative = {str(p.relative_to(DEPLOY)) for p in YAML_FILES}
    assert {"compose.yaml", "k8s/app.yaml", "k8s/console.yaml", "k8s/vllm-values.yaml",
            "prometheus/tandem-alerts.yaml", "prometheus/prometheus.yml"} <= relative


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_file_parses(path):
    assert _load(path), f"{path} has no YAML documents"


def test_every_tandem_env_name_in_deploy_is_a_setting():
    unknown = {}
    for path in TEXT_FILES:
        for name in set(re.findall(r"TANDEM_[A-Z0-9_]+", path.read_text())):
            if name.removeprefix("TANDEM_").lower() not in Settings.model_fields:
                unknown.setdefault(name, []).append(str(path.relative_to(DEPLOY)))
    assert not unknown, f"names that are no field of core.settings.Settings: {unknown}"


def test_compose_has_all_services_and_wires_the_app_to_them():
    (compose,) = _load(DEPLOY / "compose.yaml")
    assert "version" not in compose
    services = compose["services"]
    assert {"redis", "postgres", "chroma", "vllm", "app", "console", "nginx"} <= set(services)
    app_env = services["app"]["environment"]
    for name, host in [("TANDEM_REDIS_URL", "redis"), ("TANDEM_DATABASE_URL", "postgres"),
                       ("TANDEM_CHROMA_URL", "chroma"), ("TANDEM_LLM_URL", "vllm")]:
        assert host in app_env.get(name, ""), f"app's {name} does not point at the {host} service"
    assert services["app"]["deploy"]["replicas"] >= 2
    assert "priority" in services["vllm"]["command"]


def test_k8s_app_file_has_deployment_service_and_autoscaler():
    kinds = {doc["kind"] for doc in _load(DEPLOY / "k8s" / "app.yaml")}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler"} <= kinds


def test_alert_rules_are_complete_and_use_only_exported_metrics():
    rules = _rules()
    assert len(rules) >= 5
    for rule in rules:
        assert rule.get("expr") and "for" in rule and rule.get("annotations", {}).get("summary"), rule.get("alert")
    exported = _exported_metric_names()
    used = {name for rule in rules for name in re.findall(r"\btandem_[a-z0-9_]+", rule["expr"])}
    assert used, "no rule uses a tandem_ metric"
    assert not used - exported, f"rules use metrics the app does not export: {sorted(used - exported)}"


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_nginx_accepts_the_config(tmp_path):
    conf = (DEPLOY / "nginx.conf").read_text()
    assert "app:7860" in conf
    path = tmp_path / "nginx.conf"
    path.write_text(conf.replace("app:7860", "127.0.0.1:7860"))  # the compose service name does not resolve here
    result = subprocess.run(["nginx", "-t", "-c", str(path), "-p", str(tmp_path),
                             "-g", f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
