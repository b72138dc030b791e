"""A generated Chinese, Japanese and Korean conversation set for bench/quality_cjk: facts naming
a person or a place, told once among chit-chat in the same language, and a question in that
language asking by the name, with evidence ids."""

from __future__ import annotations

import random

from bench.quality_data import ConversationSet, Question
from shared.format.messages import Message

# language: (names, places, chit-chat, [(fact told, question by the name)])
LANGUAGES: dict[str, tuple[list[str], list[str], list[str], list[tuple[str, str]]]] = {
    "chinese": (
        ["王小明", "李静", "张伟", "刘洋", "陈晨", "赵磊"],
        ["西湖", "鼓浪屿", "黄山", "丽江", "洱海", "乌镇"],
        [
            "哈哈哈是啊",
            "今天好累啊",
            "周末有什么打算",
            "最近天气好奇怪",
            "我得再喝杯咖啡",
            "工作还行吧没什么特别的",
            "晚上一起玩游戏吧",
            "早上堵车堵得厉害",
            "又想点外卖了",
            "那首新歌一直在我脑子里转",
            "手机电池掉得好快",
            "你今天过得怎么样",
        ],
        [
            ("我的猫叫{n}，它每天晚上都在沙发上睡觉", "{n}是谁？"),
            ("上个月我和{n}一起去了{c}，拍了很多照片", "我和谁去了{c}？"),
            ("我表妹{n}下个月在{c}结婚", "{n}在哪里结婚？"),
            ("我的钢琴老师是{n}，她教得很好", "{n}教我什么？"),
        ],
    ),
    "japanese": (
        ["山田", "佐藤", "鈴木", "高橋", "渡辺", "伊藤"],
        ["雷門", "浅草", "嵐山", "道頓堀", "函館", "金沢"],
        [
            "あはは、そうだね",
            "今日はすごく疲れた",
            "週末は何する？",
            "最近天気が変だね",
            "コーヒーもう一杯飲みたい",
            "仕事はまあまあだったよ",
            "今夜ゲームしようよ",
            "朝の電車が混んでた",
            "またピザ頼もうかな",
            "新しい曲が頭から離れない",
            "スマホの電池がすぐ切れる",
            "今日はどうだった？",
        ],
        [
            ("昨日、{n}さんと{c}で抹茶アイスを食べました", "{c}で何を食べた？"),
            ("犬の名前は{n}で、靴をかじるのが好きです", "{n}ってどんな犬？"),
            ("来月、{c}に引っ越すことになりました", "{c}に行くのはいつ？"),
            ("ギターの先生は{n}さんです", "{n}さんは何の先生？"),
        ],
    ),
    "korean": (
        ["김민준", "이서연", "박지호", "최유나", "정하늘", "강도윤"],
        ["해운대", "경복궁", "제주도", "남산타워", "전주한옥마을", "설악산"],
        [
            "ㅋㅋㅋ 그러게",
            "오늘 진짜 피곤하다",
            "주말에 뭐 해?",
            "요즘 날씨가 이상해",
            "커피 한 잔 더 마셔야겠다",
            "일은 그냥 그랬어",
            "이따가 게임하자",
            "아침에 차가 너무 막혔어",
            "또 피자 시킬까",
            "새 노래가 계속 생각나",
            "폰 배터리가 너무 빨리 닳아",
            "오늘 하루 어땠어?",
        ],
        [
            ("지난주에 {n}이랑 {c}에 갔어요", "{n}이랑 어디 갔어?"),
            ("우리 고양이 이름은 {n}인데 소파에서만 자요", "{n}는 누구야?"),
            ("다음 달에 {c}에서 사촌 결혼식이 있어요", "{c}에서 무슨 일 있어?"),
            ("피아노 선생님은 {n} 선생님이에요", "{n} 선생님은 뭘 가르쳐?"),
        ],
    ),
}


def build(seed: int = 11, sessions: int = 8, per_session: int = 40) -> ConversationSet:
    """Per language, sessions of its chit-chat; each fact told twice (other names) somewhere."""
    rng = random.Random(seed)
    out: list[list[Message]] = []
    questions: list[Question] = []
    for lang, (names, places, chat, facts) in LANGUAGES.items():
        told: dict[int, dict[int, tuple[str, str]]] = {}
        for variant in range(2):
            for index, (fact, question) in enumerate(facts):
                n, c = rng.choice(names), rng.choice(places)
                session = rng.randrange(sessions)
                mid = f"{lang}-s{session}-fact{index}-{variant}"
                slots = told.setdefault(session, {})
                free = [k for k in range(per_session) if k not in slots]
                slots[rng.choice(free)] = (mid, fact.format(n=n, c=c))
                questions.append(Question(question.format(n=n, c=c), lang, frozenset([mid])))
        for s in range(sessions):
            out.append(_session(rng, f"{lang}-s{s}", len(out), per_session, chat, told.get(s, {})))
    # the context the plugin excludes: an English session of its own, last
    tail = _session(rng, "en", len(out), 30, ["ok", "sure", "haha"], {})
    return ConversationSet([*out, tail], questions, [m.id for m in tail])


def _session(
    rng: random.Random, sid: str, day: int, count: int, chat: list[str],
    facts: dict[int, tuple[str, str]],
) -> list[Message]:  # fmt: skip
    start = 1_700_000_000_000 + day * 86_400_000
    messages = []
    for k in range(count):
        mid, text = facts.get(k, (f"{sid}-m{k}", rng.choice(chat)))
        self_ = k % 2 == 1 and k not in facts
        messages.append(
            Message(id=mid, text=text, ts=start + k * 30_000,
                    speaker="Mythos" if self_ else "Alex",
                    user_id=None if self_ else "111", is_self=self_)
        )  # fmt: skip
    return messages
