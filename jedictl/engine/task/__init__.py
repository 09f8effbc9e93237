"""The task as submitted and as stored: options (one declaration per option), the normalised definition,
jedictl's spec and PanDA's task parameters, splitRule, submission, incexec, job parameter templates and
the final-status rules. Pure except `submission`, which registers a task through the store.
"""
