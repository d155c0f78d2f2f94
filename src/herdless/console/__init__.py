"""The web console: brokers, topics, consumer groups, their lag over time and rebalances.

It is a Kafka client like the `herdless` commands, and asks the brokers with the
same code (`herdless.admin`'s group, topic, cluster and history queries), so it shows
any Kafka-compatible cluster, herdless or Apache Kafka. Nothing below it (broker/,
coordinator/, storage/...) imports it: `herdless serve --console-port` starts it
beside the broker, in the same process, and it asks that broker over its port.

One sampler thread asks the brokers every interval and keeps the answer; pages
are drawn from the last answer, so the load on the brokers is one client's
however many browsers watch. The message browser alone reads the brokers for each
page it shows (records.py).
"""
