"""Files in and out of the core: scenario YAML (the contract), workload profiles, and Kafka's
on-disk replica formats (via kafka-python).  Imports ``emulator`` only."""
