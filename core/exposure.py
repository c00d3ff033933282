"""Whether a listener is reachable beyond this machine, and what must then be set before it may start.

The demo on 127.0.0.1 works with no setup. A bind address beyond loopback (0.0.0.0, a LAN address, a
container's interface) is the internet as far as Tandem knows, so the app needs an API key and the console
needs a password that is not the default, or operator accounts. Each front end calls these at start-up and
refuses to start with one line naming the setting.
"""

from __future__ import annotations

import ipaddress

DEFAULT_CONSOLE_PASSWORD = "tandem"  # the demo's, accepted on loopback only
LOOPBACK_NAMES = ("localhost", "ip6-localhost")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and "localhost"; anything else (0.0.0.0 and :: included) listens beyond this machine."""
    name = (host or "").strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def app_exposure_problem(host: str, has_api_key: bool) -> str:
    """Why the app must not start on ``host`` ("" when it may)."""
    if is_loopback(host) or has_api_key:
        return ""
    return (f"the app would listen on {host}, beyond this machine, with no API key: anyone who can reach it could "
            "chat, read metrics and change the knowledge base. Set TANDEM_API_TOKEN (an admin key) or create keys "
            "with `tandem keys create NAME --scope chat`, or listen on TANDEM_HOST=127.0.0.1")


def console_exposure_problem(host: str, password: str, has_operator_accounts: bool) -> str:
    """Why the console must not start on ``host`` ("" when it may)."""
    if is_loopback(host) or has_operator_accounts or (password and password != DEFAULT_CONSOLE_PASSWORD):
        return ""
    return (f"the console would listen on {host}, beyond this machine, with the default password. Set "
            "TANDEM_CONSOLE_PASSWORD to a password of your own, or add accounts with `tandem operators add NAME`, "
            "or listen on TANDEM_HOST=127.0.0.1")
