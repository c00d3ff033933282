"""Operations on autopilot: the request log as time series, anomaly alerts learned from its history, and automatic
threshold tuning with guardrails (what-if replay of recent traffic). Runs in the app or as `tandem ops`."""
