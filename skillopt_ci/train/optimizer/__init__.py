"""The optimizer side of training: reflect on trajectories, merge and select edits, keep the
optimizer's memory (buffer, meta skill) and write the slow-update block.

Every call to the optimizer model answers JSON; a malformed answer is retried once with the
validation error, then skipped (recorded as an error), never applied.
"""

from skillopt_ci.train.optimizer.ask import Answer, ask_json
from skillopt_ci.train.optimizer.buffer import (
    OptimizerBuffer,
    RejectedEdit,
    Rejection,
    RejectionKind,
    classify_rejection,
)
from skillopt_ci.train.optimizer.merge import merge_proposals
from skillopt_ci.train.optimizer.meta import EpochEdit, MetaResult, update_meta_skill
from skillopt_ci.train.optimizer.proposals import (
    ParsedProposal,
    ProposalError,
    parse_proposal,
    read_proposal,
)
from skillopt_ci.train.optimizer.reflect import (
    Proposal,
    ReflectionContext,
    reflect,
    render_trajectories,
    render_trajectory,
    split_results,
)
from skillopt_ci.train.optimizer.select import edit_budget, select_applicable, select_edits
from skillopt_ci.train.optimizer.slow_update import (
    SlowUpdateInput,
    SlowUpdateResult,
    TaskChange,
    block_content,
    categorize,
    slow_update,
)

__all__ = [
    "Answer",
    "EpochEdit",
    "MetaResult",
    "OptimizerBuffer",
    "ParsedProposal",
    "Proposal",
    "ProposalError",
    "ReflectionContext",
    "RejectedEdit",
    "Rejection",
    "RejectionKind",
    "SlowUpdateInput",
    "SlowUpdateResult",
    "TaskChange",
    "ask_json",
    "block_content",
    "categorize",
    "classify_rejection",
    "edit_budget",
    "merge_proposals",
    "parse_proposal",
    "read_proposal",
    "reflect",
    "render_trajectories",
    "render_trajectory",
    "select_applicable",
    "select_edits",
    "slow_update",
    "split_results",
    "update_meta_skill",
]
