from admin.testing import *  # the cluster fixtures (admin/testing.py)
