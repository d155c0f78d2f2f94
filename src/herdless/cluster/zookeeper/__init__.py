"""What ClusterStore (cluster/store.py) is made of: the ZooKeeper session and its lease,
watches, transactions, and one part for each family of znodes Kafka keeps there, as
Kafka's KafkaZkClient groups its methods and ZkData its znodes.

client: kazoo logged in, with Kafka's znode ACLs; session: requests, the lease, session
states; watches; transactions: what a failed multi-op means; brokers: the cluster id,
broker registrations, the controller, producer id blocks; topics: assignments, partition
states, deletion; configs: topic, group and user configs with their change
notifications; acls: ACLs and their change notifications; log_dir_events: brokers'
log directory events for the controller.
"""
