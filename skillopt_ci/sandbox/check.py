"""``python -m skillopt_ci.sandbox.check``: whether commands can be isolated on this machine.

Prints one line (``isolation: bwrap`` or ``isolation: none (why)``) and exits 0 when bubblewrap
gives the whole boundary here, 1 when it does not. The Action runs it after installing
bubblewrap, so a runner without isolation says so in the job log before any suite runs.
"""

from __future__ import annotations

import sys

from skillopt_ci.sandbox.isolation import isolation, why_not_isolated


def main() -> int:
    how = isolation()
    if how == "bwrap":
        print("isolation: bwrap")
        return 0
    print(f"isolation: {how} ({why_not_isolated()})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
