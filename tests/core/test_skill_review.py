"""The static review: every finding on a seeded bad skill, none on a clean one, and the folder
read as names, modes and first lines (a link is not followed)."""

from __future__ import annotations

import os

from skillopt_ci.core.skill_review import FolderFile, review_skill
from skillopt_ci.inputs.review import folder_files, review_path

BAD = """---
name: reports
description: A helper for reports.
---
# Reports

## Steps
#### Deep

- Run `scripts/build.py` to build the report before anything else.
- Read [the API](references/api.md), [the site](https://x.example) and [below](#steps).
- Always round the totals to two decimals in the table.
- Never round the totals to two decimals in the table.
- Always round the totals to two decimals in the table.
- Put the summary of the findings at the top of the report file.
- Put the summary of findings at the top of the report file please.
#

```python
print(1)
"""
GOOD = """---
name: reports
description: Build the weekly report. Use when a request asks for the weekly report or its totals.
---
# Reports

- Run `scripts/build.py` first; read [the API](references/api.md) for the fields.
- Round totals to two decimals.

```sh
scripts/build.py --week 12
```
"""
FILES = {"scripts/build.py": FolderFile(False, "print('x')"), "references/api.md": FolderFile(False, "# API")}


def by_rule(findings):
    return {(f.rule, f.path.rsplit("/", 1)[-1], f.line) for f in findings}


def test_every_finding_of_a_seeded_bad_skill_is_on_its_line():
    found = review_skill(BAD, "skills/reports/SKILL.md", {"scripts/build.py": FolderFile(False, "print('x')")},
                         base_text="# Reports\n\n" + "- a rule that is long enough to count.\n" * 200)
    assert by_rule(found) == {
        ("vague-description", "SKILL.md", 3),
        ("markdown", "SKILL.md", 8),  # level 4 under level 2
        ("missing-file", "SKILL.md", 11),  # references/api.md; the URL and the anchor are not files
        ("contradiction", "SKILL.md", 13),
        ("duplicate-rule", "SKILL.md", 14),
        ("near-duplicate-rule", "SKILL.md", 16),
        ("markdown", "SKILL.md", 17),  # an empty heading
        ("markdown", "SKILL.md", 19),  # the fence never closed
        ("size", "SKILL.md", None),  # shrank sharply against the base
        ("script-not-executable", "build.py", 1),
        ("script-no-shebang", "build.py", 1),
    }
    levels = {(f.rule, f.line): f.level for f in found}
    assert levels[("missing-file", 11)] == levels[("markdown", 19)] == "error"  # the agent would be misled
    assert levels[("near-duplicate-rule", 16)] == levels[("markdown", 8)] == "notice"
    assert "references/api.md" in next(f.message for f in found if f.rule == "missing-file")


def test_a_clean_skill_has_no_findings_and_a_bad_name_is_a_front_matter_finding():
    files = {**FILES, "scripts/build.py": FolderFile(True, "#!/usr/bin/env python3")}
    assert review_skill(GOOD, "skills/reports/SKILL.md", files) == []
    found = review_skill(GOOD.replace("name: reports", "name: Reports_X"), "skills/reports/SKILL.md", files)
    assert {f.rule for f in found} == {"front-matter"} and all(f.line == 1 for f in found)
    broken = review_skill("---\nname: [x\n---\nbody\n", "skills/reports/SKILL.md", files)
    assert [(f.rule, f.level) for f in broken] == [("front-matter", "error")]
    assert review_skill(GOOD, "notes.md", None) == []  # a lone file has no folder to check


def test_the_folder_is_read_as_data_and_a_link_is_not_followed(tmp_path):
    skill = tmp_path / "reports"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(BAD)
    (skill / "scripts/build.py").write_text("#!/usr/bin/env python3\nprint(1)\n")
    os.chmod(skill / "scripts/build.py", 0o755)
    secret = tmp_path / "secret.txt"
    secret.write_text("#!SECRET-VALUE\n")
    (skill / "references").mkdir()
    (skill / "references/api.md").symlink_to(secret)
    files = folder_files(skill)
    assert files == {"scripts/build.py": FolderFile(True, "#!/usr/bin/env python3")}  # the link is not a file
    found = review_path(skill / "SKILL.md", "skills/reports/SKILL.md")
    assert "missing-file" in {f.rule for f in found}  # a link out of the folder does not count as the file
    assert not {"script-not-executable", "script-no-shebang"} & {f.rule for f in found}
