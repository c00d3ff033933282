"""`tandem ops alerts|ack` as an operator types them, on a database of the test's own."""

from __future__ import annotations

from typer.testing import CliRunner

from ops import alerts
from storage.tables import utcnow


def test_alerts_says_when_none_are_open_then_lists_acknowledges_and_keeps_one(cli_db):
    from tandem.cli import cli

    runner = CliRunner()
    empty = runner.invoke(cli, ["ops", "alerts"])
    assert empty.exit_code == 0 and empty.output.startswith("no open alerts"), empty.output

    alert = alerts.raise_alert(cli_db, "fallback_rate", "fallback_rate rose to 0.4 (usual 0 ± 0.03)", utcnow())
    listed = runner.invoke(cli, ["ops", "alerts"])
    assert listed.exit_code == 0 and f"#{alert.id} " in listed.output and "fallback_rate rose" in listed.output
    acked = runner.invoke(cli, ["ops", "ack", str(alert.id), "--who", "dana"])
    assert acked.exit_code == 0 and f"acknowledged #{alert.id}" in acked.output
    kept = runner.invoke(cli, ["ops", "alerts"])
    assert f"#{alert.id} " in kept.output and "acknowledged" in kept.output  # listed until the series recovers
    again = runner.invoke(cli, ["ops", "ack", str(alert.id)])
    assert again.exit_code != 0 and f"no open alert #{alert.id}" in again.output
