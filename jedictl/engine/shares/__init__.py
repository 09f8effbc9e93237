"""Scheduling dimensions: work queues, global shares and their fair-share arithmetic, resource types,
the usage the generator and dispatcher order by, and the throttler.
"""
