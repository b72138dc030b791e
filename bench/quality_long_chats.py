"""Conversations shaped like long real chats, for bench/quality: many sessions of uneven length,
a small cast of friends and places named again and again in the chit-chat, facts about them told
once, and questions that reuse the chat's own nouns (the name is common, the noun is not), with
a paraphrase of each fact as the control."""

from __future__ import annotations

import random

from bench.quality_data import ConversationSet, Question
from shared.format.messages import Message

CAST = ["Marisol", "Thaddeus", "Priya", "Lucian", "Anouk", "Okonkwo", "Zinnia", "Rafferty"]
PLACES = ["the market", "the gym", "the office", "the pub", "the park", "the library"]
TOPICS = ["the game", "work", "the weather", "dinner", "the weekend", "that show", "rent"]
# Chit-chat that names the cast and places all the time, as real long chats do.
CHAT = [
    "ran into {n} at {p} again", "{n} says hi by the way", "{n} keeps talking about {t}",
    "me and {n} are going to {p} later", "did {n} text you about {t}?", "{n} was late again lol",
    "honestly {n} is right about {t}", "I told {n} we would be at {p} by six",
    "{n} sent me a meme about {t}", "haha {n} would love that", "ugh {t} again",
    "we should invite {n} next time", "I'm at {p}, it's packed", "no idea, ask {n}",
    "{n} thinks {t} is overrated", "lol yes", "same here honestly", "I'm so tired today",
    "what are you up to later?", "{n} and I watched that show about {t}",
]  # fmt: skip
# (fact told once, question reusing its nouns, paraphrase without them)
FACTS = [
    ("{n}'s cat is called Pickles, she found him behind {p}",
     "What is {n}'s cat called?", "What name did my friend give her pet?"),
    ("{n} is learning the accordion, lessons every Thursday",
     "Which instrument is {n} learning?", "What music is my friend picking up?"),
    ("{n} got a job at the aquarium feeding the penguins",
     "Where does {n} work now, the aquarium?", "What is my friend's new occupation?"),
    ("{n} is allergic to peanuts, she nearly ended up in hospital at {p}",
     "What is {n} allergic to?", "Which food makes my friend sick?"),
    ("{n} bought a red motorbike from his uncle",
     "Who sold {n} the red motorbike?", "Where did my friend get his new vehicle?"),
    ("{n} is moving to Tallinn in March for a research post",
     "When is {n} moving to Tallinn?", "When does my friend relocate abroad?"),
    ("{n}'s sister is getting married in a lighthouse in Bergen",
     "Where is {n}'s sister's wedding, the lighthouse?", "Where is the family ceremony?"),
    ("{n} broke her ankle at {p} playing squash",
     "How did {n} break her ankle?", "How did my friend get injured?"),
    ("{n} is writing a novel about a haunted submarine",
     "What is {n}'s novel about?", "What story is my friend working on?"),
    ("{n} adopted a greyhound called Comet from the shelter",
     "What is {n}'s greyhound called?", "What did my friend bring home from the rescue?"),
    ("{n} won the pub quiz with a question about volcanoes",
     "What question won {n} the pub quiz?", "How did my friend win the contest?"),
    ("{n} is training for the Lisbon marathon in October",
     "When is {n}'s Lisbon marathon?", "Which race is my friend preparing for?"),
]  # fmt: skip


def build(seed: int = 11, sessions: int = 48) -> ConversationSet:
    """Sessions of 30 to 120 messages; each fact told once (three cast members each) in a
    random session other than the last, which is the reader's context."""
    rng = random.Random(seed)
    told: dict[int, dict[int, tuple[str, str]]] = {}
    questions = []
    lengths = [rng.randrange(30, 121) for _ in range(sessions)]
    for index, (fact, shared, para) in enumerate(FACTS):
        mids = []
        for variant, n in enumerate(rng.sample(CAST, 3)):
            session = rng.randrange(sessions - 1)
            mid = f"s{session}-fact{index}-{variant}"
            text = fact.format(n=n, p=rng.choice(PLACES))
            slots = told.setdefault(session, {})
            free = [k for k in range(lengths[session]) if k not in slots]
            slots[rng.choice(free)] = (mid, text)
            questions.append(Question(shared.format(n=n), "shared words", frozenset([mid])))
            mids.append(mid)
        # without the name it asks about any of the three: one of them answers it
        questions.append(Question(para, "paraphrase", frozenset(mids)))
    out = [_session(rng, s, lengths[s], told.get(s, {})) for s in range(sessions)]
    return ConversationSet(out, questions, [m.id for m in out[-1][-30:]])


def _session(
    rng: random.Random, s: int, count: int, facts: dict[int, tuple[str, str]]
) -> list[Message]:
    start = 1_700_000_000_000 + s * 86_400_000
    messages = []
    for k in range(count):
        mid, text = facts.get(k, (f"s{s}-m{k}", ""))
        if not text:
            line = rng.choice(CHAT)
            text = line.format(n=rng.choice(CAST), p=rng.choice(PLACES), t=rng.choice(TOPICS))
        self_ = k % 2 == 1 and k not in facts
        messages.append(
            Message(
                id=mid,
                text=text,
                ts=start + k * 45_000,
                speaker="Mythos" if self_ else "Alex",
                user_id=None if self_ else "111",
                is_self=self_,
            )
        )
    return messages
