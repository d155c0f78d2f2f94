"""The internal topic the group coordinator keeps its groups and offsets in, named once
for every layer that needs it (the transaction coordinator adds it to a transaction
that commits offsets; the broker writes markers to it through the groups)."""

OFFSETS_TOPIC = "__consumer_offsets"
