"""Operator console: a Streamlit app for routing stats, the request log, threshold tuning and what-if replay."""
