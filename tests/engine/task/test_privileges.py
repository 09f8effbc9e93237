"""Special permission (engine.task.privileges): who is privileged, and the priority a task starts at."""

from __future__ import annotations

from jedictl.engine.task.privileges import NOBODY, Privileges, queue_priority

LIST = [{"user": "alice", "permissions": "s"}, {"user": "carol", "permissions": "g"}, {"group": "phys-higgs", "permissions": "s"},
        {"group": "GP_Top", "share": 10}, {"group": "GP_Higgs", "permissions": "s", "share": 30}]


def test_the_list_as_lookups():
    privileges = Privileges.from_settings(LIST)
    assert privileges.users == {"alice": "s", "carol": "g"}
    assert privileges.groups == {"phys-higgs": "s", "GP_Top": "", "GP_Higgs": "s"}
    assert privileges.group_shares == {"GP_Top": 10.0, "GP_Higgs": 30.0}


def test_who_is_privileged_and_why():
    privileges = Privileges.from_settings(LIST)
    assert privileges.privileged("alice", None) == "super user alice"
    assert privileges.privileged("alice", "phys-top") == "super user alice"
    assert privileges.privileged("carol", None) is None  # g: group analysis only
    assert privileges.privileged("carol", "phys-top") == "super group privilege of carol for group phys-top"
    assert privileges.privileged("bob", "phys-higgs") == "privileged group phys-higgs"
    assert privileges.privileged("bob", "GP_Top") is None  # a share is no permission
    assert privileges.privileged("bob", None) is None and NOBODY.privileged("alice", None) is None


def test_only_analysis_tasks_jump_the_queue():
    privileges = Privileges.from_settings(LIST)
    assert privileges.jumps_queue("user", "alice", None) and privileges.jumps_queue("panda", "bob", "phys-higgs")
    assert not privileges.jumps_queue("managed", "alice", None)
    assert not privileges.jumps_queue("user", "bob", None)


def test_a_privileged_task_starts_at_the_express_priority():
    assert queue_priority(1000, True, 1500) == 1500
    assert queue_priority(5000, True, 1500) == 5000
    assert queue_priority(1000, False, 1500) == 1000
