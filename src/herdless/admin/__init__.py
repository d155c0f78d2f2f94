"""The admin client that the `herdless` commands and the web console share.

An ordinary Kafka client (kafka-python) and what it reads from the brokers:
groups with their members, offsets and lag; topics with their partitions;
the cluster's brokers and health; the rebalance history. Nothing here prints,
exits or draws: a failure is an AdminError carrying its one-line reason, which
cli/ turns into its `error:` line and the console shows on its page.
"""
