"""The group coordinator (Kafka's classic group protocol): a pure core (core.py) driven by
events, with the `__consumer_offsets` record formats (records.py). docs/groups.md describes it
and what is still to be wired."""
