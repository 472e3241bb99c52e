"""Writing the sticky comment from a flow: :meth:`Publisher.upsert_comment` under the Action's
rules for GitHub failures (a warning, never an exit code), plus what a held comment means.

When the newest-push rule (see :mod:`skillopt_ci.github.publisher`) leaves the comment alone,
the log gets a notice and the job summary a line saying why; the verdict, the check run on this
run's own commit and the exit code are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillopt_ci.github.publisher import Publisher
from skillopt_ci.github.runner_files import command
from skillopt_ci.render.markdown import escape_inline

if TYPE_CHECKING:
    from skillopt_ci.github.context import Context


def post_sticky(ctx: Context, publisher: Publisher, number: int, body: str, *, create: bool = True) -> str | None:
    """Upsert the sticky comment ``body`` (it starts with its marker); its URL, or None when
    nothing was written (held, or GitHub failed: both are said in the log and the summary)."""
    result = ctx.publish(lambda: publisher.upsert_comment(number, body, create=create))
    if result is None:
        return None
    if result.held:
        command("notice", f"sticky comment: {result.held}", stream=ctx.out, title="skillopt-ci: a newer push")
        ctx.summary(f"> **Sticky comment:** {escape_inline(result.held, 500)}.\n")
    return result.url
