"""Record the proxy benchmark's default input: a streaming coding-agent session.

Run from the repository root::

    python -m tests.record_bench_input            # writes the shipped cassette
    python -m tests.record_bench_input -o FILE    # somewhere else

It writes ``claudetrace/bench/data/streaming.cassette.ndjson``, the recording
whose lines ``claudetrace bench proxy`` cycles by default.  Sustained traffic
between an SDK host and the CLI is a streaming session: with
``include_partial_messages=True`` the CLI forwards a ``stream_event`` line for
every server-sent delta of every model answer, so most lines are
``content_block_delta`` events, with assistant messages, tool calls,
permission and hook round trips and results in between.  This session has two
user turns against the real bundled CLI and the fake API
(:mod:`claudetrace.testing.fakeapi`):

1. a release-checklist request, answered by thinking plus several long text
   answers, a Bash ``echo`` (a ``PreToolUse`` hook sees it), a Bash ``touch``
   (``can_use_tool`` is asked and allows it) and an SDK MCP tool call (asked
   and allowed as well), thinking again before the last call;
2. a follow-up question, answered by thinking and one long text answer.

The fake API splits a block into only a handful of deltas; the real API
streams a few tokens at a time.  While recording, blocks are therefore split
into pieces of one to three words (about a dozen characters), deterministically,
so a re-recording differs only in ids, timings and the order of lines that
cross each other in the two directions.

Recording, export and sanitising are those of :mod:`tests.record_fixtures`:
the CLI runs through a recording shim into a temporary SQLite store, the
recording is exported as a cassette and sanitised
(:func:`claudetrace.sanitize.sanitize_cassette`: no machine paths, secrets
redacted), and the CLI's path in ``argv`` becomes ``claude``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    ResultMessage,
    create_sdk_mcp_server,
    tool,
)

from claudetrace.bench.proxy import STREAMING_CASSETTE
from claudetrace.cassette import read_cassette, write_cassette
from claudetrace.sanitize import sanitize_cassette
from claudetrace.testing import (
    FakeAPI,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    fakeapi,
    reply,
    text,
)
from claudetrace.testing.harness import bundled_cli, make_home
from tests.record_fixtures import claudetrace, newest_recording, recording_ids
from tests.scenarios import SCENARIO_TIMEOUT, base_options

#: The seed of the delta sizes (fixed: re-recordings split the same way).
DELTA_SEED = 20240515

#: Words per delta, at most (the real API sends a few tokens per delta).
DELTA_WORDS = 3

#: How long the session may take (seconds): a few scenarios' worth of turns.
SESSION_TIMEOUT = 3 * SCENARIO_TIMEOUT

FIRST_PROMPT = (
    "We're starting the release checklist for 0.4. Check that the shell works, "
    "create an empty CHANGELOG.md, and file a task for the timezone bug in the CSV "
    "export. Explain what you are doing as you go."
)

SECOND_PROMPT = (
    "Thanks. Before I write the changelog entry: how should we word the timezone "
    "fix for users, and what should we tell people who already exported files?"
)

PLAN_THOUGHT = """\
The user wants three concrete things done for the 0.4 release checklist: a sanity \
check that the shell works, an empty CHANGELOG.md at the project root, and a task \
filed for the timezone bug in the CSV export. None of these is risky, but creating \
a file changes the working tree, so I should expect a permission prompt for that \
one and explain why it is needed. The echo is harmless and tells me the shell and \
the working directory behave. For the task I have the tasks MCP server; I should \
give the task a precise title and enough detail that whoever picks it up does not \
have to rediscover the bug: the export formats datetimes with the local timezone \
of the server instead of UTC, and the column header says UTC. I should also keep \
the user informed at each step rather than doing everything silently, since they \
asked me to explain as I go. Order: echo first (cheap, confirms the environment), \
then touch, then the task, then a summary with what is left for the release.

