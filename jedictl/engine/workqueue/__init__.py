"""WMCore's WorkQueue (seed 002, peers.md §1.2-1.3; docs/queue-layers.md): work-queue elements per input block,
the global queue agents pull them from by their free slots, the local release to `generate`, and the
periodic location update."""
