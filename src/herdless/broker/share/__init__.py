"""Share groups on the broker: share partitions at their leader, share sessions, and the
persister through which share partitions keep their state."""
