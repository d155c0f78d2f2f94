"""Wire format: framing, headers, API messages and record batches. Imports nothing of herdless."""
