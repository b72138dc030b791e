"""The agents file (YAML or TOML): who the agents are, how they are named and how they chunk."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.embedding.bm25 import (
    DEFAULT_LANGUAGE,
    DEFAULT_LEXICAL_THRESHOLD,
    DEFAULT_LEXICAL_WEIGHT,
    MAX_LEXICAL_THRESHOLD,
    MAX_LEXICAL_WEIGHT,
    known_language,
)
from shared.errors import ConfigError, InvalidAgentName, UnknownAgent
from shared.format.chunking import ChunkRules
from shared.format.naming import COLLECTION_BASE, collection_name, sanitize_agent_name

log = logging.getLogger(__name__)

# Settings an agent may take from the file's `defaults` section.
_DEFAULTABLE = (
    "legacy_user_label",
    "chunk_max_chars",
    "chunk_min_chars",
    "chunk_min_messages",
    "chunk_gap_seconds",
    "min_message_chars",
    "idle_flush_seconds",
    "recall",
    "fusion",
    "language",
    "lexical_threshold",
    "lexical_weight",
    "time_words",
)


class AgentDefaults(BaseModel):
    """What every agent, listed or not, gets unless it says otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    legacy_user_label: str = "User"
    chunk_max_chars: int = Field(800, gt=0)
    chunk_min_chars: int = Field(500, ge=0)
    chunk_min_messages: int = Field(2, ge=1)
    chunk_gap_seconds: float = Field(6 * 3600, gt=0)
    min_message_chars: int = Field(5, ge=0)
    idle_flush_seconds: float = Field(60, gt=0)
    # Hybrid recall (README "Hybrid recall"): dense and BM25 legs fused in Qdrant, or dense only.
    recall: Literal["hybrid", "dense"] = "hybrid"
    fusion: Literal["dbsf", "rrf"] = "dbsf"
    # The BM25 stemmer and stopwords; a language Snowball does not know is not stemmed.
    # chinese, japanese, korean and auto also cut CJK text into bigrams (shared/embedding/cjk.py),
    # chinese (and auto on Han alone) into jieba's words too (shared/embedding/chinese.py),
    # japanese (and auto on text with kana) into SudachiPy's (shared/embedding/japanese.py).
    # Changing it re-makes the terms of the whole collection (the backfill does it).
    language: str = Field(DEFAULT_LANGUAGE, min_length=1, max_length=32)
    # The BM25 score a point needs to enter the fusion from the lexical leg (see README).
    lexical_threshold: float = Field(
        DEFAULT_LEXICAL_THRESHOLD, ge=0, le=MAX_LEXICAL_THRESHOLD, allow_inf_nan=False
    )
    # How much the BM25 leg counts in the fusion: dense + w x lexical (see README).
    lexical_weight: float = Field(
        DEFAULT_LEXICAL_WEIGHT, ge=0, le=MAX_LEXICAL_WEIGHT, allow_inf_nan=False
    )
    # English time words in a query ("last weekend") put that window's chunks first (README).
    time_words: bool = True

    @model_validator(mode="after")
    def _min_below_max(self) -> AgentDefaults:
        if self.chunk_min_chars > self.chunk_max_chars:
            raise ValueError(
                f"chunk_min_chars ({self.chunk_min_chars}) is above "
                f"chunk_max_chars ({self.chunk_max_chars})"
            )
        return self


