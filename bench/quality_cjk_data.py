"""A generated Chinese, Japanese and Korean conversation set for bench/quality_cjk: facts naming
a person or a place, told once among chit-chat in the same language, and a question in that
language asking by the name (in the fact's words, or with --paraphrase in other words: the
name or place is then all a question shares with its fact), with evidence ids.

The chit-chat mentions the same names and places now and then and shares the facts' everyday
words (猫, 先生, 고양이), as long chats do: the name narrows a question down to a few chunks and
the question's other words must find the right one. Some names share characters (王小明,
王小红; 김민준, 김민지), as family names do.
"""

from __future__ import annotations

import random

from bench.quality_data import ConversationSet, Question
from shared.format.messages import Message

# language: (names, places, chit-chat ({n}, {c}: a name, a place),
#            [(fact, question by name in the fact's words, question by name in other words)])
Facts = list[tuple[str, str, str]]
LANGUAGES: dict[str, tuple[list[str], list[str], list[str], Facts]] = {
    "chinese": (
        ["王小明", "王小红", "李静", "李晶晶", "张伟", "张薇", "刘洋", "陈晨", "陈思远", "赵磊",
         "周杰", "林雨桐"],
        ["西湖", "西安", "鼓浪屿", "黄山", "丽江", "洱海", "乌镇", "青岛", "成都", "大理",
         "张家界", "九寨沟"],
        ["哈哈哈是啊", "今天好累啊", "周末有什么打算", "最近天气好奇怪", "我得再喝杯咖啡",
         "工作还行吧没什么特别的", "晚上一起玩游戏吧", "早上堵车堵得厉害", "又想点外卖了",
         "那首新歌一直在我脑子里转", "手机电池掉得好快", "你今天过得怎么样",
         "{n}今天又迟到了", "你还记得{c}吗", "{n}说周末想去{c}", "我也想去旅游",
         "昨天吃了火锅", "老师布置了好多作业", "我想养一只猫", "下个月好忙", "照片发我一下",
         "生日快乐蛋糕好吃"],
        [
            ("我的猫叫{n}，它每天晚上都在沙发上睡觉", "{n}是谁？",
             "我养的{n}是什么动物？"),
            ("上个月我和{n}一起去了{c}，拍了很多照片", "我和谁去了{c}？",
             "上次去{c}旅游是跟哪位朋友？"),
            ("我表妹{n}下个月在{c}结婚", "{n}在哪里结婚？",
             "{n}的婚礼办在什么地方？"),
            ("我的钢琴老师是{n}，她教得很好", "{n}教我什么？",
             "{n}是教哪种乐器的？"),
            ("{n}送了我一本关于{c}的旅游书", "{n}送了我什么？",
             "{n}给过我什么礼物？"),
            ("我们公司下周派我去{c}出差三天", "我什么时候去{c}出差？",
             "单位安排我到{c}干嘛？"),
            ("{n}的生日聚会在一家火锅店，我们吃到很晚", "{n}的生日在哪儿过的？",
             "{n}过生日那天我们在哪吃饭的？"),
            ("我小时候在{c}住过五年", "我在{c}住了多久？",
             "童年时我在{c}待了几年？"),
        ],
    ),
    "japanese": (
        ["山田", "山本", "佐藤", "鈴木", "高橋", "渡辺", "中村", "田中", "小林美咲", "ハナ",
         "ポチ", "吉田"],
        ["雷門", "浅草", "嵐山", "道頓堀", "函館", "金沢", "清水寺", "中洲", "小樽", "鎌倉",
         "札幌", "奈良公園"],
        ["あはは、そうだね", "今日はすごく疲れた", "週末は何する？", "最近天気が変だね",
         "コーヒーもう一杯飲みたい", "仕事はまあまあだったよ", "今夜ゲームしようよ",
         "朝の電車が混んでた", "またピザ頼もうかな", "新しい曲が頭から離れない",
         "スマホの電池がすぐ切れる", "今日はどうだった？",
         "{n}さん、今日来なかったね", "{c}って行ったことある？", "{n}さんが{c}に行きたいって",
         "アイス食べたいな", "犬飼いたいなあ", "先生に怒られた", "お土産買うの忘れた",
         "明日早く起きなきゃ", "花火見たいね", "旅行に行きたい"],
        [
            ("昨日、{n}さんと{c}で抹茶アイスを食べました", "{c}で何を食べた？",
             "{c}に行ったとき、何か甘いものあった？"),
            ("犬の名前は{n}で、靴をかじるのが好きです", "{n}ってどんな犬？",
             "うちのペットの{n}はどんな癖がある？"),
            ("来月、{c}に引っ越すことになりました", "{c}に行くのはいつ？",
             "{c}で新生活が始まるのはいつ？"),
            ("ギターの先生は{n}さんです", "{n}さんは何の先生？",
             "{n}さんに習っている楽器は？"),
            ("{n}さんから{c}のお土産をもらいました", "{n}さんに何をもらった？",
             "{n}さんがくれたプレゼントって何？"),
            ("去年の夏、{c}で花火大会を見ました", "{c}で何を見た？",
             "{c}のイベントで何を楽しんだ？"),
            ("{n}さんは毎朝五時に起きてジョギングしている", "{n}さんは朝何してる？",
             "{n}さんの早朝の習慣は？"),
            ("祖母は{c}の小さな旅館で働いていました", "おばあちゃんは{c}で何をしてた？",
             "おばあちゃんの{c}での仕事は？"),
        ],
    ),
    "korean": (
        ["김민준", "김민지", "이서연", "이서준", "박지호", "최유나", "정하늘", "강도윤", "윤서아",
         "장현우", "한지민", "오세훈"],
        ["해운대", "경복궁", "제주도", "남산타워", "전주한옥마을", "설악산", "광안리", "인사동",
         "부산", "강릉", "북촌", "여의도"],
        ["ㅋㅋㅋ 그러게", "오늘 진짜 피곤하다", "주말에 뭐 해?", "요즘 날씨가 이상해",
         "커피 한 잔 더 마셔야겠다", "일은 그냥 그랬어", "이따가 게임하자",
         "아침에 차가 너무 막혔어", "또 피자 시킬까", "새 노래가 계속 생각나",
         "폰 배터리가 너무 빨리 닳아", "오늘 하루 어땠어?",
         "{n} 씨 오늘 안 왔네", "{c} 가 봤어?", "{n} 씨가 {c}에 가고 싶대", "고양이 키우고 싶다",
         "선생님한테 혼났어", "기념품 사는 거 깜빡했어", "내일 일찍 일어나야 해",
         "불꽃놀이 보고 싶다", "결혼식 가야 돼", "여행 가고 싶다"],
        [
            ("지난주에 {n}하고 {c}에 갔어요", "{n}하고 어디 갔어?",
             "{n} 씨와 최근에 여행 간 곳은?"),
            ("우리 고양이 이름은 {n}인데 소파에서만 자요", "고양이 {n} 어디서 자?",
             "반려묘 {n} 주로 어디서 잠들어?"),
            ("다음 달에 {c}에서 사촌 결혼식이 있어요", "{c}에서 무슨 일 있어?",
             "{c}에서 열리는 가족 행사가 뭐야?"),
            ("피아노 선생님은 {n} 선생님이에요", "{n} 선생님은 뭘 가르쳐?",
             "{n} 선생님한테 무슨 악기 배워?"),
            ("{n}한테 {c} 기념품을 받았어요", "{n}한테 뭐 받았어?",
             "{n} 씨가 준 선물이 뭐였지?"),
            ("작년 여름에 {c}에서 불꽃놀이를 봤어요", "{c}에서 뭐 봤어?",
             "{c} 갔을 때 구경한 게 뭐야?"),
            ("{n} 씨는 매일 아침 다섯 시에 일어나서 조깅해요", "{n} 씨는 아침에 뭐 해?",
             "{n} 씨의 새벽 습관은?"),
            ("할머니는 {c}의 작은 여관에서 일하셨어요", "할머니가 {c}에서 무슨 일 하셨어?",
             "할머니가 {c}에서 하신 직업은?"),
        ],
    ),
}  # fmt: skip


