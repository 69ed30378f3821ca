"""One session: header metrics, then Conversation / Trace / Control plane / Raw.

Only the selected tab is computed (``?tab=``), and each reads only what it
shows: the conversation a window of non-delta lines, the control plane the
control lines through their index, the raw view one page of metadata.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from urllib.parse import quote

import streamlit as st

from claudetrace.cassette import write_cassette
from claudetrace.display import visible_data, visible_text
from claudetrace.errors import ClaudeTraceError
from claudetrace.model import Session
from claudetrace.model.events import Event
from claudetrace.store import Recording, Store
from claudetrace.store import browse as queries
from claudetrace.store.links import links_of
from claudetrace.store.unfolded import is_unfolded
from claudetrace.store.usage import store_reader
from claudetrace.store.waiting import BEING_INDEXED
from claudetrace.ui import outline, present
from claudetrace.ui.controlplane import ControlRow, control_rows
from claudetrace.ui.conversation import API_ERROR, Item, LazyConversation, ToolCall, walk
from claudetrace.ui.markdown import markdown_tree, tree_html
from claudetrace.ui.views import common, trace
from claudetrace.ui.views import find as find_view
from claudetrace.ui.views.common import money, param, plain, set_params
from claudetrace.usage import costed

TABS = {
    "conversation": "Conversation",
    "trace": "Trace",
    "control": "Control plane",
    "raw": "Raw",
}
#: Lines shown per conversation part (deltas excluded): a part of 300 took the browser
#: ~0.2 s longer to draw on a 200k-line session (some 110 chat items and tool calls).
CONVERSATION_PAGE = 100
#: Rows per page of the control plane's table.
CONTROL_PAGE = 500
#: Lines the conversation reads at a time (as far as the part shown needs).
CONVERSATION_STEP = 1000
RAW_PAGE = 200
#: Tabs an older URL may name, and the tab that shows them now: the Timeline's
#: waterfall of the OpenTelemetry spans became the Trace tab's span tree.
_OLD_TABS = {"timeline": "trace"}


def page() -> None:
    """The session detail page (``?session=<id>``)."""
    db = common.store()
    query = param("session")
    try:
        rec = db.resolve(query)
    except ClaudeTraceError as exc:
        st.title("Session")
        st.error(plain(exc, 400))
        if st.button("← All sessions", key="back_missing"):
            common.go()
        return
    if rec.id != query:
        set_params(session=rec.id)  # pin prefixes and `latest` to the id they meant
    if st.button("← All sessions", key="back"):
        common.go()
    st.title(plain(rec.name or f"Session {rec.id}", 120))
    if is_unfolded(db, rec.id):
        # Its import stored its usage first; the pass it started folds the rest
        # (claudetrace.formats.unfolded), which this page reads.
        st.info(f"This session is {BEING_INDEXED}: reload the page in a moment.")
        return
    live = rec.status == "running" and common.auto_refresh_toggle("live_session", default=True)
    if live:
        st.fragment(run_every=2.0)(_body)(db, rec.id)
    else:
        _body(db, rec.id, rec)


def _body(db: Store, recording_id: str, rec: Recording | None = None) -> None:
    rec = rec or db.get(recording_id)
    _header(db, rec)
    tab = param("tab", "conversation")
    tab = _OLD_TABS.get(tab, tab)
    if tab not in TABS:
        tab = "conversation"
    with common.drawn_first():
        # The tab's reads (kept by the caches) while the browser draws the header.
        _READS[tab](db, rec)
    finder = _find_box(db, rec, tab)
    picked = st.segmented_control(
        "View",
        list(TABS),
        format_func=TABS.__getitem__,
        default=tab,
        key="tab_picker",
        label_visibility="collapsed",
    )
    tab = picked or tab
    set_params(tab=tab if tab != "conversation" else None)
    if tab == "conversation":
        _conversation(db, rec, finder)
    elif tab == "trace":
        trace.tab(db, rec, _lazy_conversation(
            db, rec.id, rec.event_count, rec.ended_ns is not None).through, finder)
    elif tab == "control":
        _control(db, rec)
    else:
        _raw(db, rec)


def _header(db: Store, rec: Recording) -> None:
    status = rec.status
    # A running session's page says what it is doing: its liveness needs the
    # session folded (kept by the server, fed only the lines stored since).
    session = common.folded(db, rec).session if status == "running" else None
    # The cost as ``usage session`` (and sessions, show, the report) says it.
    (priced,) = costed(store_reader(db), [rec])
    head = present.header(priced, session)
    row = common.metric_row()
    lost = rec.lost_bytes or 0
    row.metric(
        "Status",
        status,
        delta=f"{lost:,} bytes lost" if lost else None,
        delta_color="inverse",
        help="Bytes forwarded but not recorded (a full disk)" if lost else None,
        width="content",
    )
    row.metric("Duration", head.duration, width="content")
    # A running session's figures are the fold's the conversation below is drawn
    # from (its summary columns are written at its end: they said 0 turns).
    row.metric("Turns", head.turns, width="content")
    row.metric(
        "Tool calls",
        head.tool_calls,
        delta=f"{head.tool_errors} failed" if head.tool_errors else None,
        delta_color="inverse",
        width="content",
    )
    row.metric("Tokens", f"{head.usage.total:,}", width="content",
               help=present.tokens_text(head.usage))
    # "$0.0019 (estimate)" is long for a figure: the source goes in the label.
    cost, estimated = head.cost.removesuffix(" (estimate)"), head.cost.endswith(" (estimate)")
    row.metric("Cost (estimate)" if estimated else "Cost", cost, width="content",
               help="Priced by the price table: the CLI reported no cost"
               if estimated else None)
    facts = [
        f"id {rec.id}",
        f"{head.lines:,} lines",
        f"started {head.started}",
        f"model {plain(head.model, 60)}",
        f"CLI {plain(head.cli, 30)}",
        f"exit {plain(head.exit, 30)}",
    ]
    if rec.cwd:
        facts.append(f"cwd {plain(rec.cwd, 120)}")
    if rec.cli_session_id:
        facts.append(f"session_id {plain(rec.cli_session_id, 64)}")
    if rec.tags:
        facts.append(
            "tags " + plain(", ".join(f"{k}={v}" for k, v in sorted(rec.tags.items())), 200)
        )
    st.caption(" · ".join(facts))
    for row in outline.link_rows(links_of(db, rec)):
        st.markdown(f"**{row.label}** " + ", ".join(_linked(item) for item in row.items))
    if rec.error:
        st.error(plain(rec.error, 500))
    for warning in rec.warnings:
        st.warning(plain(warning, 500))
    if head.liveness is not None:
        live = head.liveness
        st.info(
            f"**{plain(live.state, 40)}**"
            + (f" · {plain(live.detail, 120)}" if live.detail else "")
            + f" · last event {plain(head.last_event, 60)}"
            + " · the view refreshes while auto-refresh is on.",
            icon=":material/hourglass_top:" if live.state == "awaiting approval" else None,
        )
    elif status == "incomplete":
        why = rec.status_reason or "the recording stopped without an end (the proxy died?)"
        st.warning(f"Incomplete: {plain(why, 500)}. This is what was saved.")


def _find_box(db: Store, rec: Recording, tab: str) -> find_view.Finder | None:
    """The find box; what it found, and where the page shows what."""
    conversation = _lazy_conversation(db, rec.id, rec.event_count, rec.ended_ns is not None)

    def read() -> tuple[list[Item], list[present.TraceRow], Session]:
        with common.no_gc_pauses():
            items = conversation.through(rec.event_count)
            # The span rows of the session the conversation folded (as the Trace tab
            # draws them): a second fold of a 20k-line session took 1-2 s more.
            session = conversation.session
            rows = trace.tree_rows(session, rec.status, rec.started_ns, rec.duration_ns,
                                   trace.elsewhere_of(db, rec), trace.title_of(rec),
                                   rec.status_reason)[1]
        return items, rows, session

    start, end = 0, None
    if tab == "conversation":
        start, _, end = _conversation_part(db, rec)
    return find_view.box(rec, read, tab=tab, conv_start=start, conv_end=end,
                         trace_page=trace.TRACE_PAGE)


def _linked(item: outline.LinkItem) -> str:
    """A link to the other session's page (its recording), its id escaped."""
    text = plain(item.session_id, 80)
    shown = (f"[{text}](?session={quote(item.recording_id, safe='')})"
             if item.recording_id else text)
    return (shown + (f" ({plain(item.note, 120)})" if item.note else "")
            + (" — not in this store" if item.missing else ""))


