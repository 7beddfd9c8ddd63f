from admin.testing import *  # noqa: F403 - the cluster fixtures (admin/testing.py)
