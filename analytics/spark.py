"""The SparkSession ``replog analyze`` and its tests use: small on purpose.

The inputs are small (an hour of 1 s samples from a few processes is ~10^6 rows), so the
defaults meant for clusters cost more than they bring: 200 shuffle partitions become 200 tiny
tasks per join on a 2-core machine, and the UI starts a Jetty server nobody looks at.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# spark-class puts SPARK_CONF_DIR on the JVM's classpath, where log4j2 finds
# log4j2.properties; -Dlog4j2.configurationFile in extraJavaOptions does not reach a driver
# that pyspark launches.
CONF_DIR = Path(__file__).resolve().parent / "spark_conf"


def session(master: str = "local[*]", app: str = "replog-analyze", shuffle_partitions: int = 4,
            extra: dict[str, str] | None = None):
    # Executors (standalone mode) run Python workers only for Python UDFs, which the job has
    # none of; still, point them at this interpreter so a stray one would match the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark's own log4j start-up chatter would bury the one-line errors the CLI promises.
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master(master).appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.default.parallelism", str(shuffle_partitions))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.driver.memory", "1g"))
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    return b.getOrCreate()
