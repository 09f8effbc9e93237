"""The EXAMPLES of every command: shown under its `--help` and in its man page.

Keyed by the command's path without the program's name (`"task list"`; `""` is the program itself).
Every example is a real invocation: tests/test_help.py parses each one against the command tree, and
runs those marked `reads_only` against the store `jedictl demo` builds (from the repository's top
directory, where the `examples/` files are), checking that they exit 0 and change nothing. Task ids,
sites and datasets in the read-only examples are the demo's.
"""

from __future__ import annotations

from typing import NamedTuple


class Example(NamedTuple):
    what: str
    command: str
    reads_only: bool = False


E = Example

#: Where the JEDI words of the output are explained (the program's `--help`, README, jedictl(1)).
GLOSSARY = "docs/glossary.md"
GLOSSARY_NOTE = (f"Words of JEDI in the output (scout, avalanche, toabort, gshare, splitRule, HS06, nucleus, ...) are "
                 f"explained in {GLOSSARY}. Each command has a man page: jedictl-COMMAND(1).")

EXAMPLES: dict[str, tuple[Example, ...]] = {
    "": (
        E("Build a small grid and run every agent until its tasks end", "jedictl demo"),
        E("Look at the tasks the demo left", "jedictl --db jedictl-demo.db task list"),
        E("One pass of every agent, from cron", "jedictl run --once -q"),
    ),
    # Agents, in pipeline order.
    "submit": (
        E("Check PanDA task parameters and print the task jedictl would store", "jedictl submit --dry-run examples/panda-taskparams/prun_files.json", True),
        E("Register a task for user alice at priority 900", "jedictl submit examples/panda-taskparams/prun_noinput.json --user alice --priority 900"),
        E("Register a task that waits for task 12 to end", "jedictl submit examples/panda-taskparams/prun_files.json --parent 12 -o json"),
        E("Submit it again once it has ended: its failed and new files run, with the new sandbox (prun --useNewCode)",
          "jedictl submit examples/panda-taskparams/prun_files.json --use-new-code"),
        E("A new task with the outDS of a broken one", "jedictl submit examples/panda-taskparams/prun_files.json --allow-task-duplication"),
    ),
    "refine": (
        E("One pass of the Task Refiner", "jedictl refine"),
        E("Refine at most 10 tasks and print the report as JSON", "jedictl refine --limit 10 -o json"),
    ),
    "feed": (
        E("One pass of the Contents Feeder", "jedictl feed"),
        E("Feed every minute, each pass's items listed", "jedictl feed --loop 60 -v"),
    ),
    "broker": (
        E("Choose a nucleus for the tasks in assigning", "jedictl broker"),
        E("The same draw every time", "jedictl broker --seed 1"),
    ),
    "generate": (
        E("One pass of the Job Generator", "jedictl generate"),
        E("Make jobs for at most 5 tasks, the throttle ignored", "jedictl generate --limit 5 --no-throttle"),
    ),
    "harvest": (
        E("What harvest would submit and cancel, nothing done", "jedictl harvest --dry-run", True),
        E("Keep pilots at MWT2 as local processes", "jedictl harvest --site MWT2 --batch local"),
        E("Harvest every 2 minutes, quiet unless something fails", "jedictl harvest --loop 120 -q"),
    ),
    "finalize": (
        E("One pass of the Post Processor", "jedictl finalize"),
        E("Finalize at most 20 tasks and print the report as JSON", "jedictl finalize --limit 20 -o json"),
    ),
    "watch": (
        E("One pass of the Watch Dog", "jedictl watch"),
        E("Watch every 5 minutes, quiet unless something fails", "jedictl watch --loop 300 -q"),
    ),
    "listen": (
        E("Listen to the broker of the configuration (messages.broker_url) until interrupted", "jedictl listen"),
        E("Act on the messages waiting now, then exit (for cron)", "jedictl listen --once -q"),
        E("Another broker and queue; stop after 100 messages", "jedictl listen --broker amqp://jedi:secret@mq.example.org:5672/%2F --queue panda.jedi --max-messages 100"),
    ),
    "run": (
        E("Every agent once, for cron (mail only on failure)", "jedictl run --once -q"),
        E("Only refine, feed and generate, with a fixed seed", "jedictl run --agents refine,feed,generate --seed 1"),
        E("Run every minute with Prometheus metrics and JSON logs", "jedictl run --loop 60 --metrics-file /var/lib/node_exporter/textfile/jedictl.prom --log-format json"),
    ),
    "demo": (
        E("The demo in ./jedictl-demo.db, with a live display on a terminal", "jedictl demo"),
        E("Another run of the pilots' failures, without pauses, as JSON", "jedictl demo --seed 7 --pace 0 -o json"),
        E("One small task run for real: files, payload and pilot processes", "jedictl demo --execute"),
    ),
    "kill": (
        E("Kill task 12, saying why", "jedictl kill 12 --comment 'wrong input dataset'"),
    ),
    "retry": (
        E("Retry task 12 on its unsuccessful inputs", "jedictl retry 12"),
        E("The same, allowing each input 10 attempts", "jedictl retry 12 --max-attempt 10"),
    ),
    "simulate": (
        E("Play pilots at every site with activated jobs", "jedictl simulate --seed 1"),
        E("20 jobs at MWT2, 30 % of them failing out of memory", "jedictl simulate --site MWT2 --jobs 20 --failure-rate 0.3 --error pilot:1212"),
    ),
    "pilot": (
        E("Run MWT2's activated jobs, then exit", "jedictl pilot --site MWT2 --once"),
        E("Four payloads at a time, 100 jobs in all, work directories kept", "jedictl pilot --site MWT2 --slots 4 --jobs 100 --workdir /scratch/jedictl --keep-workdir"),
    ),
    "split": (
        E("Two files per job with WMCore's FileBased", "jedictl split --algorithm FileBased --param files_per_job=2 examples/files.json", True),
        E("The jobs JEDI's rules would make, as JSON", "jedictl split -a jedi -p nFilesPerJob=2 examples/files.json -o json", True),
    ),
    "check": (
        E("Check the store's invariants", "jedictl check", True),
        E("Also: no agent runs now, so no task may be leased", "jedictl check --no-live-passes -o json", True),
        E("Also: the process host1:4242 died; it may hold no lease", "jedictl check --dead-owner host1:4242"),
    ),
    # Inspection.
    "task list": (
        E("The newest tasks", "jedictl task list", True),
        E("Tasks that are running or scouting", "jedictl task list --status running --status scouting", True),
        E("The 10 newest tasks of user demo, as JSON", "jedictl task list --user demo --limit 10 -o json", True),
        E("The instances of a periodic template", "jedictl task list --template hc.test.CERN-PROD_GRID"),
    ),
    "task show": (
        E("A task: options, resources, datasets, jobs and history", "jedictl task show 1", True),
        E("Its options as a PanDA splitRule string", "jedictl task show 2 --split-rule", True),
    ),
    "task kill": (
        E("Kill task 12", "jedictl task kill 12 --comment 'superseded by task 14'"),
    ),
    "task retry": (
        E("Retry task 12, up to 10 attempts per input", "jedictl task retry 12 --max-attempt 10"),
    ),
    "task finish": (
        E("Finish task 12 now: its jobs are killed", "jedictl task finish 12"),
        E("Finish task 12 once its running jobs have ended", "jedictl task finish 12 --soft --comment 'enough statistics'"),
    ),
    "task incexec": (
        E("Retry task 12 with 5 files per job and its scouts again", "echo '{nFilesPerJob: 5}' | jedictl task incexec 12 - --rescout"),
        E("Retry task 12 with the parameters in a file", "jedictl task incexec 12 changes.yaml"),
    ),
    "task pause": (
        E("Pause task 12", "jedictl task pause 12 --comment 'site downtime'"),
    ),
    "task resume": (
        E("Resume task 12", "jedictl task resume 12"),
    ),
    "task avalanche": (
        E("End task 12's scouting now", "jedictl task avalanche 12"),
    ),
    "task reassign": (
        E("Run task 12's queued jobs at MWT2", "jedictl task reassign 12 --site MWT2"),
        E("Send task 12's outputs to another nucleus", "jedictl task reassign 12 --nucleus CERN-PROD"),
    ),
    "task settle": (
        E("Make the finishing tasks whose jobs have ended passed", "jedictl task settle"),
        E("Only tasks 12 and 14", "jedictl task settle 12 14"),
    ),
    "jobs list": (
        E("The jobs of task 5", "jedictl jobs list --task 5", True),
        E("Failed jobs at BNL_PROD", "jedictl jobs list --status failed --site BNL_PROD", True),
    ),
    "jobs show": (
        E("A job by its id", "jedictl jobs show 150", True),
        E("Job 3 of task 5", "jedictl jobs show 5.3 -o yaml", True),
    ),
    "jobs dispatch": (
        E("An executor at MWT2 takes one job", "jedictl jobs dispatch --site MWT2 -o json"),
        E("Up to 4 multi-core jobs needing at most 8 GB", "jedictl jobs dispatch --site MWT2 --count 4 --resource-type MCORE --memory 8000 -o json"),
    ),
    "jobs heartbeat": (
        E("Jobs 4711 and 4712 are running", "jedictl jobs heartbeat 4711 4712"),
        E("Job 4711, attempt 2, is copying its outputs", "jedictl jobs heartbeat 4711 --status transferring --attempt 2"),
        E("Heartbeats as JSON lines", "jedictl jobs heartbeat --from beats.jsonl -o json"),
    ),
    "jobs report": (
        E("Final reports as JSON lines (docs/executor-protocol.md)", "jedictl jobs report reports.jsonl"),
        E("One report from stdin", "echo '{\"job_id\": 4711, \"status\": \"finished\", \"attempt_nr\": 1}' | jedictl jobs report -"),
    ),
    "jobs events report": (
        E("Event ranges an executor processed, as JSON lines (docs/event-service.md)", "jedictl jobs events report ranges.jsonl"),
        E("One range finished, with its pre-merged file",
          "echo '{\"event_id\": 17, \"job_id\": 4711, \"status\": \"finished\", \"output_lfn\": \"EVNT.01.root.0-99.es\"}' | jedictl jobs events report -"),
    ),
    "jobs kill": (
        E("Kill two jobs", "jedictl jobs kill 4711 4712"),
        E("Force-kill every unfinished job of task 12", "jedictl jobs kill --task 12 --code 9"),
        E("Kill Ganga's subjobs 0 and 1 of task 12 (jobs 12.1 and 12.2), stopping at the first refused",
          "jedictl jobs kill --task 12 --subjob 0 --subjob 1 --no-keep-going"),
    ),
    "jobs resubmit": (
        E("Resubmit job 3 of task 12, whose input ran out of attempts", "jedictl jobs resubmit 12.3"),
        E("Resubmit every failed subjob of task 12, stopping at the first refused", "jedictl jobs resubmit --task 12 --no-keep-going"),
    ),
    "jobs copy": (
        E("The input of job 12.3 as a new task, to edit and then submit with `jedictl submit FILE`", "jedictl jobs copy 12.3"),
        E("The same for Ganga's subjob 2 of task 12, as YAML", "jedictl jobs copy --task 12 --subjob 2 -o yaml"),
    ),
    "explain task": (
        E("Why task 6 is (not) progressing", "jedictl explain task 6", True),
        E("The same, with the brokerage trail as JSON", "jedictl explain task 4 --seed 1 -o json", True),
    ),
    # Catalogs and configuration.
    "sites import": (
        E("Import the example grid", "jedictl sites import examples/sites.yaml"),
    ),
    "sites list": (
        E("Every site", "jedictl sites list", True),
        E("Online sites of cloud US", "jedictl sites list --status online --cloud US", True),
    ),
    "sites show": (
        E("A site and its storage", "jedictl sites show MWT2", True),
    ),
    "sites set-status": (
        E("Keep brokerage away from MWT2", "jedictl sites set-status MWT2 brokeroff"),
    ),
    "sites nuclei": (
        E("The nuclei", "jedictl sites nuclei", True),
    ),
    "sites endpoints": (
        E("The storage endpoints, as JSON", "jedictl sites endpoints -o json", True),
    ),
    "network import": (
        E("Import the example matrix (queued files, throughput, closeness)", "jedictl network import examples/network.yaml"),
        E("Make the stored matrix exactly a CSV file's", "jedictl network import links.csv --replace"),
    ),
    "network list": (
        E("Every link with its network weight", "jedictl network list", True),
        E("The links into nucleus BNL-ATLAS, as JSON", "jedictl network list --destination BNL-ATLAS -o json", True),
    ),
    "network show": (
        E("How the link from MWT2 to CERN-PROD weighs", "jedictl network show MWT2 CERN-PROD"),
    ),
    "pilots list": (
        E("The newest pilots", "jedictl pilots list", True),
        E("Pilots at MWT2 that failed", "jedictl pilots list --site MWT2 --state failed", True),
    ),
    "data import": (
        E("Import the example data catalog", "jedictl data import examples/data.yaml"),
        E("Register the files under a directory as a dataset at an endpoint", "jedictl data import --scan /data/run42 --endpoint MWT2_DATADISK --dataset user.alice.run42 --transfer link"),
    ),
    "data add-files": (
        E("Add the files listed in more.yaml to an open dataset", "jedictl data add-files user.alice.run42 more.yaml"),
    ),
    "data remove-files": (
        E("Declare a file lost", "jedictl data remove-files user.alice.run42 run42._000007.root"),
    ),
    "data close": (
        E("No more files will come", "jedictl data close user.alice.run42"),
    ),
    "data open": (
        E("Accept more files again", "jedictl data open user.alice.run42"),
    ),
    "data list": (
        E("Every dataset and container", "jedictl data list", True),
        E("Closed datasets whose names start with mc23_", "jedictl data list 'mc23_*' --kind dataset --state closed", True),
    ),
    "data show": (
        E("A dataset with every file", "jedictl data show user.demo.ttbar.hist.v1_hist.root/ --files", True),
    ),
    "retry-rules import": (
        E("Import the example rules", "jedictl retry-rules import examples/retry-rules.yaml"),
        E("Make the stored rules exactly the file's", "jedictl retry-rules import examples/retry-rules.yaml --replace"),
    ),
    "retry-rules list": (
        E("Every rule", "jedictl retry-rules list", True),
        E("Rules for pilot errors that raise the memory", "jedictl retry-rules list --source pilot --action increase_memory", True),
    ),
    "retry-rules remove": (
        E("Remove rules 3 and 4", "jedictl retry-rules remove 3 4"),
    ),
    "retry-rules match": (
        E("Which rule acts on a job that ran out of memory", "jedictl retry-rules match --source pilot --code 1212", True),
        E("The same for a managed job's payload exit code 65", "jedictl retry-rules match --source trans --code 65 --label managed", True),
    ),
    "queue-shares": (
        E("The share tree and the work queues now (as `queue-shares show`)", "jedictl queue-shares", True),
    ),
    "queue-shares show": (
        E("The share tree and the work queues now", "jedictl queue-shares show", True),
        E("The same, on target within 10 %, as JSON", "jedictl queue-shares show --tolerance 10 -o json", True),
    ),
    "queue-shares import": (
        E("What importing the example definitions would change", "jedictl queue-shares import --dry-run examples/queue-shares.yaml", True),
        E("Import them", "jedictl queue-shares import examples/queue-shares.yaml"),
    ),
    "queue-shares export": (
        E("The definitions in force, as YAML", "jedictl queue-shares export", True),
        E("Into a file, as JSON", "jedictl queue-shares export shares.json"),
    ),
    "queue-shares set": (
        E("Give the Express share 20", "jedictl queue-shares set Express --share 20"),
        E("Let the user queue take unused share first", "jedictl queue-shares set user --stretchable --kind queue"),
    ),
    "db init": (
        E("Create the default store", "jedictl db init"),
        E("Create a store on PostgreSQL", "jedictl --db postgresql+psycopg://jedi@db.example.org/jedi db init"),
    ),
    "db upgrade": (
        E("Migrate the store after installing a new release", "jedictl db upgrade"),
    ),
    "db current": (
        E("The store's schema revision and the one this program needs", "jedictl db current", True),
    ),
    "config show": (
        E("Every setting, its value and where it came from", "jedictl config show", True),
        E("The same with what each setting means", "jedictl config show -v", True),
    ),
    "completion show": (
        E("The script for bash", "jedictl completion show --shell bash", True),
    ),
    "completion install": (
        E("Install completion for the shell named by $SHELL", "jedictl completion install"),
        E("Install it for zsh", "jedictl completion install --shell zsh"),
    ),
    "periodic add": (
        E("A functional test of a site every hour, one instance at a time", "jedictl periodic add examples/periodic-hc.yaml --every 1h"),
        E("Every 15 minutes from 06:00 UTC, up to 3 instances active", "jedictl periodic add examples/periodic-hc.yaml --cron '*/15 * * * *' --start 2026-12-01T06:00Z --max-active 3"),
    ),
    "periodic list": (
        E("Every template, its next due time and what became of the last", "jedictl periodic list", True),
        E("The paused ones, as JSON", "jedictl periodic list --status paused -o json", True),
    ),
    "periodic show": (
        E("One template: schedule, next due times, last outcome, newest instances", "jedictl periodic show hc.test.CERN-PROD_GRID"),
    ),
    "periodic pause": (
        E("No more instances for now", "jedictl periodic pause hc.test.CERN-PROD_GRID"),
    ),
    "periodic resume": (
        E("Instances again, from the next due time", "jedictl periodic resume hc.test.CERN-PROD_GRID"),
    ),
    "periodic remove": (
        E("Remove a template; its instances stay", "jedictl periodic remove hc.test.CERN-PROD_GRID"),
    ),
    "periodic instantiate": (
        E("Submit the instances due now (jedictl run does it first)", "jedictl periodic instantiate"),
        E("As of a given time, the report as JSON", "jedictl periodic instantiate --now 2026-12-01T06:00Z -o json"),
    ),
    "data mark-lost": (
        E("Declare two files lost: every replica is gone", "jedictl data mark-lost mc23.reco.AOD A.000003.root A.000007.root"),
    ),
    "recover-lost": (
        E("What recovering every lost file of a dataset would make, nothing written", "jedictl recover-lost mc23.reco.AOD --dry-run"),
        E("Recover two lost files", "jedictl recover-lost mc23.reco.AOD --files A.000003.root,A.000007.root"),
    ),
    "jobs reassign": (
        E("Move two queued jobs to the best site their task's brokerage keeps", "jedictl jobs reassign 4711 4712"),
        E("Move job 3 of task 12 to a named site", "jedictl jobs reassign 12.3 --site CERN-PROD_GRID --user alice"),
    ),
    "agents add": (
        E("An agent for two sites: 400 pending and 1000 running production jobs each", "jedictl agents add vocms0250 --site CERN-PROD_GRID --site BNL_PROD --pending-threshold 400 --running-threshold 1000"),
        E("Its schedd's per-owner cap, and thresholds for user jobs at one site", "jedictl agents add vocms0250 --max-jobs-per-owner 20000 --site BNL_PROD --job-type user --pending-threshold 50 --running-threshold 200"),
    ),
    "agents list": (
        E("Every agent, its sites and the elements it holds", "jedictl agents list", True),
    ),
    "agents show": (
        E("Thresholds, jobs and the slots left at each of an agent's sites", "jedictl agents show vocms0250"),
    ),
    "agents set-state": (
        E("Drain a site for one agent: no new elements, its queued work still released", "jedictl agents set-state vocms0250 BNL_PROD drain"),
    ),
    "agents remove": (
        E("Remove an agent that holds no element", "jedictl agents remove vocms0250"),
    ),
    "workqueue create": (
        E("Put task 12's input blocks in the global queue", "jedictl workqueue create 12"),
    ),
    "workqueue list": (
        E("Every element: block, status, agent and site", "jedictl workqueue list", True),
        E("What is still in the global queue, as JSON", "jedictl workqueue list --status Available -o json", True),
    ),
    "workqueue show": (
        E("One element and its history", "jedictl workqueue show 7"),
    ),
    "workqueue acquire": (
        E("One pass of an agent: take elements for its sites and release them to generate", "jedictl workqueue acquire --agent vocms0250"),
        E("Every 5 minutes, at most 50 elements a pass", "jedictl workqueue acquire --agent vocms0250 --limit 50 --loop 300"),
    ),
    "workqueue update-locations": (
        E("Refresh the possible sites of every Available element", "jedictl workqueue update-locations"),
        E("Every 10 minutes (WMCore's location refresh)", "jedictl workqueue update-locations --loop 600"),
    ),

}
