"""``sessiontree chat``: a terminal agent over a session file (the ``chat`` extra for the
prompt; the ``llm`` extra for the model adapters). The interactive part is
:mod:`sessiontree.cli.chat_app`, imported when the command runs."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..errors import MissingExtra, SessionTreeError
from ._app import SESSION_MAYBE, cli, open_session, reports_errors
from ._progress import is_terminal

__all__ = ["chat"]

_PROVIDER_SPECS = {"anthropic": "anthropic", "openai": "openai"}


def _model_spec(session: Any, spec: str | None) -> str:
    if spec:
        return spec
    model = session.build_context().model
    provider = getattr(model, "provider", None)
    model_id = getattr(model, "model_id", None)
    if isinstance(provider, str) and isinstance(model_id, str) and provider in _PROVIDER_SPECS:
        return f"{_PROVIDER_SPECS[provider]}:{model_id}"
    raise click.UsageError("choose a model with --model PROVIDER:MODEL (or SESSIONTREE_MODEL), "
                           "e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, openai-responses:gpt-5")


def _load_extension(reference: str) -> Any:
    import importlib

    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attribute) if attribute else module
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"{reference}: {exc}", param_hint="--extension") from None


@cli.command()
@click.argument("file", type=SESSION_MAYBE, required=False)
@click.option("--continue", "-c", "resume", is_flag=True,
              help="Continue the most recent session of this folder (pi's folder for the "
                   "current directory, or --dir).")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Where new sessions go (default: pi's folder for the current directory).")
@click.option("--model", "-m", "model_spec", metavar="SPEC", envvar="SESSIONTREE_MODEL",
              show_envvar=True, help="PROVIDER:MODEL: anthropic:…, openai:… (Chat Completions), "
                                     "openai-responses:…; default: the session's model.")
@click.option("--base-url", default=None, help="The API's base URL (default: OPENAI_BASE_URL / "
                                               "ANTHROPIC_BASE_URL, else the provider's).")
@click.option("--system", "system_prompt", default=None, help="The system prompt.")
@click.option("--extension", "-e", "extensions", multiple=True, metavar="MODULE[:ATTR]",
              help="Load an extension (an object with setup(api), or a function of api).")
@click.option("--no-installed-extensions", is_flag=True,
              help="Do not load the extensions installed as sessiontree.extensions entry points.")
@click.option("--summarizer", "summarizer_spec", metavar="SPEC", default=None,
              envvar="SESSIONTREE_SUMMARIZER", show_envvar=True,
              help="Who writes summaries for /tree and /compact: offline (default), "
                   "openai:MODEL or anthropic:MODEL.")
@reports_errors
def chat(file: str | None, resume: bool, directory: str | None, model_spec: str | None,
         base_url: str | None, system_prompt: str | None, extensions: tuple[str, ...],
         no_installed_extensions: bool, summarizer_spec: str | None) -> None:
    """Chat with a model in FILE (a new session when omitted): answers stream in as Markdown,
    tool calls and results show as they happen, every message is appended as it arrives, and
    the status line counts tokens and dollars. Ctrl+C cancels a reply cleanly; Ctrl+D leaves.

    Commands: /tree, /fork, /label, /compact, /name, /model, /export, /help, /quit, and every
    command of the loaded extensions. Reads one prompt per line when stdin is not a terminal.
    Exits 1 when a turn failed (the model's error after its retries), 0 otherwise.
    """
    from rich.console import Console

    from ..agent import AgentSession
    from ..providers import model_from_spec
    from ..providers import model_spec as spec_of
    from ..session import Session
    from ..stores.jsonl import default_session_dir, list_sessions
    from .chat_app import ChatApp, PlainInput, TerminalInput

    if file and resume:
        raise click.UsageError("give FILE or --continue, not both")
    folder = directory or str(default_session_dir(os.getcwd()))
    if resume:
        try:
            recent = list_sessions(folder)
        except SessionTreeError:
            recent = []
        file = recent[0].path if recent else None
    if file and os.path.exists(file):
        session = open_session(file)
    elif file:
        session = _new_at(file)
    else:
        session = Session.create(folder)
    options: dict[str, Any] = {"base_url": base_url} if base_url else {}
    model = model_from_spec(_model_spec(session, model_spec), **options)
    summarizer = None
    if summarizer_spec and summarizer_spec != "offline":
        from ..summarize import summarizer_from_spec

        summarizer = summarizer_from_spec(summarizer_spec)
    agent = AgentSession(session, model, system_prompt=system_prompt,
                         extensions=[_load_extension(e) for e in extensions],
                         installed_extensions=not no_installed_extensions, agent_id="chat")
    interactive = is_terminal() and os.isatty(0)
    if interactive:
        try:
            reader: Any = TerminalInput(_history_file())
        except ImportError as exc:
            raise MissingExtra("chat needs the 'chat' extra in a terminal: pip install "
                               f"'sessiontree[chat]' ({exc})") from None
    else:
        reader = PlainInput(sys.stdin)
    console = Console(highlight=False, soft_wrap=not interactive)
    app = ChatApp(agent, console, reader, summarizer=summarizer,
                  summarizer_name=summarizer_spec or "offline summarizer",
                  model_options=options, interactive=interactive)
    where = session.file or "(not written until the first message)"
    console.print(f"sessiontree chat · {spec_of(model)} · {where} · /help", style="dim")
    try:
        app.loop()
    finally:
        if app.session.file:
            click.echo(f"session: {app.session.file}", err=True)
        app.session.close()
    if app.failed:
        click.echo(f"{app.failed} turn(s) failed", err=True)
        raise SystemExit(1)


def _new_at(file: str) -> Any:
    """A new session that will be written to exactly ``file`` (nothing is written before the
    first message, as with every new session)."""
    from ..session import Session
    from ..stores.jsonl import JsonlFile

    fresh = Session.in_memory(os.getcwd())
    return Session(JsonlFile(file), header=fresh.header)


def _history_file() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "sessiontree", "chat-history")
