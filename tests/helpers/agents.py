"""Scripted agent policies for the real Codex and Claude Code CLIs run against the scripted
model server.

:class:`AgentScript` is a policy (``ScriptedModelServer(AgentScript(...))``) that plays one fixed
script whichever CLI asks, told apart by the request's protocol ("responses": Codex, "anthropic":
Claude Code). The script, one step per model call, decided from the history alone (so it is
stateless and deterministic, and concurrent rollouts do not interfere):

1. read the installed skill's body through the agent's own tool: Codex ``exec_command`` with
   ``cat <path from the <skills_instructions> list>``; Claude Code the ``Skill`` tool;
2. run ``command`` (Codex ``exec_command``, Claude Code ``Bash``);
3. write ``answer_file`` in the working directory (Codex ``apply_patch`` when the CLI offers it,
   else ``exec_command`` with a heredoc; Claude Code ``Write``);
4. answer with ``final`` text.

The file's content is the task's answer (the text after ``answer:`` in the prompt, else
``answer``) transformed by the rules the skill body states (:data:`RULES`), so a better skill
scores better; the text of an AGENTS.md / CLAUDE.md in the CLI's context counts as well. Requests that carry none of the agent's tools (a CLI's side calls) get a short
text reply.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from skillopt_ci.sim.protocols import ScriptedReply, ScriptedRequest, ScriptedToolCall

# A rule the skill body may state -> what it does to the answer text.
RULES: dict[str, Any] = {
    "upper case": str.upper,
    "uppercase": str.upper,
    "end with an exclamation mark": lambda text: text.rstrip(".!") + "!",
}

_ROOT = re.compile(r"^- `(\w+)` = `([^`]+)`", re.MULTILINE)
_CODEX_SKILL = re.compile(r"^- ([\w.:-]+): .*\(file: ([^)]+)\)\s*$", re.MULTILINE)
_CLAUDE_SKILLS = "The following skills are available for use with the Skill tool:"
_CLAUDE_SKILL = re.compile(r"^- ([\w.:/-]+): ", re.MULTILINE)
_ANSWER = re.compile(r"answer:\s*(.+)", re.IGNORECASE)
_REMINDER = re.compile(r"<(system-reminder|skills_instructions)>.*?</\1>", re.DOTALL)
# Where each CLI puts an instructions file's text (AGENTS.md / CLAUDE.md) in the first request.
_INSTRUCTIONS = (re.compile(r"# AGENTS\.md instructions for [^\n]*\n\n<INSTRUCTIONS>\n(.*?)</INSTRUCTIONS>", re.DOTALL),
                 re.compile(r"Contents of [^\n]*CLAUDE\.md \(project instructions[^\n]*\n\n(.*?)</system-reminder>",
                            re.DOTALL))


def apply_rules(text: str, skill_body: str) -> str:
    """``text`` after every rule of :data:`RULES` that ``skill_body`` states (in table order)."""
    lowered = skill_body.lower()
    applied: set[Any] = set()
    for phrase, rule in RULES.items():
        if phrase in lowered and rule not in applied:
            applied.add(rule)
            text = rule(text)
    return text


def codex_skills(system: str) -> dict[str, str]:
    """Skill name -> absolute SKILL.md path, from Codex's ``<skills_instructions>`` message
    (short paths like ``r0/name/SKILL.md`` are expanded with its skill roots table)."""
    block = system[system.find("<skills_instructions>"):system.find("</skills_instructions>")]
    roots = dict(_ROOT.findall(block))
    found = {}
    for name, path in _CODEX_SKILL.findall(block):
        head, _, rest = path.partition("/")
        found[name] = f"{roots[head]}/{rest}" if head in roots else path
    return found


def _listing(text: str) -> str:
    """The skills list a CLI shows the model (names and descriptions), or ""."""
    for start, end in (("<skills_instructions>", "</skills_instructions>"), (_CLAUDE_SKILLS, "\n\n")):
        at = text.find(start)
        if at >= 0:
            body = at + len(start)
            body += len(text[body:]) - len(text[body:].lstrip("\n"))  # Claude Code's list starts after a blank line
            stop = text.find(end, body)
            return text[at:stop if stop >= 0 else None]
    return ""


def claude_skills(text: str) -> list[str]:
    """Skill names in the order Claude Code lists them (project skills come first)."""
    at = text.find(_CLAUDE_SKILLS)
    if at < 0:
        return []
    block = text[at + len(_CLAUDE_SKILLS):].lstrip("\n")
    block = block.split("\n\n", 1)[0]
    return _CLAUDE_SKILL.findall(block)


@dataclass(frozen=True)
class AgentScript:
    """The scripted agent (see the module docstring). ``skill``: the skill to read (default: the
    first one listed); ``read_skill=False``: skip step 1, so the agent never consults a skill."""

    answer_file: str = "answer.txt"
    answer: str = "hello world"
    command: str = "ls"
    final: str = "Done: the answer is in {file}."
    skill: str | None = None
    read_skill: bool = True
    when: tuple[str, ...] = ()  # read the skill only if one of these is in both the request and its listing

    def _step(self, request: ScriptedRequest) -> int:
        return sum(len(m.get("tool_calls", ())) for m in request.messages) + (not self._reads(request))

    def _reads(self, request: ScriptedRequest) -> bool:
        """Whether this agent consults a skill for this request: always, never, or (``when``) as a
        model does, when the skill's listed description says it is for such a request."""
        if not self.read_skill:
            return False
        if not self.when:
            return True
        listing = _listing(request.system + "\n" + _all_text(request))
        users = "\n".join(m["content"] for m in request.messages if m["role"] == "user")
        asked = _REMINDER.sub("", users.replace(listing, "") if listing else users).lower()
        listing = listing.lower()
        return any(phrase in asked and phrase in listing for phrase in self.when)

    def __call__(self, request: ScriptedRequest) -> ScriptedReply | str:
        names = {tool["name"] for tool in request.tools}
        if request.protocol == "responses" and "exec_command" in names:
            return self._codex(request, names)
        if request.protocol == "anthropic" and "Skill" in names:
            return self._claude(request)
        return "OK"

    def _task_answer(self, request: ScriptedRequest) -> str:
        for message in request.messages:
            if message["role"] == "user":
                match = _ANSWER.search(message["content"])
                if match:
                    return match.group(1).strip()
        return self.answer

    def _skill_body(self, request: ScriptedRequest) -> str:
        """Everything the agent saw after its first tool call (where the skill body arrives), and
        the text of an AGENTS.md / CLAUDE.md the CLI put in its context."""
        everything = request.system + "\n" + _all_text(request)
        parts = [m.group(1) for pattern in _INSTRUCTIONS for m in pattern.finditer(everything)]
        seen = False
        for message in request.messages:
            if seen and message["role"] != "assistant":
                parts.append(message["content"])
            seen = seen or bool(message.get("tool_calls"))
        return "\n".join(parts)

    def _content(self, request: ScriptedRequest) -> str:
        return apply_rules(self._task_answer(request), self._skill_body(request)) + "\n"

    def _codex(self, request: ScriptedRequest, names: set[str]) -> ScriptedReply:
        step = self._step(request)
        cwd = _between(_all_text(request), "<cwd>", "</cwd>") or "."
        if step == 0:
            skills = codex_skills(request.system + "\n" + _all_text(request))
            if not skills:
                return ScriptedReply("No skill is installed.")
            path = skills.get(self.skill or "", next(iter(skills.values())))
            return _call("exec_command", {"cmd": f"cat {shlex.quote(path)}", "workdir": cwd})
        if step == 1:
            return _call("exec_command", {"cmd": self.command, "workdir": cwd})
        if step == 2:
            content = self._content(request)
            if "apply_patch" in names:
                lines = "".join(f"+{line}\n" for line in content.splitlines())
                patch = f"*** Begin Patch\n*** Add File: {self.answer_file}\n{lines}*** End Patch"
                return ScriptedReply(tool_calls=(ScriptedToolCall("apply_patch", patch, kind="custom"),))
            script = f"cat > {shlex.quote(self.answer_file)} <<'EOF'\n{content}EOF"
            return _call("exec_command", {"cmd": script, "workdir": cwd})
        return ScriptedReply(self.final.format(file=self.answer_file))

    def _claude(self, request: ScriptedRequest) -> ScriptedReply:
        step = self._step(request)
        text = request.system + "\n" + _all_text(request)
        if step == 0:
            skills = claude_skills(text)
            if not skills:
                return ScriptedReply("No skill is installed.")
            name = self.skill if self.skill in skills else skills[0]
            return _call("Skill", {"skill": name})
        if step == 1:
            return _call("Bash", {"command": self.command, "description": "List the files"})
        if step == 2:
            cwd = _line_after(text, "Primary working directory: ") or "."
            return _call("Write", {"file_path": f"{cwd}/{self.answer_file}", "content": self._content(request)})
        return ScriptedReply(self.final.format(file=self.answer_file))