class AgentConfig(AgentDefaults):
    """One agent: its key in requests, its collection and its speaker names."""

    name: str = Field(min_length=1)
    collection: str | None = Field(None, min_length=1)
    self_speaker: str | None = Field(None, min_length=1)
    speaker_aliases: dict[str, str] = Field(default_factory=dict)
    # The Discord plugin cannot send a key, so an agent is open unless it asks for one.
    require_key: bool = False

    @field_validator("speaker_aliases", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        # YAML reads an unquoted Discord snowflake as an int; ids are strings everywhere else.
        if isinstance(value, Mapping):
            return {str(key): str(alias) for key, alias in value.items()}
        return value

    @model_validator(mode="after")
    def _has_collection(self) -> AgentConfig:
        try:
            collection_name(self.name, self.collection)
        except InvalidAgentName as exc:
            raise ValueError(str(exc)) from exc
        return self

    @property
    def speaker(self) -> str:
        """The agent's own name in chunk text."""
        return self.self_speaker or self.name

    @property
    def collection_name(self) -> str:
        return collection_name(self.name, self.collection)

    @property
    def rules(self) -> ChunkRules:
        return ChunkRules(
            max_chars=self.chunk_max_chars,
            min_chars=self.chunk_min_chars,
            min_messages=self.chunk_min_messages,
            gap_seconds=self.chunk_gap_seconds,
            min_message_chars=self.min_message_chars,
        )


class ApiKey(BaseModel):
    """A key clients may send; limited to some agents, or (without `agents`) good for all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    key: str = Field(min_length=16)
    agents: tuple[str, ...] | None = None

    @property
    def all_agents(self) -> bool:
        """A key without `agents` is good for every agent and the endpoints spanning them."""
        return self.agents is None


class AgentsFile(BaseModel):
    """The whole file: whether unlisted agents are accepted, shared defaults, and the agents."""

    model_config = ConfigDict(extra="forbid")

    accept_unlisted_agents: bool = False
    defaults: AgentDefaults = Field(default_factory=AgentDefaults)
    api_keys: list[ApiKey] = Field(default_factory=list)
    agents: list[dict[str, Any]] = Field(default_factory=list)


UNLISTED_KEPT = 1024


class Agents:
    """Looks agents up by their request key. An agent is its collection: every spelling whose
    collection is a listed agent's is that agent (its keys, require_key and settings)."""

    def __init__(
        self,
        agents: list[AgentConfig],
        *,
        accept_unlisted: bool,
        defaults: AgentDefaults | None = None,
        api_keys: list[ApiKey] | None = None,
    ) -> None:
        self.accept_unlisted = accept_unlisted
        self.defaults = defaults or AgentDefaults()
        self.api_keys = list(api_keys or [])
        self._by_key = {agent.name.casefold(): agent for agent in agents}
        self._by_collection = {agent.collection_name: agent for agent in agents}
        self._scopes = {key.name: self._collections_of(key) for key in self.api_keys}
        # Unlisted agents as made from the defaults, by name: every /save asked for one
        # (validating a new AgentConfig each time); frozen, so sharing them is safe. Bounded:
        # made-up names only refill it.
        self._unlisted: dict[str, AgentConfig] = {}

    @property
    def listed(self) -> list[AgentConfig]:
        return list(self._by_key.values())

    def languages(self) -> frozenset[str]:
        """The BM25 languages in use: the listed agents' and the defaults' (unlisted agents')."""
        return frozenset({self.defaults.language, *(agent.language for agent in self.listed)})

    def get(self, name: str) -> AgentConfig:
        """The agent for a request's `bot`; an unlisted one is made from the defaults if allowed."""
        agent = self._by_key.get(name.casefold())
        if agent is not None:
            return agent
        # Raises InvalidAgentName for a name that can become no collection.
        collection = collection_name(name)
        agent = self._by_collection.get(collection)
        if agent is not None:
            return agent
        if not self.accept_unlisted:
            raise UnknownAgent(f"unknown agent {name!r}: it is not in the agents file")
        made = self._unlisted.get(name)
        if made is not None:
            return made
        try:
            made = AgentConfig(name=name, **self.defaults.model_dump())
        except ValidationError as exc:
            raise InvalidAgentName(_first_message(exc)) from exc
        if len(self._unlisted) >= UNLISTED_KEPT:
            self._unlisted.clear()
        self._unlisted[name] = made
        return made

    def is_listed(self, agent: AgentConfig) -> bool:
        return agent.collection_name in self._by_collection

    def collection_of(self, name: str) -> str:
        """The collection a name reaches, listed or not (unlisted agents refused or not)."""
        agent = self._by_key.get(name.casefold())
        return agent.collection_name if agent is not None else collection_name(name)

    def language_of(self, collection: str) -> str:
        """The BM25 language of a collection's terms: its listed agent's, else the default
        every unlisted agent gets (as the backfill makes them)."""
        agent = self._by_collection.get(collection)
        return agent.language if agent is not None else self.defaults.language

    def name_for_collection(self, collection: str) -> str | None:
        """A name that reaches this collection: the listed agent's, else the character name
        st-qdrant-memory made `mem_<name>` of (None when no name can reach it). Whether that
        agent is accepted is `get`'s to say."""
        agent = self._by_collection.get(collection)
        if agent is not None:
            return agent.name
        base, _, name = collection.partition("_")
        if base == COLLECTION_BASE and name and sanitize_agent_name(name) == name:
            return name
        return None

    def key_allows(self, key: ApiKey, agent: AgentConfig | None) -> bool:
        """Whether a key opens an agent's endpoints (None: the endpoints spanning all agents),
        judged on the agent's collection, so no other spelling of a name escapes the scope."""
        scope = self._scopes.get(key.name)
        if scope is None:
            return True
        return agent is not None and agent.collection_name in scope

    def _collections_of(self, key: ApiKey) -> frozenset[str] | None:
        if key.agents is None:
            return None
        return frozenset(self.collection_of(name) for name in key.agents)


def _first_message(exc: ValidationError) -> str:
    return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")


def _where(loc: tuple[Any, ...]) -> str:
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc]
    return "".join(parts).lstrip(".") or "(top level)"


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the agents file: {exc.strerror}") from exc
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(text)
        return yaml.safe_load(text) or {}
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {path.suffix.lstrip('.').upper()}: {exc}") from exc


