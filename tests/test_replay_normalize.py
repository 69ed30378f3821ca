"""Templates, id binding, path mapping and JSON diffs of the replay engine."""

from __future__ import annotations

from claudetrace.replay.normalize import (
    MISSING,
    Bindings,
    Change,
    PathMap,
    Templater,
    Volatile,
    project_slug,
    unify,
)


def test_control_request_id_and_user_uuid_are_volatile() -> None:
    templater = Templater()
    request = {"type": "control_request", "request_id": "req_1_ab12", "request": {"subtype": "x"}}
    user = {"type": "user", "uuid": "u-1", "message": {"content": "hi"}}
    templater.collect(request)
    templater.collect(user)
    assert templater.template(request)["request_id"] == Volatile(0)
    assert templater.template(user)["uuid"] == Volatile(1)
    assert templater.template(user)["message"] == {"content": "hi"}


def test_pattern_values_are_volatile_anywhere() -> None:
    templater = Templater()
    cancel = {"type": "control_cancel_request", "request_id": "req_7_ff00"}
    templater.collect(cancel)
    assert templater.template(cancel) == {
        "type": "control_cancel_request",
        "request_id": Volatile(0),
    }


def test_unify_binds_fresh_value_and_then_requires_it() -> None:
    template = {"request_id": Volatile(0), "echo": Volatile(0)}
    bindings = Bindings()
    changes, fresh = unify(template, {"request_id": "req_1_live", "echo": "req_1_live"}, bindings)
    assert changes == [] and fresh == {0: "req_1_live"}
    changes, _ = unify(template, {"request_id": "req_1_live", "echo": "other"}, bindings)
    assert [c.path for c in changes] == ["$.echo"]
    bindings.bind(0, "req_1_live")
    changes, fresh = unify({"id": Volatile(0)}, {"id": "req_1_new"}, bindings)
    assert changes == [Change("$.id", "req_1_live", "req_1_new")] and fresh == {}


def test_unify_refuses_one_live_value_for_two_markers() -> None:
    changes, _ = unify([Volatile(0), Volatile(1)], ["same", "same"], Bindings())
    assert [c.path for c in changes] == ["$[1]"]


def test_diff_paths_for_changed_missing_and_extra() -> None:
    expected = {"a": 1, "b": {"c": [1, 2]}, "weird key": True}
    actual = {"a": 1.0, "b": {"c": [1]}, "weird key": 1, "d": None}
    changes, _ = unify(expected, actual, Bindings())
    described = {c.path: c for c in changes}
    assert set(described) == {"$.b.c[1]", '$["weird key"]', "$.d"}
    assert described["$.b.c[1]"].actual is MISSING
    assert described["$.d"].expected is MISSING
    assert "unexpected null" in described["$.d"].describe()
    assert described['$["weird key"]'].to_json() == {
        "path": '$["weird key"]',
        "expected": True,
        "actual": 1,
    }


def test_path_map_longest_first_and_project_slug() -> None:
    paths = PathMap.build(
        {"cwd": "/home/dev/project", "home": "/home/dev"}, {"cwd": "/tmp/h/p", "home": "/tmp/h"}
    )
    text = "/home/dev/project/x /home/dev/.claude/projects/-home-dev-project/t.jsonl"
    assert paths.text(text) == "/tmp/h/p/x /tmp/h/.claude/projects/-tmp-h-p/t.jsonl"
    pattern, table = paths.bytes_replacer() or (None, {})
    assert pattern is not None
    assert pattern.sub(lambda m: table[m.group()], b'"/home/dev/a"') == b'"/tmp/h/a"'
    assert project_slug("/a.b/c") == "-a-b-c"


def test_path_map_is_empty_when_nothing_differs() -> None:
    assert not PathMap.build({"cwd": "/x", "home": None}, {"cwd": "/x", "home": "/h"})
