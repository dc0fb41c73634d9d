#!/usr/bin/env python3
"""kube-sim over raw HTTP: discovery, CRUD semantics, subresources, GC, finalizers, pagination,
watch (resume, bookmarks, 410), the simulated controllers, faults, auth/TLS, and the same server
through the official Kubernetes Python client. The cases live in cases_*.py; run one class with
`test_kube_sim.py WatchTest`."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cases_api import *  # noqa: E402,F401,F403
from cases_clients import *  # noqa: E402,F401,F403
from cases_lifecycle import *  # noqa: E402,F401,F403
from cases_watch import *  # noqa: E402,F401,F403

if __name__ == "__main__":
    unittest.main(verbosity=2)
