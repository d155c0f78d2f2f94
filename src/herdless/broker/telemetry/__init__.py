"""Client telemetry (KIP-714): the client-metrics subscriptions operators configure,
the client instances that ask for them and push their metrics, and those metrics as
the broker exports them on /metrics."""
