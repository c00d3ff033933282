"""Operator console: a Streamlit app for routing stats, the request log, threshold tuning, what-if replay, the
knowledge base, router retraining, alerts and the autopilot."""
