"""Synthetic client traffic: the Discord plugin's re-sent windows (some of their messages edited),
and unique message streams."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

WORDS = [
    "lighthouse",
    "harbor",
    "storm",
    "lantern",
    "coffee",
    "morning",
    "train",
    "ticket",
    "garden",
    "rain",
    "window",
    "dragon",
    "castle",
    "forest",
    "river",
    "bridge",
    "music",
    "guitar",
    "piano",
    "story",
    "book",
    "letter",
    "secret",
    "promise",
    "friend",
    "festival",
    "market",
    "bread",
    "cheese",
    "wine",
    "autumn",
    "winter",
    "summer",
    "spring",
    "island",
    "boat",
    "sail",
    "map",
    "key",
    "door",
    "tower",
    "night",
    "star",
    "moon",
    "sun",
    "cloud",
    "mountain",
    "valley",
    "snow",
    "fire",
    "candle",
    "dream",
    "memory",
]
START_MS = 1_718_000_000_000
BASE_ID = 1_250_000_000_000_000_000


def sentence(rng: random.Random, low: int = 20, high: int = 220) -> str:
    """Chat-like text of low..high characters."""
    target = rng.randint(low, high)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < target:
        words.append(rng.choice(WORDS))
    text = " ".join(words)[:target].strip()
    return text.capitalize() + rng.choice((".", "!", "", "...", " :)"))


@dataclass
class Channel:
    agent: str
    channel_id: str
    guild_id: str
    window: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=30))


class Turn(NamedTuple):
    """One /save body, how many of its messages are new, and how many are edits of known ones."""

    body: dict[str, Any]
    new: int
    edited: int


class DiscordTraffic:
    """Each turn re-sends a channel's last `window` messages, of which 1-2 are new and, when asked,
    some known ones come with another text (a user edited them)."""

    def __init__(
        self,
        *,
        channels: int = 100,
        agents: int = 5,
        window: int = 30,
        seed: int = 1,
        prefix: str = "bench",
    ) -> None:
        self.rng = random.Random(seed)
        # Edits draw from their own stream: the same seed gives the same turns with or without.
        self.edit_rng = random.Random(f"edits-{seed}")
        self.next_id = BASE_ID + seed * 10_000_000_000
        self.clock = START_MS
        self.agents = [f"{prefix}{a}" for a in range(agents)]
        self.channels = [
            Channel(self.agents[c % agents], str(BASE_ID + 9_000_000 + c), str(900 + c % 7))
            for c in range(channels)
        ]
        for channel in self.channels:
            channel.window = deque(maxlen=window)

    def message(self, channel: Channel) -> dict[str, Any]:
        self.next_id += 1
        self.clock += self.rng.randint(1_000, 30_000)
        is_self = self.rng.random() < 0.5
        user = "111111111111111111" if not is_self else "222222222222222222"
        msg: dict[str, Any] = {
            "speaker_kind": "self" if is_self else "user",
            "discord_user_id": user,
            "text": sentence(self.rng),
            "message_id": str(self.next_id),
            "ts": self.clock,
            "channel_id": channel.channel_id,
            "guild_id": channel.guild_id,
        }
        if not is_self:
            msg["speaker_name"] = "alex"
        return msg

    def fill(self, channel: Channel) -> dict[str, Any]:
        """A full window of new messages (the first turn in a channel)."""
        while len(channel.window) < (channel.window.maxlen or 30):
            channel.window.append(self.message(channel))
        return {"bot": channel.agent, "messages": list(channel.window)}

    def turn(self, edits: int = 0) -> Turn:
        """The next request (a random channel): 1-2 new messages, and `edits` of the known ones
        with a new text, which the later turns re-send (as Discord shows an edited message)."""
        channel = self.rng.choice(self.channels)
        new = self.rng.randint(1, 2)
        for _ in range(new):
            channel.window.append(self.message(channel))
        edited = self._edit(channel, known=len(channel.window) - new, count=edits)
        return Turn({"bot": channel.agent, "messages": list(channel.window)}, new, edited)

    def _edit(self, channel: Channel, *, known: int, count: int) -> int:
        """Give `count` of the window's first `known` messages (sent before) another text;
        returns how many (fewer when the window holds fewer known ones)."""
        picked = self.edit_rng.sample(range(known), min(count, known)) if count else []
        for i in picked:
            old = channel.window[i]
            text = old["text"]
            while text == old["text"]:
                text = sentence(self.edit_rng)
            # A new dict: the bodies of earlier turns share the old one and keep its text.
            channel.window[i] = {**old, "text": text}
        return len(picked)


def unique_bodies(
    total: int,
    *,
    per_request: int,
    channels: int = 100,
    agents: int = 5,
    seed: int = 7,
    prefix: str = "pipe",
) -> list[dict[str, Any]]:
    """`total` new messages, `per_request` of one channel per body, channels round-robin."""
    traffic = DiscordTraffic(channels=channels, agents=agents, seed=seed, prefix=prefix)
    bodies, sent, c = [], 0, 0
    while sent < total:
        channel = traffic.channels[c % channels]
        n = min(per_request, total - sent)
        bodies.append(
            {"bot": channel.agent, "messages": [traffic.message(channel) for _ in range(n)]}
        )
        sent, c = sent + n, c + 1
    return bodies
