from harness.testing import *  # noqa: F403 - the cluster fixtures (harness/testing.py)
