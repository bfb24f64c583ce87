"""Skills as the toolbox gives them to code: listed by ``skills()``, loaded
by ``skill(name)``, and loaded too by ``skills(name)``, the call a small
model writes."""

import pytest

from mahtab import tools


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    skills = tmp_path / ".mahtab" / "skills"
    skills.mkdir(parents=True)
    (skills / "table-summary.md").write_text("Summarise a table.\n\n1. Print its shape.\n")
    return tmp_path


def test_skills_lists_and_skill_loads(project):
    assert tools.skills() == {"table-summary": "Summarise a table."}
    assert tools.skill("table-summary").endswith("1. Print its shape.\n")


def test_skills_given_a_name_loads_it_as_skill_does(project):
    assert tools.skills("table-summary") == tools.skill("table-summary")
    assert tools.skills("table-summary", "sales") == tools.skill("table-summary", "sales")
    assert "Arguments: sales" in tools.skills("table-summary", "sales")
    with pytest.raises(LookupError, match=r"no skill named 'tidy' \(available: table-summary\)"):
        tools.skills("tidy")
