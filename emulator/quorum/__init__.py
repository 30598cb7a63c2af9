"""The metadata-quorum family: KRaft's own Raft replication (KIP-595, KIP-853, KIP-996) as Kafka's
raft/ module runs it (docs/quorum.md).  ``QUORUM`` (``family``) is the family the engines use."""
