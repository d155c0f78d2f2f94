"""herdless: a Kafka-compatible broker built around consumer-group coordination."""

__version__ = "0.1.0"