A few details to get right. The echo should print something recognisable, not \
just a single word, so I can tell it really came from this command and not from \
some leftover output; quoting it in single quotes avoids any expansion. For the \
changelog, touch is the right tool rather than writing an empty string with a \
redirect: touch does not truncate an existing file, so if someone already started \
a changelog on another branch and it was merged, I will not destroy it. I should \
mention that, because "create an empty file" could be read as "make sure it is \
empty", and those are different operations. For the task, the priority should be \
high: wrong timestamps in exported data are silent corruption, the worst kind, \
because nobody notices until reports disagree. I will not try to fix the bug in \
this turn; the user asked for a task, and a fix deserves its own review. Finally, \
the summary should list what remains for the release, since that is the point of \
a checklist: version bump, changelog content, the fix itself, and a smoke test."""

PLAN_TEXT = """\
Here is how I'll approach the 0.4 release checklist. There are three concrete \
steps, and I'll explain each one before I run anything so you can stop me if the \
plan does not match what you had in mind.

**1. Check the shell.** Before touching any files I want to be sure that commands \
run in the project directory and that their output comes back to me unchanged. \
The cheapest way to do that is an `echo` of a recognisable string. If the output \
is garbled, or the command runs somewhere else, everything after it would be built \
on a wrong assumption, so this is worth the extra second.

**2. Create `CHANGELOG.md`.** You asked for an empty file. I'll use `touch`, which \
creates the file if it is missing and leaves it alone (apart from the modification \
time) if it already exists, so running it twice is safe. Because this changes the \
working tree, you will probably be asked to approve it. I deliberately won't write \
any content yet: the entry for the timezone fix depends on how we decide to word \
it, and an empty file is easy to fill in once we agree.

**3. File the timezone task.** The CSV export currently formats timestamps in the \
server's local timezone, while the column header promises UTC. Anyone importing \
the file into a spreadsheet in another timezone sees times that are off by their \
offset, and twice a year by one more hour around daylight-saving changes. I'll \
record that in the task with the symptom, the likely cause and what a fix needs \
to cover, so it can be picked up without rediscovering the details.

After that I'll summarise what was done and what is still open for the release. \
Starting with the shell check now."""

ECHO_TEXT = """\
The shell works: the command ran in the project directory and printed exactly \
the string I sent, so output comes back unchanged and there is no wrapper \
rewriting it. That also tells me the environment is a plain POSIX shell, which \
matters for the next step, because `touch` behaves the same on every system we \
build on.

Next, the changelog. A few notes on the format I suggest we use once there is \
content, so the file starts out consistent:

```markdown
# Changelog

## 0.4.0 - unreleased

### Fixed
- CSV export: timestamps are written in UTC, as the column header says.
  Previously they used the server's local timezone.

### Changed
- ...
```

The headings follow the "Keep a Changelog" convention: one section per version, \
newest first, with `Added`, `Changed`, `Fixed` and `Removed` subsections as \
needed. Keeping the unreleased version at the top means every pull request can \
add its line there, and the release commit only replaces "unreleased" with the \
date. I won't write this yet, as agreed; I'm only creating the empty file so the \
release tooling, which checks that `CHANGELOG.md` exists, stops complaining.

Creating it now. If you are asked whether to allow `touch CHANGELOG.md`, that is \
this step: it creates one empty file in the project root and nothing else."""

TASK_THOUGHT = """\
The file exists now; the permission was granted and touch succeeded without \
output, which is what touch does. Next is the task. Before filing it I want the \
description to be accurate, so let me think through the bug once more. The CSV \
export has a created column whose header reads "created (UTC)". The formatter \
most likely calls datetime.fromtimestamp on the stored epoch seconds, which gives \
a naive datetime in the process's local zone. On a server running in UTC that is \
invisible, which explains why nobody caught it in development containers, which \
usually run in UTC. On the production servers, which run in the company's local \
zone, every value is shifted by the offset, and the shift changes with \
daylight-saving time, so even a fixed correction is wrong for part of the year. \
The fix needs three things: an aware datetime in UTC, an explicit offset in the \
output so consumers can tell, and a regression test that sets TZ to something far \
from UTC, because the existing tests run in UTC and would keep passing with the \
bug. I should show the user the likely code so they can confirm it matches what \
they see, then file the task with a clear title. The title should describe the \
symptom, not the fix, so people searching for the problem find it."""

