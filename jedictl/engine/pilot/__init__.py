"""`jedictl pilot`: a real executor, PanDA's pilot reduced to what a cluster needs.

    codes      the pilot error codes it reports (PanDA's pilot/common/errorcodes.py numbers)
    payload    the argument vector, container wrapping, starting and stopping the payload's process group
    monitor    CPU time and memory of the payload's process tree, from /proc
    staging    inputs in from their endpoints, outputs and the log out to their destinations
    report     the ExecutorReport of a finished or failed job (pure)
    heartbeat  the background thread: heartbeats, commands to the pilot, the lost-heartbeat rule
    job        one job from dispatch to an accepted report
    pilot      the slots, the job budget, signals, the pilots row
"""
