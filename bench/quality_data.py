"""A generated multi-session conversation set for bench/quality: facts told once among chit-chat,
and for each fact a question sharing its words and one paraphrasing it, with evidence ids."""

from __future__ import annotations

import random
from dataclasses import dataclass

from shared.format.messages import Message

NAMES = [
    "Biscuit",
    "Marisol",
    "Thaddeus",
    "Ingrid",
    "Okonkwo",
    "Priya",
    "Lucian",
    "Yevgenia",
    "Caspian",
    "Delphine",
    "Rafferty",
    "Anouk",
    "Bartholomew",
    "Zinnia",
    "Leopold",
    "Saoirse",
]
CITIES = ["Lisbon", "Osaka", "Reykjavik", "Tallinn", "Cartagena", "Valparaiso", "Hobart", "Bergen"]
CHAT = [
    "haha yeah that sounds about right", "honestly I am so tired today", "did you see the game",
    "what are you up to this weekend", "the weather has been so weird lately",
    "I need more coffee before I can think", "lol that meme was perfect",
    "work was fine, nothing special", "I watched a documentary about octopuses",
    "my back hurts from sitting all day", "we should play something later tonight",
    "I keep forgetting to water the plants", "traffic was terrible this morning",
    "thinking about ordering pizza again", "that new song is stuck in my head",
    "I can't believe it's already december", "my phone battery dies so fast now",
    "cleaning the flat took forever", "anyway how was your day",
    "I might go for a run tomorrow morning",
]  # fmt: skip
# (fact told, question sharing its words, question paraphrasing it)
FACTS = [
    ("My dog is called {n}, she chews every shoe in the house",
     "What is my dog called?", "Do you remember the name of my furry companion?"),
    ("My sister {n} just moved to {c} for a new job",
     "Where did my sister {n} move to?", "Which town did my sibling relocate to for work?"),
    ("I started cello lessons last month, my teacher is {n}",
     "Who is my cello teacher?", "Who gives me my music classes?"),
    ("I found out I am allergic to shellfish, my throat swelled up at dinner",
     "What am I allergic to?", "Is there any food that gives me a bad reaction?"),
    ("I bought a used green Volvo from {n} down the street",
     "Who sold me the green Volvo?", "From whom did I purchase my vehicle?"),
    ("We fly to {c} in April for my cousin {n}'s wedding",
     "When do we fly to {c}?", "When is the family celebration abroad happening?"),
    ("I got promoted to team lead at the bakery today",
     "What was I promoted to at the bakery?", "What happened with my career recently?"),
    ("I finished reading the novel by {n}, the ending made me cry",
     "Which author's novel did I finish?", "Whose book did I just complete reading?"),
    ("My grandfather {n} turns ninety on Sunday, we are baking a cake",
     "When does my grandfather {n} turn ninety?", "Which old relative has a big birthday soon?"),
    ("I broke my wrist skateboarding at the park near {c} station",
     "How did I break my wrist?", "What injury did I get recently and how?"),
]  # fmt: skip


@dataclass(frozen=True)
class Question:
    text: str
    kind: str  # "shared words" or "paraphrase"
    evidence: frozenset[str]  # ids of the messages that answer it


@dataclass(frozen=True)
class ConversationSet:
    sessions: list[list[Message]]
    questions: list[Question]
    recent_ids: list[str]  # the last 30 messages: the plugin's context, excluded


def build(seed: int = 7, sessions: int = 24, per_session: int = 60) -> ConversationSet:
    """Sessions of chit-chat; each fact told once (two variants each) in a random session."""
    rng = random.Random(seed)
    plans: dict[int, list[tuple[int, str]]] = {}
    questions = []
    for variant in range(2):
        for index, (told, shared, para) in enumerate(FACTS):
            n, c = rng.choice(NAMES), rng.choice(CITIES)
            session = rng.randrange(sessions - 1)  # never the last: that is the context
            mid = f"s{session}-fact{index}-{variant}"
            plans.setdefault(session, []).append((rng.randrange(per_session), mid))
            text = told.format(n=n, c=c)
            questions.append(Question(shared.format(n=n, c=c), "shared words", frozenset([mid])))
            questions.append(Question(para.format(n=n, c=c), "paraphrase", frozenset([mid])))
            FACT_TEXT[mid] = text
    out = [_session(rng, s, per_session, plans.get(s, [])) for s in range(sessions)]
    recent = [m.id for m in out[-1][-30:]]
    return ConversationSet(out, questions, recent)


FACT_TEXT: dict[str, str] = {}


def _session(rng: random.Random, s: int, count: int, facts: list[tuple[int, str]]) -> list[Message]:
    at = dict(facts)
    start = 1_700_000_000_000 + s * 86_400_000
    messages = []
    for k in range(count):
        mid = at.get(k, f"s{s}-m{k}")
        text = FACT_TEXT[mid] if mid in at.values() else rng.choice(CHAT)
        self_ = k % 2 == 1 and mid not in at.values()
        messages.append(
            Message(
                id=mid,
                text=text,
                ts=start + k * 30_000,
                speaker="Mythos" if self_ else "Alex",
                user_id=None if self_ else "111",
                is_self=self_,
            )
        )
    return messages