TOUCH_TEXT = """\
`CHANGELOG.md` now exists in the project root and is empty, as you asked. The \
release check that looks for the file will pass; the content comes later.

Now the timezone bug. From the description, the export code does something like \
this:

```python
def format_row(event):
    # Uses the server's local timezone, not UTC.
    stamp = datetime.fromtimestamp(event.created)
    return [event.id, stamp.strftime("%Y-%m-%d %H:%M:%S"), event.kind]
```

`datetime.fromtimestamp` without a `tz` argument converts to local time, and the \
formatted string carries no offset, so nothing downstream can tell the value is \
not UTC. The fix is small: `datetime.fromtimestamp(event.created, tz=timezone.utc)` \
and, ideally, an explicit `Z` or `+00:00` suffix so that spreadsheets and \
scripts parse it unambiguously. The part that needs care is not the code but the \
consequences: files exported before the fix are wrong by the server's offset, and \
people may have built reports on them.

I'm filing that as a task with the details, so it is tracked with the release."""

TASK_TEXT = """\
Done. Here is where the release checklist stands.

**What I did**

- Checked the shell with an `echo`: commands run in the project directory and \
their output is returned unchanged.
- Created an empty `CHANGELOG.md` in the project root with `touch`, after you \
approved it. It has no content yet, on purpose.
- Filed task #12, "CSV export writes local time under a UTC header", with high \
priority. It describes the symptom (timestamps off by the server's UTC offset, \
and by an extra hour around daylight-saving changes), the cause \
(`datetime.fromtimestamp` without a timezone in the row formatter) and what a fix \
must cover: convert with `tz=timezone.utc`, write an explicit offset, and add a \
test that runs the export with `TZ` set to a zone far from UTC, so the bug cannot \
come back unnoticed.

**What is still open for 0.4**

1. The fix for task #12 itself, with its test.
2. The changelog entry. I suggest we agree on the wording first, because it is the \
part users will actually read, and it should say clearly whether their existing \
exports are affected.
3. A note in the upgrade section of the documentation if we decide to change the \
timestamp format (adding the offset suffix is technically a format change, and \
anyone parsing the column with a strict pattern would notice).
4. The usual release steps: version bump, tag, build, and the smoke test of the \
published package.

Nothing here blocks the others except the changelog wording, which depends on \
how we describe the fix. If you tell me how you want to phrase it, I can write \
the entry and draft the documentation note in the same pass."""

WORDING_THOUGHT = """\
They want user-facing wording for the fix and advice for people with existing \
exports. The key facts: old files have timestamps in the server's local time \
while the header says UTC; the error equals the server's UTC offset at the time \
of each event, so it can change across daylight-saving boundaries. Users cannot \
fix old files by subtracting one constant unless the server's zone has no DST. \
Good wording is short, says what changed, who is affected, and what to do. I \
should offer a concrete changelog line, a slightly longer note for the upgrade \
documentation, and practical options for old exports: re-export (best), or \
convert using the server's timezone name, with an example. Avoid blame-y or vague \
language like 'minor timezone issue'.

What do existing exports look like? Values like 2024-03-31 02:30:00 may not even \
exist in a zone that springs forward at two o'clock, and times in the repeated \
hour in autumn are ambiguous. That is worth a short mention because a naive \
conversion script will either fail or silently pick one of the two instants. For \
the example I should use zoneinfo, which is in the standard library since Python \
3.9, and name a real zone so the user sees they need the server's zone name, not \
an offset. I should not overload the changelog line: one or two sentences, then \
point to the upgrade notes. And the tone should be plain and honest: the header \
said UTC, the data was not UTC, here is how to check and fix. I will end by \
offering to write both texts once the user agrees with the wording."""

