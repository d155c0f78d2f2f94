"""Wall-clock milliseconds: the broker owns time, the layers below take it as an argument."""

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
