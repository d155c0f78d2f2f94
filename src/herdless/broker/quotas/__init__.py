"""Client quotas (KIP-13, KIP-55, KIP-124): who is limited to what, how fast each client
goes, and how long it is throttled."""