def build(
    seed: int = 11,
    sessions: int = 16,
    per_session: int = 40,
    variants: int = 3,
    paraphrase: bool = False,
) -> ConversationSet:
    """Per language, sessions of its chit-chat; each fact told `variants` times (other names),
    asked in its own words or (`paraphrase`) in others, by the same name or place."""
    rng = random.Random(seed)
    out: list[list[Message]] = []
    questions: list[Question] = []
    for lang, (names, places, chat, facts) in LANGUAGES.items():
        told: dict[int, dict[int, tuple[str, str]]] = {}
        for variant in range(variants):
            for index, (fact, own, other) in enumerate(facts):
                question = other if paraphrase else own
                n, c = rng.choice(names), rng.choice(places)
                session = rng.randrange(sessions)
                mid = f"{lang}-s{session}-fact{index}-{variant}"
                slots = told.setdefault(session, {})
                free = [k for k in range(per_session) if k not in slots]
                slots[rng.choice(free)] = (mid, fact.format(n=n, c=c))
                questions.append(Question(question.format(n=n, c=c), lang, frozenset([mid])))
        lines = (chat, names, places)
        for s in range(sessions):
            out.append(_session(rng, f"{lang}-s{s}", len(out), per_session, lines, told.get(s, {})))
    # the context the plugin excludes: an English session of its own, last
    tail = _session(rng, "en", len(out), 30, (["ok", "sure", "haha"], [], []), {})
    return ConversationSet([*out, tail], questions, [m.id for m in tail])


def _session(
    rng: random.Random, sid: str, day: int, count: int,
    lines: tuple[list[str], list[str], list[str]], facts: dict[int, tuple[str, str]],
) -> list[Message]:  # fmt: skip
    chat, names, places = lines
    start = 1_700_000_000_000 + day * 86_400_000
    messages = []
    for k in range(count):
        line = rng.choice(chat)
        if "{" in line:
            line = line.format(n=rng.choice(names), c=rng.choice(places))
        mid, text = facts.get(k, (f"{sid}-m{k}", line))
        self_ = k % 2 == 1 and k not in facts
        messages.append(
            Message(id=mid, text=text, ts=start + k * 30_000,
                    speaker="Mythos" if self_ else "Alex",
                    user_id=None if self_ else "111", is_self=self_)
        )  # fmt: skip
    return messages