WORDING_TEXT = """\
Good question: the wording matters more than the code here, because some people \
will have to decide whether to redo work. I'd aim for three properties: say what \
was wrong in terms users can check, say who is affected, and give them a \
concrete way to fix what they already have.

**Changelog line** (short, under "Fixed"):

> CSV export: timestamps are now written in UTC with an explicit `+00:00` \
offset, as the column header always stated. Earlier versions wrote the server's \
local time. Files exported before 0.4 may be off by the server's UTC offset; see \
the upgrade notes.

**Upgrade note** (longer, in the documentation):

> Before 0.4, the `created` column of CSV exports contained the server's local \
time although the header said UTC. If your server runs in UTC, nothing changes \
for you except the added `+00:00` suffix. Otherwise each timestamp is shifted by \
the server's offset from UTC at that moment, which can differ between summer and \
winter.

**What to tell people with existing exports**

1. *Re-export if you can.* It is the only option that is certainly right, and \
for most people it takes a minute.
2. *Convert if you can't.* The shift is not one constant when the server's zone \
observes daylight-saving time, so "subtract two hours" is wrong for part of the \
year. Converting with the zone's name gets it right:

```python
from datetime import datetime
from zoneinfo import ZoneInfo

server = ZoneInfo("Europe/Berlin")  # the zone the server ran in
fixed = datetime.strptime(value, "%Y-%m-%d %H:%M:%S").replace(tzinfo=server)
utc = fixed.astimezone(ZoneInfo("UTC"))
```

3. *Check what depends on it.* Reports that only count events per day are \
affected only near midnight; anything that compares times across systems is \
affected everywhere.

I'd avoid calling it a "minor timezone issue": for someone whose dashboards are \
an hour off it is not minor, and understating it makes the upgrade note easier \
to skip. If this wording works for you, I'll put the line into `CHANGELOG.md` and \
add the upgrade note to the documentation."""


def streamed_pieces(value: str, rng: random.Random) -> list[str]:
    """``value`` split into pieces of 1..DELTA_WORDS words, as the real API streams.

    Whitespace stays with the word before it, so the pieces join back to
    ``value`` exactly.
    """
    words = re.findall(r"\S+\s*|\s+", value)
    pieces: list[str] = []
    while words:
        take = rng.randint(1, DELTA_WORDS)
        pieces.append("".join(words[:take]))
        del words[:take]
    return pieces or [""]


@contextlib.contextmanager
def small_deltas(seed: int = DELTA_SEED) -> Iterator[None]:
    """While active, the fake API streams every block in pieces of a few words.

    The fake API splits blocks with its module function ``chunks`` into a
    handful of pieces and has no option for smaller ones, so it is replaced
    for the duration of the recording (and restored after).
    """
    rng = random.Random(seed)
    original = fakeapi.chunks

    def split(value: str, count: int = fakeapi.TEXT_CHUNKS) -> list[str]:
        return streamed_pieces(value, rng)

    fakeapi.chunks = split
    try:
        yield
    finally:
        fakeapi.chunks = original


def script(api: FakeAPI) -> None:
    """The model's answers, in the order the session asks for them."""
    api.script(
        reply(
            ThinkingBlock(PLAN_THOUGHT),
            TextBlock(PLAN_TEXT),
            ToolUseBlock(
                "Bash",
                {"command": "echo 'release 0.4 checklist'", "description": "Check the shell"},
            ),
        ),
        reply(
            TextBlock(ECHO_TEXT),
            ToolUseBlock(
                "Bash",
                {"command": "touch CHANGELOG.md", "description": "Create an empty changelog"},
            ),
        ),
        reply(
            ThinkingBlock(TASK_THOUGHT),
            TextBlock(TOUCH_TEXT),
            ToolUseBlock(
                "mcp__tasks__add_task",
                {
                    "title": "CSV export writes local time under a UTC header",
                    "priority": "high",
                },
            ),
        ),
        text(TASK_TEXT),
        reply(ThinkingBlock(WORDING_THOUGHT), TextBlock(WORDING_TEXT)),
    )


