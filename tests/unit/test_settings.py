from pathlib import Path

from core.settings import Settings


def test_env_overrides_and_derived_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("TANDEM_HOME", str(tmp_path))
    monkeypatch.setenv("TANDEM_ROUTE_THRESHOLD", "0.7")
    monkeypatch.setenv("TANDEM_LLM_URL", "http://127.0.0.1:9999/v1")
    settings = Settings()
    assert settings.home == tmp_path.resolve()
    assert settings.db_url == f"sqlite:///{tmp_path.resolve() / 'tandem.db'}"
    assert settings.route_threshold == 0.7
    assert settings.llm_port == 9999


def test_dotenv_file_is_read(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TANDEM_APP_PORT", raising=False)
    Path(".env").write_text("TANDEM_APP_PORT=7999\n")
    assert Settings().app_port == 7999


def test_overload_bounds_agree_with_the_live_policy(monkeypatch):
    """TANDEM_OVERLOAD_EXIT >= ENTER used to pass here and then fail every message; now it is refused at start."""
    import pytest

    from core.errors import TandemError
    from core.policy import Thresholds
    from core.settings import get_settings, reset_settings

    monkeypatch.setenv("TANDEM_OVERLOAD_ENTER", "0.5")
    monkeypatch.setenv("TANDEM_OVERLOAD_EXIT", "0.6")
    reset_settings()
    try:
        with pytest.raises(TandemError, match="OVERLOAD_EXIT.*must be below.*OVERLOAD_ENTER"):
            get_settings()
    finally:
        monkeypatch.delenv("TANDEM_OVERLOAD_ENTER")
        monkeypatch.delenv("TANDEM_OVERLOAD_EXIT")
        reset_settings()
    # every value the settings accept is a valid live policy
    monkeypatch.setenv("TANDEM_OVERLOAD_ENTER", "0.05")
    monkeypatch.setenv("TANDEM_OVERLOAD_EXIT", "0.0")
    reset_settings()
    try:
        assert Thresholds.defaults(get_settings()).overload_enter == 0.05
    finally:
        reset_settings()


def test_unset_thresholds_are_read_from_the_shipped_router_artifact_and_ranges_are_checked_by_the_policy():
    import json

    import pytest
    from pydantic import ValidationError

    from chains.routers.artifacts import SHIPPED_ARTIFACT
    from core.policy import Thresholds
    from core.settings import Settings

    chosen = json.loads(SHIPPED_ARTIFACT.read_text())["evidence"]["thresholds"]
    unset = Thresholds.defaults(Settings(route_threshold=None, rewrite_threshold=None))
    assert (unset.route_threshold, unset.rewrite_threshold) == (chosen["route_threshold"], chosen["rewrite_threshold"])
    assert Thresholds.defaults(Settings(route_threshold=0.5)).route_threshold == 0.5  # a set value wins
    with pytest.raises(ValidationError, match="route_threshold"):
        Thresholds.defaults(Settings(route_threshold=1.5))  # one range check, where the policy is made


def test_an_empty_llm_temperature_means_unset_and_one_out_of_range_is_refused(monkeypatch):
    import pytest
    from pydantic import ValidationError

    monkeypatch.setenv("TANDEM_LLM_TEMPERATURE", "")
    assert Settings().llm_temperature is None  # the engine's default
    monkeypatch.setenv("TANDEM_LLM_TEMPERATURE", "0")
    assert Settings().llm_temperature == 0.0
    monkeypatch.setenv("TANDEM_LLM_TEMPERATURE", "5")
    with pytest.raises(ValidationError, match="less than or equal to 2"):
        Settings()


def test_the_released_policy_reads_no_environment_and_the_settings_policy_does(monkeypatch):
    from core.policy import Thresholds

    monkeypatch.setenv("TANDEM_ROUTE_THRESHOLD", "0.61")
    monkeypatch.setenv("TANDEM_CACHE_SIMILARITY", "0.97")
    released = Thresholds.shipped()
    assert released.route_threshold != 0.61 and released.cache_similarity != 0.97
    from_env = Thresholds.defaults(Settings())
    assert (from_env.route_threshold, from_env.cache_similarity) == (0.61, 0.97)
