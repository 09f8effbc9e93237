"""Special permission (seed 000 "Special permission"; PanDA keeps the letters in the users table's
GRIDPREF): who may lift the analysis priority cap and jump the queue, and the groups' shares of group
production. Built from the `privileges` setting, which `jedictl.config.check_privileges` has validated.

- a user with `s` (super user): his analysis tasks, personal or group, are not capped and jump over
  other tasks when jobs are generated;
- a user with `g` (super group): the same for his group analysis tasks (tasks with a working group);
- a working group with `s`: the same for every analysis task of the group, whoever submits it (PanDA
  looks a group up in the users table as it does a user, and only its super-user letter counts);
- a working group with a `share`: its weight among the groups given a share (docs/queue-shares.md,
  "Group shares"): the generator serves first the group furthest below its share.

"Jumping the queue" is PanDA's: a privileged analysis task's current priority is raised to the express
priority (JobUtils.priorityTasksToJumpOver, 1500, AtlasAnalTaskRefiner) at submission, and the
generator puts privileged tasks in its express lane at every pass, so a permission granted later
counts from the next pass on. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jedictl.engine.task.spec import ANALYSIS_LABELS


@dataclass(frozen=True)
class Privileges:
    """The `privileges` list as lookups: user -> letters, group -> letters, group -> share."""

    users: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    group_shares: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, entries: Sequence[Mapping[str, Any]]) -> "Privileges":
        users: dict[str, str] = {}
        groups: dict[str, str] = {}
        shares: dict[str, float] = {}
        for entry in entries:
            letters = str(entry.get("permissions") or "")
            if "user" in entry:
                users[str(entry["user"])] = letters
            else:
                name = str(entry["group"])
                groups[name] = letters
                if entry.get("share") is not None:
                    shares[name] = float(entry["share"])
        return cls(users, groups, shares)

    def privileged(self, user_name: str, working_group: str | None) -> str | None:
        """Why a task of `user_name` (in `working_group`, if any) is privileged, or None: the grant that
        applies, in words for the operator ("super user alice")."""
        letters = self.users.get(user_name, "")
        if "s" in letters:
            return f"super user {user_name}"
        if working_group:
            if "g" in letters:
                return f"super group privilege of {user_name} for group {working_group}"
            if "s" in self.groups.get(working_group, ""):
                return f"privileged group {working_group}"
        return None

    def jumps_queue(self, prod_source_label: str | None, user_name: str, working_group: str | None) -> bool:
        """Whether an analysis task of this owner jumps over other tasks when jobs are generated."""
        return prod_source_label in ANALYSIS_LABELS and self.privileged(user_name, working_group) is not None


NOBODY = Privileges()


def queue_priority(task_priority: int, privileged: bool, express_priority: int) -> int:
    """A task's current priority at submission: a privileged analysis task's is raised to the express
    priority so that it jumps over other tasks (AtlasAnalTaskRefiner: currentPriority >= 1500)."""
    return max(task_priority, express_priority) if privileged else task_priority
