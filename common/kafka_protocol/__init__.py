"""Kafka's wire protocol: primitive types, headers and the messages replog's Kafka listener
serves (broker/kafka_listener.py), from Kafka's message JSON definitions."""