# -- conversation ------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=4)
def _lazy_conversation(
    _db: Store, recording_id: str, event_count: int, ended: bool
) -> LazyConversation:
    """The recording's conversation, folded by the session model as far as it has been
    looked at (per line count, so a live session's grows)."""

    def read(start_seq: int, limit: int) -> list[Event]:
        return list(_db.iter_events(recording_id, start_seq=start_seq, limit=limit))

    return LazyConversation(read, step=CONVERSATION_STEP)


def _conversation_part(db: Store, rec: Recording) -> tuple[int, list[Item], int | None]:
    """The part of the conversation the URL asks for: its first line, items, the next part's."""
    start = common.int_param("from")
    conversation = _lazy_conversation(db, rec.id, rec.event_count, rec.ended_ns is not None)
    with common.no_gc_pauses():
        items, following = conversation.part(start, CONVERSATION_PAGE)
    return start, items, following


def _conversation(db: Store, rec: Recording, finder: find_view.Finder | None = None) -> None:
    start, items, following = _conversation_part(db, rec)
    if start:
        st.caption(f"Showing from line {start}.")
        if st.button("⟲ From the start", key="conv_start"):
            set_params(**{"from": None})
            st.rerun()
    if not items:
        st.info("Nothing to show in this part of the conversation.")
    conversation = _lazy_conversation(db, rec.id, rec.event_count, rec.ended_ns is not None)
    session = conversation.session
    # The figures of the prompts shown only (a part of a long session's turns).
    starts = {t.start_seq: t.number for t in session.turns}
    turns = {starts[i.seq] for _, i in walk(items) if i.kind == "user" and i.seq in starts}
    turns |= {starts[p.seq] for i in items for p in i.branch if p.seq in starts}
    elsewhere = trace.elsewhere_of(db, rec)
    shown = _Shown(rec.started_ns, present.call_figures(session, elsewhere=elsewhere),
                   outline.prompt_figures(session, present.trace_tree(
                       session, end_ns=rec.duration_ns, status=rec.status, turns=turns,
                       elsewhere=elsewhere)), finder)
    common.style()
    for item in items:
        _item(item, 0, shown)
    if following is not None:
        st.caption(f"Conversation continues after line {following - 1}.")
        if st.button("Next part →", key="conv_next"):
            set_params(**{"from": following})
            st.rerun()