async def session(options: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
    """Run the two turns; the messages the host received (``calls`` gets the callbacks)."""

    async def pre_tool_use(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        calls.append(("PreToolUse", hook_input.get("tool_name"), hook_input.get("tool_input")))
        return {}

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        calls.append(("can_use_tool", name, tool_input))
        return PermissionResultAllow()

    @tool("add_task", "File a task in the project tracker", {"title": str, "priority": str})
    async def add_task(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(("mcp__tasks__add_task", args))
        return {"content": [{"type": "text", "text": "Created task #12."}]}

    options.include_partial_messages = True
    options.can_use_tool = can_use_tool
    options.hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre_tool_use])]}
    options.mcp_servers = {"tasks": create_sdk_mcp_server("tasks", "1.0.0", tools=[add_task])}
    messages: list[Any] = []
    async with ClaudeSDKClient(options) as client:
        for prompt in (FIRST_PROMPT, SECOND_PROMPT):
            await client.query(prompt)
            async for message in client.receive_response():
                messages.append(message)
    return messages


def check(messages: list[Any], calls: list[tuple[Any, ...]], project: Path) -> None:
    """Fail (SystemExit) unless the session went as scripted."""
    results = [m for m in messages if isinstance(m, ResultMessage)]
    problems = []
    if [(r.subtype, r.is_error) for r in results] != [("success", False)] * 2:
        problems.append(f"results: {[(r.subtype, r.is_error) for r in results]}")
    names = [c[0] for c in calls]
    if names.count("PreToolUse") != 2 or "mcp__tasks__add_task" not in names:
        problems.append(f"callbacks: {names}")
    if [c[1] for c in calls if c[0] == "can_use_tool"] != ["Bash", "mcp__tasks__add_task"]:
        problems.append(f"can_use_tool asked about: {calls}")
    if not (project / "CHANGELOG.md").exists():
        problems.append("CHANGELOG.md was not created")
    if problems:
        raise SystemExit("the session did not go as scripted: " + "; ".join(problems))


def record(target: Path = STREAMING_CASSETTE) -> Path:
    """Record the session through the proxy and write the sanitised cassette."""
    real = bundled_cli()
    with (
        tempfile.TemporaryDirectory(prefix="ct-bench-input-") as tmp,
        FakeAPI() as api,
        small_deltas(),
    ):
        root = Path(tmp)
        db = root / "claudetrace.db"
        shim = root / "claude"
        claudetrace("shim", str(shim), "--real", str(real), "--db", str(db))
        home = make_home(root / "home")
        known = recording_ids(db)
        script(api)
        options = base_options(shim, api, home)
        calls: list[tuple[Any, ...]] = []
        messages = asyncio.run(asyncio.wait_for(session(options, calls), SESSION_TIMEOUT))
        check(messages, calls, Path(options.cwd or "."))
        recording = newest_recording(db, known)
        exported = root / "export.ndjson"
        claudetrace("export", recording, "--db", str(db), "-o", str(exported))
        cassette = sanitize_cassette(read_cassette(exported), home=str(home))
        argv = list(cassette.header.get("argv") or [])
        if argv:
            argv[0] = "claude"
        header = {**cassette.header, "argv": argv, "scenario": "bench_streaming"}
        target.parent.mkdir(parents=True, exist_ok=True)
        write_cassette(target, header, cassette.events)
    size = target.stat().st_size
    print(f"{target.name}: {len(cassette.events)} events, {size:,} bytes", file=sys.stderr)
    return target


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: record the session (into the shipped cassette by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-o", "--out", type=Path, default=STREAMING_CASSETTE, help="cassette to write"
    )
    args = parser.parse_args(argv)
    record(args.out)


if __name__ == "__main__":
    main()
