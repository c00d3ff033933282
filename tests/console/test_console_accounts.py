"""Operator accounts: bcrypt-hashed passwords, the signed-in account as the audit author, the sign-in throttle per
name and per client address (also under parallel attempts), the refusal to expose the default password, and the
`tandem operators` CLI. All against the session's real SQLite database; the console through Streamlit's AppTest."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time

import bcrypt
import pytest
from sqlmodel import select
from typer.testing import CliRunner

from console import accounts, auth
from storage import policy_store
from storage.tables import ConsoleLogin, Operator
from tandem.processes import free_port
from tests.conftest import VENV_BIN, run_cli
from tests.console.conftest import ALICE_PASSWORD, new_app, sign_in

BOB_PASSWORD = "bob-console-pw"


@pytest.fixture()
def settings_env(monkeypatch):
    """Set TANDEM_* variables for one test; the settings are read again now and after the test."""
    from core.settings import reset_settings

    def apply(**values: str | None) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        reset_settings()

    yield apply
    monkeypatch.undo()
    reset_settings()


def _failures(db, column, value: str) -> int:
    with db.session() as session:
        return len(session.exec(select(ConsoleLogin).where(column == value)
                                .where(ConsoleLogin.ok == False)).all())  # noqa: E712


# --- accounts -----------------------------------------------------------------------------------------------------
def test_an_account_stores_a_bcrypt_hash_not_the_password_and_signs_in_only_with_its_password(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    with db.session() as session:
        stored = session.get(Operator, "alice").password_bcrypt
    assert stored.startswith("$2b$") and ALICE_PASSWORD not in stored
    assert bcrypt.checkpw(ALICE_PASSWORD.encode(), stored.encode())

    wrong = auth.sign_in(db, "alice", "not-alices-password")
    assert (wrong.ok, wrong.message) == (False, "Wrong name or password.")
    right = auth.sign_in(db, "alice", ALICE_PASSWORD)
    assert (right.ok, right.operator, right.via) == (True, "alice", "account")


def test_empty_and_short_passwords_are_refused_with_a_reason_and_store_nothing(db, clean_logins):
    with pytest.raises(accounts.AccountError, match="empty"):
        accounts.add_operator(db, "alice", "")
    with pytest.raises(accounts.AccountError, match="too short"):
        accounts.add_operator(db, "alice", "7-chars")
    assert accounts.list_operators(db) == []
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    with pytest.raises(accounts.AccountError, match="too short"):
        accounts.set_password(db, "alice", "short")
    assert auth.sign_in(db, "alice", ALICE_PASSWORD).ok  # the refused change left the password as it was
    assert not auth.sign_in(db, "alice", "").ok


def test_the_shared_password_signs_in_only_as_operator_and_only_while_no_account_exists(db, clean_logins):
    shared = auth.sign_in(db, "operator", "tandem")
    assert (shared.ok, shared.operator, shared.via) == (True, "operator", "shared")
    assert not auth.sign_in(db, "alice", "tandem").ok
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    assert not auth.sign_in(db, "operator", "tandem").ok


def test_an_empty_shared_password_never_signs_in(db, clean_logins, settings_env):
    assert not auth.sign_in(db, "operator", "").ok  # typed empty, the default configured
    settings_env(TANDEM_CONSOLE_PASSWORD="")  # configured empty, typed empty
    assert not auth.sign_in(db, "operator", "").ok


# --- the console: the author is the account ------------------------------------------------------------------------
def test_a_threshold_saved_on_the_tuning_page_has_the_signed_in_account_as_author(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    at = new_app().run()
    assert [t.value for t in at.text_input] == ["", ""]  # with accounts, no name is filled in
    sign_in(at, password=ALICE_PASSWORD, operator="alice")
    assert not at.exception and not at.error
    before = policy_store.current(db)
    at = at.switch_page("views/tuning.py").run()
    at.number_input(key="tune_cache_similarity").set_value(round(before.cache_similarity - 0.01, 3))
    at.text_input(key="tune_reason").set_value("author test")
    next(b for b in at.button if b.label == "Save new version").click().run()
    try:
        assert not at.exception and not at.error
        newest = policy_store.history(db, limit=1)[0]
        assert (newest.author, newest.reason) == ("alice", "author test")
        assert "Signed in as **alice**" in [c.value for c in at.sidebar.caption]
    finally:
        policy_store.save(db, {"cache_similarity": before.cache_similarity}, "test", "undo author test")


def test_the_name_field_does_not_sign_in_with_another_accounts_password(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    at = sign_in(new_app().run(), password=ALICE_PASSWORD, operator="mallory")
    assert [e.value for e in at.error] == ["Wrong name or password."] and not at.sidebar.children


def test_a_disabled_account_is_signed_out_at_its_next_page_load(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    at = sign_in(new_app().run(), password=ALICE_PASSWORD, operator="alice")
    assert at.sidebar.children
    accounts.set_disabled(db, "alice")
    at.run()
    assert not at.sidebar.children and at.text_input(key="sign_in_password")
    assert not auth.sign_in(db, "alice", ALICE_PASSWORD).ok


# --- throttle per name and per address -----------------------------------------------------------------------------
def test_failures_on_one_name_lock_that_name_but_not_another_name(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    accounts.add_operator(db, "bob", BOB_PASSWORD)
    for i in range(auth.FREE_FAILURES):  # every guess from another address: only the name's count grows
        auth.sign_in(db, "alice", f"guess-{i}-wrong", address=f"198.51.100.{i}")
    locked = auth.sign_in(db, "alice", ALICE_PASSWORD, address="192.0.2.1")
    assert not locked.ok and locked.message.startswith("Too many failed sign-ins")
    assert auth.sign_in(db, "bob", BOB_PASSWORD, address="192.0.2.2").ok


def test_failures_from_one_address_lock_that_address_but_not_another_address(db, clean_logins):
    accounts.add_operator(db, "bob", BOB_PASSWORD)
    for i in range(auth.FREE_FAILURES):  # a different (unknown) name each time: only the address's count grows
        auth.sign_in(db, f"guess-{i}", "some-wrong-password", address="203.0.113.9")
    locked = auth.sign_in(db, "bob", BOB_PASSWORD, address="203.0.113.9")
    assert not locked.ok and locked.message.startswith("Too many failed sign-ins")
    assert auth.sign_in(db, "bob", BOB_PASSWORD, address="203.0.113.10").ok


@pytest.mark.parametrize("shared", ["name", "address"])
def test_parallel_wrong_attempts_record_at_most_free_failures_before_the_lock(db, clean_logins, shared):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    attempts = 3 * auth.FREE_FAILURES
    start = threading.Barrier(attempts)

    def guess(i: int) -> None:
        name = "alice" if shared == "name" else f"guess-{i}"
        address = "203.0.113.50" if shared == "address" else f"198.51.100.{i}"
        start.wait()
        auth.sign_in(db, name, f"wrong-guess-{i}", address=address)

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    column, value = ((ConsoleLogin.operator, "alice") if shared == "name" else (ConsoleLogin.address, "203.0.113.50"))
    assert _failures(db, column, value) == auth.FREE_FAILURES
    name, address = ("alice", "192.0.2.7") if shared == "name" else ("alice", "203.0.113.50")
    assert auth.locked_for_s(db, name, address) > 0


def test_an_unknown_name_takes_about_as_long_to_refuse_as_a_wrong_password(db, clean_logins):
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    accounts.verify(db, "nobody", "warm-up")  # the dummy hash is made once per process; not part of the timing

    def seconds(name: str, i: int) -> float:
        began = time.perf_counter()
        assert not auth.sign_in(db, name, f"wrong-{i}-password", address=f"198.51.100.{i}").ok
        return time.perf_counter() - began

    known = statistics.median(seconds("alice", i) for i in range(3))
    unknown = statistics.median(seconds(f"nobody-{i}", 10 + i) for i in range(3))
    assert known > 0.02  # a real bcrypt check ran
    assert 0.5 < unknown / known < 2.0, (known, unknown)


# --- no default password beyond loopback ---------------------------------------------------------------------------
def test_the_console_page_refuses_0_0_0_0_with_the_default_password_and_shows_sign_in_once_an_account_exists(
        db, clean_logins, settings_env):
    settings_env(TANDEM_HOST="0.0.0.0", TANDEM_CONSOLE_PASSWORD=None)
    at = new_app().run()
    assert not at.exception
    assert "will not start" in at.error[0].value and "0.0.0.0" in at.error[0].value
    assert not at.text_input  # no sign-in form
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    at = new_app().run()
    assert not at.exception and not at.error
    assert at.text_input(key="sign_in_password")


@pytest.mark.parametrize("password", ["tandem", ""])
def test_tandem_console_exits_non_zero_on_0_0_0_0_with_the_default_or_an_empty_password(db, clean_logins, password):
    done = run_cli("console", "--host", "0.0.0.0", "--port", str(free_port()),
                   env={"TANDEM_CONSOLE_PASSWORD": password}, timeout=120)
    assert done.returncode != 0
    assert "beyond this machine, with the default password" in done.stderr
    assert "tandem operators add NAME" in done.stderr
    assert "console: http" not in done.stdout  # it stopped before starting Streamlit


def test_an_account_or_an_own_password_lifts_the_refusal_and_loopback_never_has_it(db, clean_logins, settings_env):
    settings_env(TANDEM_CONSOLE_PASSWORD=None)
    assert auth.exposure_problem(db, "127.0.0.1") == ""
    assert auth.exposure_problem(db, "0.0.0.0")
    settings_env(TANDEM_CONSOLE_PASSWORD="our-own-console-secret")
    assert auth.exposure_problem(db, "0.0.0.0") == ""
    settings_env(TANDEM_CONSOLE_PASSWORD=None)
    accounts.add_operator(db, "alice", ALICE_PASSWORD)
    assert auth.exposure_problem(db, "0.0.0.0") == ""


# --- the CLI -------------------------------------------------------------------------------------------------------
def _tandem(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "tandem"), *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_tandem_operators_add_list_and_remove_with_the_password_on_stdin(db, clean_logins):
    added = _tandem("operators", "add", "carol", "--password-stdin", stdin="carol-console-pw\n")
    assert added.returncode == 0, added.stderr
    assert "carol-console-pw" not in added.stdout + added.stderr
    assert auth.sign_in(db, "carol", "carol-console-pw").ok
    listed = _tandem("operators", "list")
    assert listed.returncode == 0 and listed.stdout.split()[0] == "carol" and "enabled" in listed.stdout
    removed = _tandem("operators", "remove", "carol")
    assert removed.returncode == 0, removed.stderr
    assert accounts.list_operators(db) == []


def test_tandem_operators_add_refuses_a_short_password_with_exit_code_2(db, clean_logins):
    done = _tandem("operators", "add", "carol", "--password-stdin", stdin="short\n")
    assert done.returncode == 2 and "too short" in done.stderr
    assert accounts.list_operators(db) == []


def test_tandem_operators_add_asks_for_the_password_twice_without_echoing_it(db, clean_logins):
    from tandem.cli import cli

    result = CliRunner().invoke(cli, ["operators", "add", "dave"], input="dave-console-pw\ndave-console-pw\n")
    assert result.exit_code == 0, result.output
    assert "Password:" in result.output and "Repeat for confirmation:" in result.output
    assert "dave-console-pw" not in result.output
    assert auth.sign_in(db, "dave", "dave-console-pw").ok
