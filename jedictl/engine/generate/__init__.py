"""The Job Generator pass: throttle, task order, claimed files, job brokerage, splitters, job building
and merge jobs.
"""
