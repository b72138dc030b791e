"""Tests of the agents file: parsing, defaults, lookup and the errors a bad file gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.agents import AgentConfig, AgentDefaults, Agents, load_agents
from shared.errors import ConfigError, InvalidAgentName, UnknownAgent
from shared.format.chunking import ChunkRules

YAML = """
accept_unlisted_agents: false
defaults:
  chunk_max_chars: 1500
  chunk_min_chars: 1200
  chunk_min_messages: 3
agents:
  - name: Seraphina
    speaker_aliases:
      123456789012345678: Alex
      "222": Sam
  - name: mythos
    self_speaker: Mythos
    chunk_max_chars: 1400
    legacy_user_label: Alex
  - name: 雪乃
    collection: mem_yukino
"""

TOML = """
accept_unlisted_agents = true

[[agents]]
name = "Dr. Smith"
self_speaker = "Dr. Smith"
idle_flush_seconds = 5

[agents.speaker_aliases]
"111" = "Alex"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_file(tmp_path: Path) -> None:
    agents = load_agents(write(tmp_path, "agents.yaml", YAML))
    seraphina = agents.get("seraphina")
    assert seraphina.collection_name == "mem_seraphina"
    assert seraphina.speaker == "Seraphina"
    assert seraphina.speaker_aliases == {"123456789012345678": "Alex", "222": "Sam"}
    assert seraphina.rules == ChunkRules(max_chars=1500, min_chars=1200, min_messages=3)
    mythos = agents.get("Mythos")
    assert (mythos.speaker, mythos.legacy_user_label, mythos.chunk_max_chars) == (
        "Mythos",
        "Alex",
        1400,
    )
    assert agents.get("雪乃").collection_name == "mem_yukino"
    with pytest.raises(UnknownAgent, match="unknown agent 'polaris'"):
        agents.get("polaris")


def test_toml_file_and_unlisted_agents(tmp_path: Path) -> None:
    agents = load_agents(write(tmp_path, "agents.toml", TOML))
    smith = agents.get("dr. smith")
    assert smith.collection_name == "mem_dr_smith"
    assert smith.idle_flush_seconds == 5
    assert smith.speaker_aliases == {"111": "Alex"}
    polaris = agents.get("polaris")
    assert (polaris.collection_name, polaris.speaker, polaris.rules) == (
        "mem_polaris",
        "polaris",
        ChunkRules(),
    )


