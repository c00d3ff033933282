"""tandem/processes.py: ports for the parts a launcher or a test starts together must never coincide."""

from __future__ import annotations

import socket

from tandem.processes import free_ports, two_free_ports


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_two_free_ports_skips_a_port_that_is_taken_or_sits_just_below_one(monkeypatch):
    import tandem.processes as processes

    taken = free_ports(2)
    # The kernel handing back a port another part was just given cannot be made to happen on demand: named fake.
    offered = iter([taken[0], taken[1] - 1])
    real = processes.free_port
    monkeypatch.setattr(processes, "free_port", lambda host="127.0.0.1": next(offered, None) or real(host))
    first = two_free_ports(avoid=taken)
    assert first not in (taken[0], taken[1] - 1)
    assert first not in taken and first + 1 not in taken