_ROLE = {"user": "user", "assistant": "assistant"}


class _Shown:
    """What the items of one page share: the start (for wall-clock times) and each
    model call's figures, said once, under the first item of the call."""

    def __init__(self, started_ns: int, figures: dict[str, present.CallFigures],
                 prompts: dict[int, outline.PromptFigures] | None = None,
                 finder: find_view.Finder | None = None) -> None:
        self.started_ns = started_ns
        #: The find box's matches, marked where the items are drawn.
        self.finder = finder
        self.figures = figures
        #: What followed each prompt, by its line (claude-code-log's per-prompt counts).
        self.prompts = prompts or {}
        self.told: set[str] = set()

    def meta(self, item: Item) -> str:
        """``line 12 · 05:40:01.532 UTC · +0.532s``, and the call's figures the first time."""
        at = round(item.t * 1e9)
        bits = [f"line {item.seq}", present.clock(self.started_ns, at) + " UTC",
                present.offset(at)]
        if item.abandoned:
            bits.insert(0, "abandoned branch")
        fig = self.figures.get(item.call_id) if item.call_id else None
        if fig is not None and item.call_id not in self.told:
            self.told.add(fig.call.id)
            bits.append(fig.summary())
        return " · ".join(plain(b, 300) for b in bits)


def _item(item: Item, depth: int, shown: _Shown) -> None:
    finder = shown.finder if shown.finder is not None and shown.finder.holds(item) else None
    if finder is not None:
        finder.heading(item)
        tree = (markdown_tree(visible_text(item.text))
                if item.kind == "result" and item.markdown else None)
        if tree is not None:
            st.html(f'<div class="ct-md">{tree_html(tree, finder.mark)}</div>')
        elif item.kind not in (*_ROLE, "tool", "thinking"):
            st.html(finder.html(visible_text(item.text)))
    if item.kind in _ROLE:
        with st.chat_message(_ROLE[item.kind]):
            if item.label:
                st.caption(plain(item.label, 80))
            tree = markdown_tree(visible_text(item.text)) if item.kind == "assistant" else None
            if tree is not None:
                mark = finder.mark if finder is not None else None
                st.html(f'<div class="ct-md">{tree_html(tree, mark)}</div>')
            elif finder is not None:
                st.html(finder.html(visible_text(item.text)))
            else:
                st.text(visible_text(item.text))
            st.caption(shown.meta(item))
            if item.kind == "user" and item.seq in shown.prompts:
                st.caption(f"↳ {plain(shown.prompts[item.seq].text(), 300)}")
    elif item.kind == "thinking":
        with st.expander(f"Thinking · line {item.seq}", expanded=finder is not None):
            if finder is not None:
                st.html(finder.html(visible_text(item.text)))
            else:
                st.text(visible_text(item.text))
    elif item.kind == "tool" and item.tool is not None:
        _tool(item, depth, shown, finder)
    elif item.kind == "result":
        (st.error if item.is_error else st.success)(
            f"Result · {plain(_result_label(item))} · {shown.meta(item)}")
    elif item.kind == "compaction":
        if item.label:  # the summary the conversation goes on from
            with st.expander(f"Compaction summary · {shown.meta(item)}", expanded=False,
                             icon=":material/compress:"):
                st.text(visible_text(item.text))
        else:
            st.info(f"{plain(item.text, 200)} · {shown.meta(item)}", icon=":material/compress:")
    elif item.kind == "rewind":
        st.warning(f"{plain(item.text, 300)} · {shown.meta(item)}", icon=":material/undo:")
        if item.branch:
            count = len(item.branch)
            with st.expander(f"Abandoned branch · {count} prompt{'s' if count != 1 else ''}",
                             expanded=False, icon=":material/fork_right:"):
                for prompt in item.branch:
                    st.text(visible_text(prompt.text))
                    figures = shown.prompts.get(prompt.seq)
                    st.caption(shown.meta(prompt).removeprefix("abandoned branch · ")
                               + (f" · {plain(figures.text(), 300)}" if figures else ""))
    elif item.kind == "error" and item.label == API_ERROR:
        # No model's answer: the API error the CLI gave up on, red with its text.
        st.error(f"{plain(item.text, 600)} · {shown.meta(item)}", icon=":material/error:")
    elif item.kind in ("error", "stderr"):
        with st.container(border=True):
            st.caption(f"{'stderr' if item.kind == 'stderr' else 'error'} · {shown.meta(item)}")
            st.code(visible_text(item.text[:5000]), language=None, wrap_lines=True)
    elif item.decision is not None:
        d = item.decision
        st.caption(f"{d.kind} {plain(d.name, 80)} → {plain(d.outcome, 40)} · line {item.seq}")
    else:
        label = f"{plain(item.label, 40)}: " if item.label else ""
        st.caption(f"{label}{plain(item.text, 240)} · line {item.seq}")