def test_no_file_accepts_any_agent_by_name() -> None:
    agents = load_agents(None)
    assert agents.get("Neko-chan!").collection_name == "mem_neko-chan"
    with pytest.raises(InvalidAgentName, match="set `collection`"):
        agents.get("雪乃")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "a.yaml",
            "agents:\n  - name: ok\n  - name: x\n    chunk_max_chars: -1\n",
            r"a\.yaml: agents\[1\]\.chunk_max_chars: Input should be greater than 0",
        ),
        (
            "b.yaml",
            "agents:\n  - name: 雪乃\n",
            r"b\.yaml: agents\[0\]: agent name '雪乃' .* set `collection`",
        ),
        (
            "c.yaml",
            "agents:\n  - name: ok\n    colour: red\n",
            r"c\.yaml: agents\[0\]\.colour: Extra inputs are not permitted",
        ),
        (
            "d.yaml",
            "accept_unlisted: yes\n",
            r"d\.yaml: accept_unlisted: Extra inputs are not permitted",
        ),
        (
            "e.yaml",
            "agents:\n  - name: A\n  - name: a\n",
            r"e\.yaml: agents\[1\]\.name: 'a' is listed twice",
        ),
        ("f.yaml", "agents: [\n", r"f\.yaml: not valid YAML"),
        ("g.toml", "agents = [", r"g\.toml: not valid TOML"),
        (
            "h.yaml",
            "agents:\n  - name: x\n    chunk_min_chars: 900\n",
            r"h\.yaml: agents\[0\]: chunk_min_chars \(900\) is above chunk_max_chars \(800\)",
        ),
        (
            "i.yaml",
            "agents:\n  - just-a-string\n",
            r"i\.yaml: agents\[0\]: Input should be a valid dictionary",
        ),
        (
            "k.yaml",
            "agents:\n  - name: x\n    recall: lexical\n",
            r"k\.yaml: agents\[0\]\.recall: Input should be 'hybrid' or 'dense'",
        ),
        (
            "l.yaml",
            "defaults:\n  lexical_threshold: -1\n",
            r"l\.yaml: defaults\.lexical_threshold: Input should be greater than or equal to 0",
        ),
        (
            # YAML's .inf: serialized as null for a Qdrant server, it would admit every lexical
            # match instead of none
            "m.yaml",
            "defaults:\n  lexical_threshold: .inf\n",
            r"m\.yaml: defaults\.lexical_threshold: Input should be a finite number",
        ),
        (
            "n.yaml",
            "agents:\n  - name: x\n    lexical_threshold: 1.0e+39\n",
            r"n\.yaml: agents\[0\]\.lexical_threshold: Input should be less than or equal to",
        ),
        (
            "o.yaml",
            "defaults:\n  lexical_weight: -0.5\n",
            r"o\.yaml: defaults\.lexical_weight: Input should be greater than or equal to 0",
        ),
        (
            "q.yaml",
            "agents:\n  - name: x\n    lexical_weight: 11\n",
            r"q\.yaml: agents\[0\]\.lexical_weight: Input should be less than or equal to 10",
        ),
        (
            "s.yaml",
            "defaults:\n  lexical_weight: .nan\n",
            r"s\.yaml: defaults\.lexical_weight: Input should be a finite number",
        ),
        (
            "j.yaml",
            "defaults:\n  chunk_min_messages: 0\n",
            r"j\.yaml: defaults\.chunk_min_messages: Input should be greater than or equal to 1",
        ),
    ],
)
def test_bad_file_names_file_key_and_problem(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_agents(write(tmp_path, name, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read the agents file"):
        load_agents(tmp_path / "nope.yaml")


def test_two_agents_reaching_one_collection_are_refused(tmp_path: Path) -> None:
    """An agent is its collection: `Dr. Smith` and `dr smith` would be one agent twice."""
    path = tmp_path / "agents.yaml"
    path.write_text("agents:\n  - name: Dr. Smith\n  - name: dr smith\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"agents\[1\].*both resolve to the collection 'mem_dr_smith'"
    ):
        load_agents(path)


def test_recall_settings_per_agent_and_from_defaults(tmp_path: Path) -> None:
    text = (
        "accept_unlisted_agents: true\n"
        "defaults:\n  recall: dense\n  language: german\n  lexical_threshold: 3.5\n"
        "  lexical_weight: 1.5\n  time_words: false\n"
        "agents:\n  - name: a\n    recall: hybrid\n    fusion: rrf\n    language: klingon\n"
        "    lexical_weight: 0\n    time_words: true\n"
    )
    agents = load_agents(write(tmp_path, "r.yaml", text))
    listed = agents.get("a")
    assert (listed.recall, listed.fusion, listed.language) == ("hybrid", "rrf", "klingon")
    assert (listed.lexical_threshold, listed.lexical_weight) == (3.5, 0.0)
    assert listed.time_words is True
    assert agents.get("b").time_words is False
    unlisted = agents.get("b")
    assert (unlisted.recall, unlisted.fusion, unlisted.language) == ("dense", "dbsf", "german")
    assert unlisted.lexical_weight == 1.5
    plain = load_agents(write(tmp_path, "p.yaml", "agents:\n  - name: c\n")).get("c")
    assert (plain.recall, plain.fusion, plain.language, plain.lexical_threshold) == (
        "hybrid", "dbsf", "english", 5.0,
    )  # fmt: skip
    assert plain.lexical_weight == 2.0
    assert plain.time_words is True


NAMED = [
    ("mem_seraphina", "seraphina"),  # st-qdrant-memory's collection of an unlisted character
    ("mem_yukino", "雪乃"),  # a listed agent's configured collection
    ("mem_dr_smith", "dr_smith"),
    ("mem_", None),
    ("mem__x", None),  # st-qdrant-memory would have made mem_x
    ("mem_Aria", None),  # not lower-case: no character name becomes it
    ("mem", None),  # st-qdrant-memory's shared collection: no agent's
    ("other_x", None),
]


@pytest.mark.parametrize(("collection", "name"), NAMED)
def test_the_name_that_reaches_a_collection(collection: str, name: str | None) -> None:
    agents = Agents([AgentConfig(name="雪乃", collection="mem_yukino")], accept_unlisted=True)
    assert agents.name_for_collection(collection) == name


def test_a_collections_language_is_its_agents_else_the_default() -> None:
    agents = Agents(
        [AgentConfig(name="hans", language="german")],
        accept_unlisted=True,
        defaults=AgentDefaults(language="french"),
    )
    assert agents.language_of("mem_hans") == "german"
    assert agents.language_of("mem_pierre") == "french"  # an unlisted agent's, as made
    assert agents.get("pierre").language == agents.language_of(agents.collection_of("pierre"))


def test_a_language_that_neither_stems_nor_cuts_cjk_is_told_at_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`language: ja` (a code, not a name) was taken in silence: no stemming and no CJK cutting,
    so a Japanese agent's questions matched nothing lexically, and nothing said why."""
    path = write(tmp_path, "agents.yaml", (
        "defaults:\n  language: zh\n"
        "agents:\n  - name: yui\n    language: ja\n  - name: lin\n"
        "  - name: ana\n    language: Japanese\n  - name: hans\n    language: german\n"
    ))  # fmt: skip
    with caplog.at_level("WARNING", logger="shared.agents"):
        agents = load_agents(path)
    assert agents.get("yui").language == "ja"  # still taken: never an error
    told = [r.getMessage() for r in caplog.records if r.name == "shared.agents"]
    assert len(told) == 2
    assert "'ja'" in told[0] and "yui" in told[0] and "japanese" in told[0]
    assert "'zh'" in told[1] and "defaults" in told[1] and "lin" in told[1]
