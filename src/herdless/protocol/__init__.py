"""Wire format: framing, headers, API keys and messages, record batches, and config values
read from the text the protocol carries them in. Imports nothing of herdless."""
