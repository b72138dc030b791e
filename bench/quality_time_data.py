"""Time-bound questions for bench/quality_time: the same kind of event told on six days, and a
question naming the day of one of them in words ("last weekend", "in May") relative to NOW."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

from bench.quality_data import CHAT, ConversationSet, Question
from shared.format.messages import Message

NOW = int(datetime(2026, 12, 4, 18, 0, tzinfo=UTC).timestamp() * 1000)  # a Friday
# (time words, the day the event is told, the window's first and last day), written out by hand
PHRASES = [
    ("yesterday", date(2026, 12, 3), date(2026, 12, 3), date(2026, 12, 3)),
    ("two days ago", date(2026, 12, 2), date(2026, 12, 2), date(2026, 12, 2)),
    ("last weekend", date(2026, 11, 29), date(2026, 11, 28), date(2026, 11, 29)),
    ("last week", date(2026, 11, 25), date(2026, 11, 23), date(2026, 11, 29)),
    ("last Tuesday", date(2026, 12, 1), date(2026, 12, 1), date(2026, 12, 1)),
    ("three weeks ago", date(2026, 11, 12), date(2026, 11, 9), date(2026, 11, 15)),
    ("last month", date(2026, 11, 6), date(2026, 11, 1), date(2026, 11, 30)),
    ("in May", date(2026, 5, 17), date(2026, 5, 1), date(2026, 5, 31)),
    ("on June 3rd", date(2026, 6, 3), date(2026, 6, 3), date(2026, 6, 3)),
    ("in March", date(2026, 3, 9), date(2026, 3, 1), date(2026, 3, 31)),
    ("in 2025", date(2025, 8, 20), date(2025, 1, 1), date(2025, 12, 31)),
]
# (event told, question sharing its words, question in other words, six details)
EVENTS = [
    ("we cooked {x} for dinner", "What did we cook {p}?", "What was for dinner {p}?",
     ["pumpkin soup", "lamb stew", "mushroom risotto", "paella", "ramen", "lasagne"]),
    ("we watched {x} at the cinema", "Which movie did we watch {p}?", "What film did we see {p}?",
     ["Dune", "Arrival", "Paddington", "Alien", "Heat", "Amelie"]),
    ("we hiked up {x} and got soaked", "Where did we hike {p}?",
     "Which mountain did we climb {p}?",
     ["Ben Nevis", "Snowdon", "Mount Tam", "Table Mountain", "Mont Ventoux", "Pico"]),
    ("I bought {x} at the flea market", "What did I buy at the flea market {p}?",
     "What did I pick up second hand {p}?",
     ["a brass lamp", "an old typewriter", "a wool rug", "a chess set", "a teapot", "a mirror"]),
    ("we played {x} until midnight", "What game did we play {p}?",
     "Which game kept us up {p}?",
     ["Catan", "Mario Kart", "poker", "Scrabble", "Risk", "Monopoly"]),
    ("I called my {x} for an hour", "Who did I call {p}?", "Who was I on the phone with {p}?",
     ["grandma", "brother", "old teacher", "aunt", "best friend", "landlord"]),
    ("Priya gave me {x} as a gift", "What gift did Priya give me {p}?",
     "What present did I receive {p}?",
     ["a scarf", "a plant", "a novel", "a candle", "a mug", "a watch"]),
    ("we saw {x} play live", "Which band did we see live {p}?", "Who did we see perform {p}?",
     ["Radiohead", "a jazz trio", "the symphony", "Bjork", "a punk band", "Coldplay"]),
    ("we had lunch at {x}", "Where did we have lunch {p}?", "Which restaurant did we go to {p}?",
     ["Luigi's", "the Thai place", "the sushi bar", "Cafe Roma", "the diner", "the noodle bar"]),
    ("I finished reading {x}", "Which book did I finish {p}?", "What did I read {p}?",
     ["Dracula", "Emma", "Beloved", "Ulysses", "Rebecca", "Middlemarch"]),
    ("we played {x} in the park", "What sport did we play in the park {p}?",
     "What did we do outside together {p}?",
     ["frisbee", "football", "badminton", "cricket", "volleyball", "tennis"]),
]  # fmt: skip
FIRST_DAY = date(2026, 1, 5)  # distractors fall from here to the day before NOW


def build(seed: int = 11) -> ConversationSet:
    """Each event kind with one phrase: told once inside its window and five times outside."""
    rng = random.Random(seed)
    sessions: list[list[Message]] = []
    questions: list[Question] = []
    for k, ((told, shared, other, details), (words, inside, first, last)) in enumerate(
        zip(EVENTS, PHRASES, strict=True)
    ):
        days = [inside, *_days_outside(rng, first, last, 5)]
        for n, (day, detail) in enumerate(zip(days, details, strict=True)):
            sessions.append(_session(rng, f"e{k}-{n}", day, told.format(x=detail), detail))
        evidence = frozenset([f"e{k}-0"])
        questions.append(Question(shared.format(p=words), "shared words", evidence))
        questions.append(Question(other.format(p=words), "paraphrase", evidence))
    today = datetime.fromtimestamp(NOW / 1000, UTC).date()
    sessions.append(_session(rng, "today", today, rng.choice(CHAT), "nothing"))
    return ConversationSet(sessions, questions, [m.id for m in sessions[-1][-30:]])


def _days_outside(rng: random.Random, first: date, last: date, count: int) -> list[date]:
    span = (datetime.fromtimestamp(NOW / 1000, UTC).date() - FIRST_DAY).days
    days: list[date] = []
    while len(days) < count:
        day = FIRST_DAY + timedelta(days=rng.randrange(span))
        if not first <= day <= last and day not in days:
            days.append(day)
    return days


def _session(rng: random.Random, event: str, day: date, text: str, detail: str) -> list[Message]:
    """The event and the character's answer between chit-chat, from 10:00 UTC, 30 s apart."""
    start = int(datetime(day.year, day.month, day.day, 10, tzinfo=UTC).timestamp() * 1000)
    reply = f"oh yes, {detail}, what a day that was"
    lines = [rng.choice(CHAT), rng.choice(CHAT), text, reply, rng.choice(CHAT), rng.choice(CHAT)]
    return [
        Message(
            id=event if line is text else f"{event}-m{i}",
            text=line,
            ts=start + i * 30_000,
            speaker="Mythos" if i % 2 else "Alex",
            user_id=None if i % 2 else "111",
            is_self=bool(i % 2),
        )
        for i, line in enumerate(lines)
    ]
