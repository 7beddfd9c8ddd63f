"""The local cluster harness: real ZooKeeper, controller and broker processes on one machine.

What ``replog cluster up``, the pytest fixtures, the chaos runner, the lab and the benchmarks
share: :mod:`harness.local_cluster` (``LocalCluster``), :mod:`harness.process`
(``ProcessHandle``), :mod:`harness.cluster_dir` (the data dir's lock, ``cluster.json``,
``stop_cluster_in``), :mod:`harness.cluster_zookeeper` (starting the cluster's ZooKeeper),
:mod:`harness.cluster_view` (``ClusterView``: the reads of a running cluster's ZooKeeper state,
bounded for chaos, the lab and bench), :mod:`harness.zk_server` and :mod:`harness.zk_ensemble` (a
ZooKeeper server or ensemble from Debian's jar; :mod:`harness.zk_sessions`: session expiry
and chroots), :mod:`harness.cluster_hosts` and :mod:`harness.cluster_security` (``--hosts``
and ``--security mtls``), :mod:`harness.prometheus` (``--prometheus``), :mod:`harness.testing`
(the pytest plugin) and :mod:`harness.polling` (the one deadline/poll loop).
"""
