"""The Watch Dog pass and its pure policy: leases, pending tasks, throttling, boosts, job timeouts, job reassignment.
"""