def _result_label(item: Item) -> str:
    """A turn's end as the session model has it: error or success (the result's
    ``is_error`` decides, whatever its subtype), how long, what it cost."""
    turn = item.turn
    if turn is None:
        return "error" if item.is_error else "result"
    bits = [present.result_word(turn)]
    if turn.end_ns is not None:
        bits.append(present.duration(turn.end_ns - turn.start_ns))
    if turn.cost_by_model:
        bits.append(money(turn.cost_usd))
    if turn.total_cost_usd is not None:
        bits.append(f"total {money(turn.total_cost_usd)}")
    return " · ".join(bits)


def _tool(item: Item, depth: int, shown: _Shown,
          finder: find_view.Finder | None = None) -> None:
    call = item.tool
    assert call is not None
    state = "failed" if call.is_error else ("ok" if call.answered else "no result")
    todo = present.todos(call.name, call.input)
    task = present.subagent_task(call.name, call.input)
    # A subagent holding a match opens (the match may be in its own work).
    inside = shown.finder is not None and any(
        shown.finder.holds(i) for _, i in walk(call.children))
    if task is not None:
        _subagent(item, task, state, depth, shown, finder, inside)
        return
    label = f"Tool {plain(call.name, 80)} · {state} · line {item.seq}"
    if todo is not None:
        label += f" · {present.todo_summary(todo)}"
    if call.decisions:
        label += " · " + ", ".join(f"{d.kind} {plain(d.outcome, 20)}" for d in call.decisions)
    with st.expander(
        label,
        expanded=call.is_error or finder is not None or inside,
        icon=":material/error:" if call.is_error else (
            ":material/checklist:" if todo is not None else ":material/build:"),
    ):
        st.caption(shown.meta(item))
        if todo is not None:
            st.text(visible_text(present.todo_text(todo)))
        # One block of text, not an element per part: a page holds hundreds of calls.
        # st.text, not st.code: a code block makes the browser load and run
        # Streamlit's syntax highlighter (a 1.5 MB script, ~0.3 s of a 200k-line
        # session's page), for blocks that are collapsed.
        if finder is not None:
            st.html(finder.html(visible_text(_tool_text(call))))
        else:
            st.text(visible_text(_tool_text(call)))
        if call.children:  # a tool other than Agent/Task whose lines nest (rare)
            with st.container(border=True):
                for child in call.children:
                    _item(child, depth + 1, shown)


