"""The job aggregate: states and transitions, results propagated to files and counters, outcomes (reports,
kills, timeouts), resources, executor reports, the dispatcher, the retry module and job expiry.
"""
