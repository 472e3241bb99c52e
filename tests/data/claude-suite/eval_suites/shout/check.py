"""Pass when the agent wrote the expected text to answer.txt in its workspace."""

from skillopt_ci.core.errors import ScoringError


def score(output, task, rollout):
    if rollout is None or rollout.workspace is None:
        raise ScoringError("this check reads the rollout's workspace")
    answer = rollout.workspace / "answer.txt"
    written = answer.read_text().strip() if answer.is_file() else ""
    passed = written == task.expected
    return {"score": 1.0 if passed else 0.0, "passed": passed,
            "feedback": "" if passed else f"answer.txt holds {written!r}, expected {task.expected!r}"}
