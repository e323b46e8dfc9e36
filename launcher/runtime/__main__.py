"""`python -m launcher.runtime COMMAND`: the cluster's own door (launcher.runtime.commands)."""

import sys

from launcher.runtime.commands import main

sys.exit(main())