def _subagent(
    item: Item, task: tuple[str, str, str], state: str, depth: int, shown: _Shown,
    finder: find_view.Finder | None = None, inside: bool = False,
) -> None:
    """An Agent/Task call as what it is: a prompt to a subagent, its work, its answer."""
    call = item.tool
    assert call is not None
    kind, description, prompt = task
    label = f"Subagent {plain(kind, 60)}"
    if description:
        label += f" · {plain(description, 80)}"
    label += f" · {state} · line {item.seq} · {len(call.children)} items"
    with st.expander(label, expanded=call.is_error or finder is not None or inside,
                     icon=":material/error:" if call.is_error else ":material/smart_toy:"):
        st.caption(shown.meta(item))
        st.caption("prompt")
        if finder is not None:
            st.html(finder.html(visible_text(_tool_text(call))))
        else:
            st.text(visible_text(prompt[:20000] or "(none recorded)"))
        for d in call.decisions:
            st.caption(f"{d.kind} {plain(d.name, 80)} → {plain(d.outcome, 40)}")
        if call.children:
            with st.container(border=True):
                for child in call.children:
                    _item(child, depth + 1, shown)
        st.caption("answer (error)" if call.is_error else "answer")
        answer = call.result
        tree = markdown_tree(visible_text(answer)) if answer else None
        if tree is not None:
            st.html(f'<div class="ct-md">{tree_html(tree)}</div>')
        else:
            st.text(visible_text(answer[:20000] if answer is not None else "(no answer yet)"))


def _tool_text(call: ToolCall) -> str:
    """A tool call's input, the decisions about it and its result, as one text."""
    parts = ["input:", json.dumps(call.input, indent=2, ensure_ascii=False)[:20000]]
    for d in call.decisions:
        parts.append(f"\n{d.kind} {d.name} → {d.outcome} (line {d.seq})")
        if d.detail is not None:
            parts.append(json.dumps(d.detail, indent=2, ensure_ascii=False)[:5000])
    if call.result is not None:
        parts += ["\nresult (error):" if call.is_error else "\nresult:", call.result[:20000]]
    return "\n".join(parts)


# -- control plane -------------------------------------------------------------------


@st.cache_resource(show_spinner="Pairing control requests…", max_entries=8)
def _control_rows(
    _db: Store, recording_id: str, event_count: int, ended: bool
) -> list[ControlRow]:
    """The control round trips of a recording (once per recording and line count)."""
    with common.no_gc_pauses():
        return control_rows(queries.control_events(_db, recording_id))


def _control_plane_rows(db: Store, rec: Recording) -> list[ControlRow]:
    return _control_rows(db, rec.id, rec.event_count, rec.ended_ns is not None)


