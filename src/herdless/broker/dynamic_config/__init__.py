"""Dynamic broker configs: settings changed while brokers run, kept where Kafka keeps them
(rules.py says which; layers.py how they stack; store.py where they live; loggers.py the
log levels of BROKER_LOGGER; reconfigurables.py what each change reaches)."""
