from pathlib import Path

from tandem.settings import Settings


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
