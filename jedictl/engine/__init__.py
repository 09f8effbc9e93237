"""The engine: JEDI's agents and their policies, plain Python, in one room per agent or aggregate.

Rooms, from the bottom layer up (a room may import only rooms below it; `import-linter` enforces it):

    agent       the leased claim-and-handle loop every pass shares, and its PassReport
    storage     replica paths under an endpoint's file:// root, adler32, stage-in/stage-out (no store)
    input       documents, typed fields, safe regexes, work-queue criteria      (pure)
    task        options, definition, spec and PanDA parameters, templates, final-status rules
    catalogs    data catalog and resource catalog
    shares      work queues, global shares, resource types, usage, throttler
    jobs        job states, results, outcomes, reports, dispatcher, retry module, expiry
    brokerage   the Task Broker pass, task and job brokerage, filters, site needs
    commando    operator commands on tasks
    refine, feed, generate, finalize, watch     one room per agent pass
    harvest     pilots on batch systems: policy, the batch interface (local, slurm), the pass
    periodic    task templates with a schedule: the schedule (pure), the templates, the pass that instantiates them
    workqueue   WMCore's WorkQueue: elements per input block, the agents' acquire pass by their slots (pure
                policy), the location update (docs/queue-layers.md)
    views       task and job views, explain, metrics (read only)
    messages    `jedictl listen` (messages -> feed, commands, reports) and the task events published
    pipeline    every agent in order: `jedictl run`
    sim         the pilot simulator and the demo
    pilot       the real executor: `jedictl pilot`

The engine imports the store and never Typer or rich; the store never imports the engine.
"""