def _call(name: str, arguments: dict[str, Any]) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(name, arguments),))


def _all_text(request: ScriptedRequest) -> str:
    return "\n".join(message["content"] for message in request.messages)


def _between(text: str, start: str, end: str) -> str | None:
    at = text.find(start)
    if at < 0:
        return None
    stop = text.find(end, at)
    return text[at + len(start):stop if stop >= 0 else None].strip()


def _line_after(text: str, marker: str) -> str | None:
    at = text.find(marker)
    return text[at + len(marker):].split("\n", 1)[0].strip() if at >= 0 else None



_DEFAULT = AgentScript()


def play(request: ScriptedRequest) -> ScriptedReply | str:
    """The default :class:`AgentScript`, as a plain function for
    ``python -m skillopt_ci.sim.server --policy helpers.agents:play``."""
    return _DEFAULT(request)


def catalogue_agent(request: ScriptedRequest) -> ScriptedReply | str:
    """A model that loads a listed skill when a word of the request (answer.txt, welcome) is in
    its description, then answers the task's answer transformed by what the skill body says."""
    asked = next(m["content"] for m in request.messages if m["role"] == "user")
    answer = asked.split("answer:", 1)[1].strip()
    loaded = [m["content"] for m in request.messages if m["role"] == "tool"]
    if loaded or not any(t["name"] == "Skill" for t in request.tools):
        return apply_rules(answer, "\n".join(loaded))
    listing = request.system
    for name in claude_skills(listing):
        description = listing.split(f"- {name}: ", 1)[1].split("\n", 1)[0].lower()
        if any(word in asked.lower() and word in description for word in ("answer.txt", "welcome")):
            return ScriptedReply(tool_calls=(ScriptedToolCall("Skill", {"skill": name}),))
    return answer
