"""Share partitions (KIP-932) at their leader: which records of a partition a share group
has in flight, who holds each, and how often each was delivered. Sans-IO."""
