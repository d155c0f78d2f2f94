"""Security without I/O: listeners and their protocols, principals, SASL mechanisms, SCRAM
credentials and the ACL authorizer's decisions, as Kafka defines them.

Nothing here opens a socket or a file or reads the clock: broker/ feeds it what arrived
and the time, cluster/ and broker/ keep what it decides on (credentials, ACLs).
"""
