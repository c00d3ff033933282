"""Handoff to a person: the conversation's state machine, and the round trip over the HTTP API."""
