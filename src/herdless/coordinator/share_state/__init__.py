"""Share groups' durable partition state (KIP-932): what a share partition's leader keeps
in `__share_group_state` through the share coordinator, in Kafka's vocabulary."""
