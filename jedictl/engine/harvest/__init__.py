"""`jedictl harvest`: PanDA Harvester's job -- keep just enough pilots queued and running at each site
with a batch system, and follow them to their end (docs/executing.md).

policy (pure: how many pilots, what a batch state means, when a site's pilots count as failing),
batch (the interface: submit, status, cancel), local and slurm (its implementations), wrapper (the
local batch job), harvester (the pass).
"""
