"""`tandem demo` (what `make demo` runs): vLLM, the chat app and the console, started together, checked healthy,
and stopped together.

Ctrl-C, SIGTERM and SIGHUP stop every child within seconds (all groups are signalled at once). If this
launcher is killed outright (SIGKILL), the kernel's parent-death signal stops each child, and each child
stops its own children, so nothing is left listening.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from core.errors import TandemError


def run_demo(with_llm: bool = True, exit_when_ready: bool = False) -> int:
    from chains.bootstrap import prepare_storage
    from core.settings import get_settings
    from storage.seed import seed_orders
    from tandem.llm_server import LLMServer
    from tandem.processes import Child, stop_all, wait_http

    settings = get_settings()
    started = time.monotonic()
    # Tables and demo orders here (no models load in the launcher); the app seeds the demo knowledge base.
    db = prepare_storage(settings)
    typer.echo(f"database ready: {db.display_url}; demo orders added: {seed_orders(db)}")
    tandem = str(Path(sys.executable).parent / "tandem")
    logs = settings.home / "logs"
    children: list[Child] = []
    llm = None
    try:
        llm_state = "not started (--no-llm): LLM-bound messages fall back to the small tier"
        if with_llm:
            if wait_http(settings.llm_url.rstrip("/") + "/models", timeout=1, ok_below=300):
                llm_state = f"already running at {settings.llm_url}"
            else:
                typer.echo(f"starting vLLM (CPU) at {settings.llm_url} ...")
                try:
                    llm = LLMServer(settings).start(wait=False)
                    assert llm.child is not None
                    children.append(llm.child)
                except TandemError as exc:
                    llm_state = f"NOT running: {exc}. LLM-bound messages fall back to the small tier"
        app_url = f"http://{settings.host}:{settings.app_port}"
        console_url = f"http://{settings.host}:{settings.console_port}"
        typer.echo(_seed_catalog(tandem))
        typer.echo("starting the chat app and the console (models load first) ...")
        app = Child("app", [tandem, "serve"], logs / "app.log").start()
        console = Child("console", [tandem, "console"], logs / "console-launcher.log").start()
        children += [app, console]
        if not wait_http(app_url + "/healthz", 240, app):
            raise TandemError(f"the chat app did not start ({app.last_line()}); see {logs / 'app.log'}")
        if not wait_http(console_url + "/_stcore/health", 120, console):
            raise TandemError(f"the console did not start ({console.last_line()}); see {logs}")
        if llm is not None:
            try:
                llm.wait_ready(240)
                llm.warm_up()
                llm_state = f"{settings.llm_url} (vLLM, model {llm.model})"
            except TandemError as exc:
                llm_state = f"NOT running: {exc}. LLM-bound messages fall back to the small tier"
        kb_state = _kb_line(app_url)
        typer.echo(f"\nTandem is running (ready in {time.monotonic() - started:.0f} s):")
        typer.echo(f"  chat UI      {app_url}/")
        typer.echo(f"  HTTP API     {app_url}/api/v1/chat   (docs: {app_url}/api/docs)")
        typer.echo(f"  OpenAI API   {app_url}/v1            (models: tandem, tandem-small, tandem-llm)")
        typer.echo(f"  console      {console_url}/   (sign in as 'operator' with TANDEM_CONSOLE_PASSWORD, default 'tandem', "
                   "or with an account from `tandem operators add NAME`)")
        typer.echo(f"  LLM server   {llm_state}")
        typer.echo(f"  knowledge    {kb_state}")
        typer.echo(f"  logs         {logs}\nPress Ctrl-C to stop everything.")
        if exit_when_ready:
            return 0
        while all(child.alive() for child in children if child is not (llm.child if llm else None)):
            time.sleep(1)
        typer.echo("a component stopped; shutting down the rest", err=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        typer.echo("stopping ...")
        stop_all(children)
        typer.echo("stopped.")


def _seed_catalog(tandem: str) -> str:
    """The demo shop's product catalog, ingested before the app starts (idempotent: a second run changes nothing and
    embeds nothing). In a process of its own, as the knowledge base is seeded in the app's: the launcher loads no
    model, and the app opens the catalog's store only once it is complete."""
    import subprocess

    import catalog

    feed = Path(catalog.__file__).resolve().parent / "demo" / "catalog.tsv"
    try:
        done = subprocess.run([tandem, "catalog", "ingest", str(feed)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"demo catalog NOT ingested ({exc.__class__.__name__}): product questions go to the help center and LLM"
    lines = (done.stdout or done.stderr or "").strip().splitlines()
    if done.returncode != 0:
        return f"demo catalog NOT ingested: {lines[-1] if lines else done.returncode}"
    return f"demo catalog: {lines[-1] if lines else 'ingested'}"


def _kb_line(app_url: str) -> str:
    import httpx

    try:
        health = httpx.get(app_url + "/healthz", timeout=10).json()
        return f"{health['kb_entries']} answers (version {health['kb_version']}); problems: " \
               f"{'; '.join(health.get('problems') or []) or 'none'}"
    except (httpx.HTTPError, ValueError, KeyError):
        return "unknown (see the app log)"


def register(cli: typer.Typer) -> None:
    @cli.command("demo")
    def demo(llm: bool = typer.Option(True, help="Start the local vLLM server (CPU) too."),
             exit_when_ready: bool = typer.Option(False, help="Stop again once everything answers (smoke test).")
             ) -> None:
        """Start vLLM, the chat app (:7860) and the console (:8501); Ctrl-C or SIGTERM stops all."""
        from tandem.processes import exit_on_signals

        exit_on_signals()
        raise typer.Exit(run_demo(with_llm=llm, exit_when_ready=exit_when_ready))