def _control(db: Store, rec: Recording) -> None:
    rows = _control_plane_rows(db, rec)
    unanswered = [r for r in rows if r.unanswered]
    row = common.metric_row()
    row.metric("Control requests", sum(1 for r in rows if r.request_seq is not None),
               width="content")
    row.metric("Unanswered", len(unanswered), width="content")
    row.metric("Errors", sum(1 for r in rows if r.outcome == "error"), width="content")
    if unanswered:
        st.warning(
            "Unanswered: "
            + plain(", ".join(f"{r.subtype} (line {r.request_seq})" for r in unanswered[:10]), 400)
        )
    if not rows:
        st.info("No control requests in this session.")
        return
    part = common.pager(len(rows), CONTROL_PAGE, "cpart", "requests", "cp_part")
    shown = rows[(part - 1) * CONTROL_PAGE : part * CONTROL_PAGE]
    st.dataframe([r.as_dict() for r in shown], hide_index=True, key="control_table")


# -- raw -------------------------------------------------------------------------------


def _raw(db: Store, rec: Recording) -> None:
    c1, c2 = st.columns(2)
    dirs = c1.multiselect(
        "Direction",
        ["in", "out", "err"],
        default=_list_param("dir", ["in", "out", "err"]),
        key="raw_dir",
    )
    types = c2.multiselect("Type", _raw_types(db, rec), default=None, key="raw_type")
    set_params(dir=",".join(dirs) if set(dirs) != {"in", "out", "err"} else None)
    unfiltered = set(dirs) == {"in", "out", "err"} and not types
    total = (rec.event_count if unfiltered
             else queries.raw_count(db, rec.id, directions=dirs, types=types))
    pages = max(1, -(-total // RAW_PAGE))
    page_no = min(common.int_param("page", 1) or 1, pages)
    c3, c4 = st.columns([1, 3], vertical_alignment="bottom")
    page_no = int(c3.number_input(f"Page (of {pages})", 1, pages, page_no, key="raw_page"))
    set_params(page=page_no if page_no > 1 else None)
    c4.caption(f"{total:,} lines match · {RAW_PAGE} per page")
    rows = queries.raw_page(
        db, rec.id, directions=dirs, types=types, offset=(page_no - 1) * RAW_PAGE, limit=RAW_PAGE
    )
    st.dataframe([r.as_dict() for r in rows], hide_index=True, key="raw_table")
    _expand_line(db, rec, rows[0].seq if rows else 0)
    st.download_button(
        "Download as cassette",
        data=lambda: _cassette_bytes(db, rec.id),
        file_name=f"{rec.id}.cassette.ndjson",
        mime="application/x-ndjson",
        key="download",
    )


def _raw_types(db: Store, rec: Recording) -> list[str]:
    return _line_types(db, rec.id, rec.event_count)


@st.cache_resource(show_spinner=False, max_entries=8)
def _line_types(_db: Store, recording_id: str, event_count: int) -> list[str]:
    """The line types of a recording (once per recording and line count)."""
    return queries.line_types(_db, recording_id)


def _list_param(name: str, default: list[str]) -> list[str]:
    value = param(name)
    picked = [v for v in value.split(",") if v in default] if value else []
    return picked or default


def _expand_line(db: Store, rec: Recording, first_seq: int) -> None:
    seq = int(
        st.number_input(
            "Expand line (seq)",
            min_value=0,
            value=common.int_param("line", first_seq),
            key="raw_line",
        )
    )
    set_params(line=seq)
    ev = queries.event_at(db, rec.id, seq)
    if ev is None or ev.seq != seq:
        st.caption(f"No line {seq}.")
        return
    st.caption(
        f"line {ev.seq} · {ev.direction} · t={ev.t:.6f} s · {len(ev.data):,} bytes"
        + ("" if ev.eol else " · no final newline")
    )
    if ev.obj is not None and ev.direction != "err":
        st.json(visible_data(ev.obj), expanded=2)
    else:
        st.code(visible_text(ev.text[:50000]), language=None, wrap_lines=True)


#: Per tab, what it reads that can take long (kept by the caches), read before the
#: tab draws anything.
_READS: dict[str, Callable[[Store, Recording], object]] = {
    "conversation": _conversation_part,
    "trace": trace.read_rows,
    "control": _control_plane_rows,
    "raw": _raw_types,
}


def _cassette_bytes(db: Store, recording_id: str) -> bytes:
    cassette = db.load_cassette(recording_id)
    out = io.StringIO()
    write_cassette(out, cassette.header, cassette.events)
    return out.getvalue().encode("utf-8")