def _agent(raw: Mapping[str, Any], index: int, defaults: AgentDefaults, path: Path) -> AgentConfig:
    try:
        return AgentConfig(**{**defaults.model_dump(include=set(_DEFAULTABLE)), **raw})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _where(("agents", index, *error["loc"]))
        raise ConfigError(f"{path}: {where}: {_first_message(exc)}") from exc


def _refuse_shared_collections(agents: list[AgentConfig], path: Path) -> None:
    """Two entries reaching one collection would be one agent with two sets of rules (keys,
    speakers, chunking): refuse the file instead of guessing which one wins."""
    names: dict[str, int] = {}
    collections: dict[str, int] = {}
    for index, agent in enumerate(agents):
        key = agent.name.casefold()
        if key in names:
            raise ConfigError(
                f"{path}: agents[{index}].name: {agent.name!r} is listed twice "
                f"(also agents[{names[key]}]; names are case-insensitive)"
            )
        collection = agent.collection_name
        if collection in collections:
            other = agents[collections[collection]].name
            raise ConfigError(
                f"{path}: agents[{index}]: {agent.name!r} and agents[{collections[collection]}] "
                f"{other!r} both resolve to the collection {collection!r}; an agent is its "
                f"collection, so list it once (or set a different `collection`)"
            )
        names[key] = index
        collections[collection] = index


def load_agents(path: Path | None) -> Agents:
    """Read and check the agents file once at start; no file means any agent name is accepted."""
    if path is None:
        return Agents([], accept_unlisted=True)
    raw = _read(path)
    try:
        parsed = AgentsFile.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(f"{path}: {_where(error['loc'])}: {_first_message(exc)}") from exc
    agents = [_agent(item, i, parsed.defaults, path) for i, item in enumerate(parsed.agents)]
    _refuse_shared_collections(agents, path)
    _tell_unknown_languages(agents, parsed.defaults, path)
    return Agents(
        agents,
        accept_unlisted=parsed.accept_unlisted_agents,
        defaults=parsed.defaults,
        api_keys=parsed.api_keys,
    )


_UNKNOWN_LANGUAGE = (
    "%s: language %r (%s) has no stemmer and does not cut Chinese, Japanese or Korean text: "
    "BM25 terms are its whole words, unstemmed. For CJK text use chinese, japanese, korean or "
    "auto (README, Hybrid recall)"
)


def _tell_unknown_languages(agents: list[AgentConfig], defaults: AgentDefaults, path: Path) -> None:
    """A language Snowball does not know is taken (never an error), but said at load: `ja` or
    `zh` is a code, not a name, and would leave a CJK agent without lexical recall."""
    own: dict[str, list[str]] = {}
    for agent in agents:
        if agent.language != defaults.language and not known_language(agent.language):
            own.setdefault(agent.language, []).append(agent.name)
    for language, names in own.items():
        log.warning(_UNKNOWN_LANGUAGE, path, language, "agents " + ", ".join(names))
    if not known_language(defaults.language):
        names = [a.name for a in agents if a.language == defaults.language]
        taking = "defaults, so every agent without its own" + (
            f": {', '.join(names)}" if names else ""
        )
        log.warning(_UNKNOWN_LANGUAGE, path, defaults.language, taking)
