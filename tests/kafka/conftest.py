from harness.testing import *  # the cluster fixtures (harness/testing.py)
