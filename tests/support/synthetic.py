"""Generator of synthetic data in the LongMemEval format, for offline tests and benchmarks.

The output mimics ``longmemeval_s.json`` / ``longmemeval_m.json``: one JSON array of
instances, each with a haystack of chat sessions. Filler sessions come from a shared pool and
repeat verbatim across haystacks (as ``sharegpt_*`` / ``ultrachat_*`` sessions do in the real
data); answer sessions are specific to one instance.

All text is made of :data:`VOCABULARY` words (plus ``.``, ``,`` and ``?``), so the tiny test
model of :mod:`support.tinymodel` has no unknown tokens. Words are grouped into topics:
filler sessions talk about topics too, so a question's topic words also match some filler
sessions and retrieval is not trivial.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)

# Words every session and question uses: stop words and everyday verbs, nouns, adjectives.
_COMMON = """
a about after again all also am an and any are as at back be because been before being
both but by can could day did do does done each even every few first for from get go going
good great had has have he her here him his how i if in into is it its just know last like
long lot made make many may me more most much my new next no not now of off old on once one
only or other our out over own really right said same see she should so some still such take
than thank that the their them then there these they thing think this those through time to
too two up us very want was way we week well went were what when where which while who why
will with would year yes you your ever never always often something anything maybe pretty
quite sure help need tell told remember mentioned asked let find found keep kept try tried
use used start started plan planned buy bought got give gave recently today yesterday month
weekend morning evening since around during enough say idea ideas days things
""".split()

# Real topic words; pseudo-words are added to every topic below to reach a realistic size.
_TOPICS: dict[str, str] = {
    "garden": "garden tomato basil compost seedling trowel mulch orchid fern greenhouse soil",
    "cooking": "recipe oven skillet garlic risotto marinade saffron dough simmer ladle spatula",
    "travel": "flight passport hostel itinerary luggage airport visa ferry museum beach hotel",
    "fitness": "marathon treadmill yoga dumbbell stretching cardio squat sneakers gym pilates",
    "music": "guitar violin chord melody concert album drummer piano rehearsal lyrics banjo",
    "pets": "puppy kitten leash aquarium hamster vet parrot collar kibble terrier litter",
    "finance": "budget savings mortgage invoice dividend pension receipt ledger tax loan bank",
    "work": "meeting deadline manager promotion spreadsheet client office project payroll",
    "reading": "novel chapter library author paperback poetry memoir bookmark fiction essay",
    "movies": "cinema trailer director sequel documentary popcorn screenplay actor premiere",
    "cars": "engine tire mechanic sedan brakes mileage dashboard gasoline hybrid garage",
    "health": "doctor allergy vitamin prescription dentist therapy clinic fever insulin sleep",
    "school": "homework semester professor thesis lecture exam tuition campus diploma quiz",
    "art": "painting canvas sketch watercolor gallery sculpture easel charcoal pottery ink",
    "games": "chess puzzle console tournament dice arcade strategy controller poker quest",
    "home": "kitchen sofa curtain carpet furniture lamp bathroom attic plumber drawer shelf",
    "family": "cousin grandma nephew wedding birthday anniversary sister brother niece uncle",
    "tech": "laptop keyboard router software battery monitor charger printer tablet server",
    "weather": "rain snow storm umbrella forecast humidity thunder breeze frost drought",
    "shopping": "discount coupon mall boutique checkout cart jacket sneaker sweater scarf",
    "sports": "soccer tennis basketball referee stadium goalie racket hockey baseball golf",
    "food": "sushi bakery croissant espresso smoothie noodle dumpling bagel yogurt tofu",
    "hobby": "knitting origami stamp camping fishing hiking climbing birdwatching sewing",
    "volunteer": "charity shelter donation fundraiser volunteer pantry mentor cleanup drive",
}

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_PSEUDO_PER_TOPIC = 32


def _pseudo_words(count: int, taken: set[str]) -> list[str]:
    """Deterministic pronounceable pseudo-words (``consonant vowel`` syllables, no RNG)."""
    syllables = [c + v for c, v in itertools.product(_CONSONANTS, _VOWELS)]
    words: list[str] = []
    # a stride through all syllable pairs (+ an ending) spreads the words over the alphabet
    combos = [a + b + e for a, b in itertools.product(syllables, syllables) for e in ("", "n", "r")]
    step = 97  # coprime to len(combos) == 14700
    for i in range(len(combos)):
        word = combos[(i * step) % len(combos)]
        if word not in taken:
            taken.add(word)
            words.append(word)
            if len(words) == count:
                break
    return words


def _build_topics() -> dict[str, tuple[str, ...]]:
    taken = set(_COMMON)
    topics: dict[str, list[str]] = {}
    for name, words in _TOPICS.items():
        fresh = [w for w in dict.fromkeys([name, *words.split()]) if w not in taken]
        taken.update(fresh)
        topics[name] = fresh
    pseudo = _pseudo_words(_PSEUDO_PER_TOPIC * len(topics), taken)
    for i, name in enumerate(topics):
        topics[name].extend(pseudo[i :: len(topics)])
    return {name: tuple(words) for name, words in topics.items()}


TOPIC_WORDS: dict[str, tuple[str, ...]] = _build_topics()
COMMON_WORDS: tuple[str, ...] = tuple(dict.fromkeys(_COMMON))
VOCABULARY: tuple[str, ...] = COMMON_WORDS + tuple(word for words in TOPIC_WORDS.values() for word in words)
"""All words the generator uses, in a fixed order (the default vocabulary of the tiny model)."""

# Placeholders: k1-k3 are topic words shared with the gold sessions, x1/x2 topic words that
# are NOT in them (an AND of all question words then rarely matches the gold session).
# Every fourth instance asks a terse keyword query instead, which an AND query can match.
_QUESTIONS: dict[str, str] = {
    "single-session-user": "What did I say about the {k1} {k2} {x1} and my {k3} {x2}?",
    "single-session-assistant": "You told me about the {k1} {x1} {k2}, what was the {k3} {x2} again?",
    "single-session-preference": "Can you give me some {x1} {k1} {k2} ideas for my {k3} {x2}?",
    "multi-session": "How many {k1} {x1} things did I get for my {k2} {k3} {x2}?",
    "knowledge-update": "What is my {k1} {k2} {x1} now, after the {k3} {x2}?",
    "temporal-reasoning": "How many days before the {k1} {x1} did I start the {k2} {k3} {x2}?",
}
# a is the answer word of the session
_USER_EVIDENCE: tuple[str, ...] = (
    "My {k1} {k2} is {a} and the {k3} was great.",
    "I got a {a} {k1} for the {k2} {k3} last week.",
    "We used {a} with the {k1} and {k2} at the {k3}.",
    "I really like {a} {k1}, and my {k2} {k3} too.",
)
_ASSISTANT_EVIDENCE = "You should try the {a} {k1} with your {k2} {k3}."
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TOPIC_SHARE = 0.3  # fraction of chatter words drawn from the session's topic words
_SESSION_TOPIC_WORDS = 6


@dataclass
class DatasetSummary:
    """Counts of a written dataset; ``pairs`` are the non-abstention (evaluable) instances."""

    instances: int
    abstention: int
    pairs: int
    per_category: dict[str, int] = field(default_factory=dict)
    unique_sessions: int = 0
    session_slots: int = 0


def _chatter(rng: random.Random, n_words: int, topic_words: list[str]) -> str:
    """``n_words`` words in sentences of 6-12 words, a share of them topic words."""
    sentences: list[str] = []
    while n_words > 0:
        length = min(n_words, rng.randint(6, 12))
        n_words -= length
        words = [
            rng.choice(topic_words) if rng.random() < _TOPIC_SHARE else rng.choice(COMMON_WORDS) for _ in range(length)
        ]
        if length > 7 and rng.random() < 0.3:
            words[rng.randrange(2, length - 2)] += ","
        sentence = " ".join(words)
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(sentences)


def _session(
    rng: random.Random,
    turns: int,
    words_per_turn: int,
    topic_words: list[str],
    evidence: tuple[int, str] | None = None,
) -> list[dict[str, Any]]:
    """A user/assistant session; ``evidence`` = (turn index, sentence) marks the answer turn.

    In answer sessions user turns carry ``has_answer`` (true only on the evidence turn); an
    assistant evidence turn carries it too. Filler sessions have no ``has_answer`` at all.
    """
    session: list[dict[str, Any]] = []
    for t in range(turns):
        role = "user" if t % 2 == 0 else "assistant"
        turn: dict[str, Any] = {"role": role}
        if evidence is not None and evidence[0] == t:
            sentence = evidence[1]
            rest = max(0, words_per_turn - len(sentence.split()))
            before = _chatter(rng, rest // 2, topic_words)
            after = _chatter(rng, rest - rest // 2, topic_words)
            turn["content"] = " ".join(part for part in (before, sentence, after) if part)
            turn["has_answer"] = True
        else:
            turn["content"] = _chatter(rng, words_per_turn, topic_words)
            if evidence is not None and role == "user":
                turn["has_answer"] = False
        session.append(turn)
    return session


def _format_date(moment: datetime) -> str:
    return moment.strftime(f"%Y/%m/%d ({_DAY_NAMES[moment.weekday()]}) %H:%M")


def _filler_pool(rng: random.Random, size: int, turns: int, words_per_turn: int) -> tuple[list[str], list[str]]:
    """Session ids and pre-serialised JSON of the shared filler sessions."""
    topics = list(TOPIC_WORDS)
    ids: list[str] = []
    sessions: list[str] = []
    seen: set[str] = set()
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while len(ids) < size:
        if len(ids) % 2 == 0:
            session_id = "sharegpt_" + "".join(rng.choice(alphabet) for _ in range(7)) + "_0"
        else:
            session_id = f"ultrachat_{rng.randrange(100000, 1000000)}"
        if session_id in seen:
            continue
        seen.add(session_id)
        # a main and a side topic, so question words also turn up in some filler sessions
        main, side = rng.sample(topics, 2)
        words = rng.sample(TOPIC_WORDS[main], 7) + rng.sample(TOPIC_WORDS[side], 3)
        ids.append(session_id)
        sessions.append(json.dumps(_session(rng, turns, words_per_turn, words)))
    return ids, sessions


def _gold_count(rng: random.Random, question_type: str) -> int:
    if question_type == "multi-session":
        return rng.choice((2, 3))
    if question_type in ("knowledge-update", "temporal-reasoning"):
        return rng.choice((1, 2))
    return 1


def _write_instance(out: TextIO, head: dict[str, Any], sessions: list[str], tail: dict[str, Any]) -> None:
    """Write one instance with pre-serialised sessions, keys in LongMemEval's order."""
    out.write("{")
    out.write(", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()))
    out.write(', "haystack_sessions": [')
    for i, session in enumerate(sessions):
        if i:
            out.write(", ")
        out.write(session)
    out.write("]")
    for key, value in tail.items():
        out.write(f", {json.dumps(key)}: {json.dumps(value)}")
    out.write("}")


def write_dataset(
    path: Path,
    *,
    instances: int = 20,
    abstention: int = 2,
    sessions_per_haystack: int = 12,
    filler_pool: int = 60,
    turns_per_session: int = 4,
    words_per_turn: int = 30,
    gold_fallback: int = 2,
    seed: int = 0,
) -> DatasetSummary:
    """Write a LongMemEval-format JSON array to ``path`` and return its summary.

    Instances are written one at a time, so only the filler pool is held in memory; the
    output is byte-identical for the same arguments. ``gold_fallback`` (at most all)
    non-abstention instances lack ``answer_session_ids`` (alternately missing and ``[]``), so consumers must
    fall back to the sessions holding a ``has_answer: true`` turn.
    """
    if not 0 <= abstention <= instances:
        raise ValueError("abstention must be between 0 and instances")
    if gold_fallback < 0:
        raise ValueError("gold_fallback must not be negative")
    if sessions_per_haystack < 3:
        raise ValueError("sessions_per_haystack must be at least 3 (up to 3 gold sessions)")
    if filler_pool < sessions_per_haystack - 1:
        raise ValueError("filler_pool must be at least sessions_per_haystack - 1")
    if turns_per_session < 2 or words_per_turn < 1:
        raise ValueError("need at least 2 turns per session and 1 word per turn")

    rng = random.Random(seed)
    filler_ids, filler_json = _filler_pool(rng, filler_pool, turns_per_session, words_per_turn)
    abstention_at = set(rng.sample(range(instances), abstention))
    usable = [i for i in range(instances) if i not in abstention_at]
    fallback = sorted(rng.sample(usable, min(gold_fallback, len(usable))))
    fallback_order = {i: n for n, i in enumerate(fallback)}

    summary = DatasetSummary(instances, abstention, instances - abstention)
    summary.per_category = {t: 0 for t in QUESTION_TYPES}
    used_fillers: set[int] = set()
    question_ids: set[str] = set()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write("[\n")
        for index in range(instances):
            question_type = QUESTION_TYPES[index % len(QUESTION_TYPES)]
            base_id = f"{rng.getrandbits(32):08x}"
            while base_id in question_ids:
                base_id = f"{rng.getrandbits(32):08x}"
            question_ids.add(base_id)
            is_abstention = index in abstention_at
            question_id = base_id + ("_abs" if is_abstention else "")
            if not is_abstention:
                summary.per_category[question_type] += 1

            n_gold = _gold_count(rng, question_type)
            topic = TOPIC_WORDS[rng.choice(list(TOPIC_WORDS))]
            picked = rng.sample(topic, 5 + n_gold)
            k1, k2, k3, x1, x2 = picked[:5]
            answers = picked[5:]
            chatter_words = [w for w in topic if w not in picked]

            gold_ids = [f"answer_{base_id}_{n + 1}" for n in range(n_gold)]
            gold_json: list[str] = []
            for answer in answers:
                words = rng.sample(chatter_words, _SESSION_TOPIC_WORDS) + [k1]
                if question_type == "single-session-assistant":
                    turn = 2 * rng.randrange(turns_per_session // 2) + 1
                    sentence = _ASSISTANT_EVIDENCE
                else:
                    turn = 2 * rng.randrange((turns_per_session + 1) // 2)
                    sentence = rng.choice(_USER_EVIDENCE)
                sentence = sentence.format(k1=k1, k2=k2, k3=k3, a=answer)
                evidence = (turn, sentence)
                gold_json.append(json.dumps(_session(rng, turns_per_session, words_per_turn, words, evidence)))

            fillers = rng.sample(range(filler_pool), sessions_per_haystack - n_gold)
            used_fillers.update(fillers)
            gold_at = sorted(rng.sample(range(sessions_per_haystack), n_gold))
            ids: list[str] = []
            sessions: list[str] = []
            filler_iter = iter(fillers)
            for position in range(sessions_per_haystack):
                if position in gold_at:
                    ids.append(gold_ids[gold_at.index(position)])
                    sessions.append(gold_json[gold_at.index(position)])
                else:
                    filler = next(filler_iter)
                    ids.append(filler_ids[filler])
                    sessions.append(filler_json[filler])

            moment = datetime(2023, 1, 1) + timedelta(minutes=rng.randrange(200 * 24 * 60))
            dates: list[datetime] = []
            for _ in range(sessions_per_haystack):
                moment += timedelta(minutes=rng.randrange(30, 3 * 24 * 60))
                dates.append(moment)
            asked = moment + timedelta(minutes=rng.randrange(60, 7 * 24 * 60))

            if is_abstention:
                answer = f"The information provided is not enough. You did not mention the {x1}."
            elif question_type == "multi-session":
                answer = str(n_gold)
            elif question_type == "temporal-reasoning":
                end = dates[gold_at[1]] if n_gold > 1 else asked
                answer = f"{(end.date() - dates[gold_at[0]].date()).days} days"
            else:
                answer = answers[-1]

            head = {
                "question_id": question_id,
                "question_type": question_type,
                "question": (
                    f"{k1} {k2} {k3}"  # a terse keyword query: vipune's AND-of-words BM25 can match
                    if index % 4 == 3
                    else _QUESTIONS[question_type].format(k1=k1, k2=k2, k3=k3, x1=x1, x2=x2)
                ),
                "answer": answer,
                "question_date": _format_date(asked),
                "haystack_dates": [_format_date(d) for d in dates],
                "haystack_session_ids": ids,
            }
            tail: dict[str, Any] = {"answer_session_ids": gold_ids}
            if index in fallback_order:
                tail = {} if fallback_order[index] % 2 == 0 else {"answer_session_ids": []}

            if index:
                out.write(",\n")
            _write_instance(out, head, sessions, tail)
            summary.session_slots += sessions_per_haystack
            summary.unique_sessions += n_gold
        out.write("\n]\n")
    summary.unique_sessions += len(used_fillers)
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic LongMemEval-format dataset.")
    parser.add_argument("out", type=Path, help="output JSON file")
    parser.add_argument("--instances", type=int, default=20)
    parser.add_argument("--abstention", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=12, help="sessions per haystack")
    parser.add_argument("--filler-pool", type=int, default=60)
    parser.add_argument("--turns", type=int, default=4, help="turns per session")
    parser.add_argument("--words-per-turn", type=int, default=30)
    parser.add_argument("--gold-fallback", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = write_dataset(
        args.out,
        instances=args.instances,
        abstention=args.abstention,
        sessions_per_haystack=args.sessions,
        filler_pool=args.filler_pool,
        turns_per_session=args.turns,
        words_per_turn=args.words_per_turn,
        gold_fallback=args.gold_fallback,
        seed=args.seed,
    )
    print(json.dumps(asdict(summary), indent=2))


if __name__ == "__main__":
    main()
