"""replog's chaos runner (design.md#c10): seeded fault schedules, nemeses, a workload that records
a history, and a Jepsen-style checker over that history.

- ``chaos.schedule``: the schedule, a pure function of (seed, duration, nemeses, topology);
- ``chaos.nemesis``: one small class per fault, each with start/stop/heal, against the real
  processes of a running cluster, read through harness.cluster_view.ClusterView;
  ``chaos.host_nemesis`` (hosts and racks) and ``chaos.zk_nemesis`` (the ZooKeeper ensemble)
  add theirs;
- ``chaos.workload`` and ``chaos.history``: producers (acks=all and acks=1) and consumers whose
  every operation is written to a JSON Lines history;
- ``chaos.checker``: pure checks of a history, each violation naming its property and evidence;
- ``chaos.runner`` and ``chaos.cli``: ``replog chaos --seed N`` (``--matrix FAILURE:TARGET``
  for one cell of the ducktape matrix, ``--cluster DATA_DIR`` against a running cluster:
  ``chaos.attached``); ``chaos.sweep``: many seeds in turn (``make chaos-sweep``);
- ``chaos.lab`` (a package: nemeses, experiments, runner, figures): ``replog lab``.
"""
