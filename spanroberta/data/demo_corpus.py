"""A small English-like corpus for demos and smoke tests, shipped as `demo_corpus.txt`.

The text is synthetic: `generate_demo_corpus` writes it from the hand-written grammar below (no text is
taken from anywhere), deterministically from a seed. Each document describes one invented person, town,
animal or dish in several sentences that repeat its names and keep its facts consistent (a person dies
older than they were born, a town's river is the same river throughout), so a masked word can often
be read off its context and a tiny model's masked-LM loss falls within a few hundred steps.

The layout is the one `load_documents` reads: one sentence a line, a blank line between documents.
Regenerate the shipped file with `python -m spanroberta.data.demo_corpus`.
"""

from __future__ import annotations

import random
from pathlib import Path

DEMO_CORPUS_FILE = Path(__file__).with_name("demo_corpus.txt")

# Eight sentences, twenty times over: the smallest corpus a tokenizer and a few dozen blocks of 32 tokens train on,
# which the tests and the reliability benchmarks' tiny runs share.
TINY_CORPUS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Researchers pretrain encoders with span masking and a span boundary objective.",
    "A span of contiguous words is masked, and its boundary tokens predict every token inside it.",
    "Dynamic masking draws a fresh mask each time a sequence is seen during training.",
    "Question answering models predict the start and the end of an answer in a passage.",
    "The committee approved the budget on Tuesday after a long debate about taxes.",
    "In 1998 the museum opened a new wing dedicated to modern sculpture and painting.",
    "Students read the passage carefully and chose the best option for each question.",
] * 20
NUM_DOCUMENTS = 1000

_TOWN_STARTS = ["Ash", "Oak", "Stone", "Mill", "Red", "Fair", "North", "Elm", "Wolf", "Green", "Bright", "Long"]
_TOWN_ENDS = ["ford", "field", "bridge", "wick", "ton", "dale", "haven", "moor", "brook", "stead"]
_CITIES = ["Marlow", "Castor", "Verden", "Ostrel", "Palmyra", "Tessin", "Lindqvist", "Harrow"]
_RIVERS = ["Aven", "Tarn", "Lusk", "Wend", "Olla", "Sever", "Brae", "Idle", "Corran"]
_FIRST_NAMES = [
    ("Anna", "she"), ("Clara", "she"), ("Maria", "she"), ("Edith", "she"), ("Rosa", "she"), ("Ines", "she"),
    ("Hugo", "he"), ("Peter", "he"), ("Jonas", "he"), ("Felix", "he"), ("Oscar", "he"), ("Tomas", "he"),
]
_LAST_NAMES = ["Berg", "Hollis", "Marsh", "Quill", "Sato", "Varga", "Weller", "Dunmore", "Falk", "Lind"]
_JOBS = [
    ("baker", "bakers"), ("farmer", "farmers"), ("teacher", "teachers"), ("doctor", "doctors"),
    ("fisher", "fishers"), ("weaver", "weavers"), ("miller", "millers"), ("painter", "painters"),
    ("builder", "builders"), ("sailor", "sailors"),
]
_FIELDS = ["history", "music", "chemistry", "medicine", "law", "botany", "mathematics", "languages"]
_TOPICS = ["old bridges", "river birds", "the history of bread", "mountain plants", "sea travel", "village music"]
_HOBBIES = ["draw birds", "read old maps", "play the violin", "collect stones", "swim in the river", "build boats"]
_PRODUCTS = ["cheese", "wool", "glass", "apples", "honey", "pottery", "bread", "cider"]
_BUILDINGS = ["church", "mill", "school", "library", "market hall", "bridge", "station", "hospital"]
_TOWN_SIZES = ["small", "quiet", "busy", "large"]
_ANIMAL_TRAITS = ["small", "shy", "quick", "large", "quiet"]
_DIRECTIONS = ["north", "south", "east", "west"]
_SEASONS = ["spring", "summer", "autumn", "winter"]
_ANIMALS = [
    ("fox", "foxes"), ("otter", "otters"), ("hare", "hares"), ("badger", "badgers"), ("heron", "herons"),
    ("owl", "owls"), ("beaver", "beavers"), ("lynx", "lynxes"), ("marten", "martens"),
]
_COLORS = ["red", "grey", "brown", "white", "black", "golden", "spotted"]
_HABITATS = ["forest", "marsh", "meadow", "hills", "river valley", "mountains", "dunes"]
_FOODS = ["fish", "insects", "berries", "seeds", "roots", "small birds", "frogs", "mice"]
_TIMES = ["dawn", "dusk", "night"]
_DISHES = ["apple cake", "fish soup", "onion pie", "bean stew", "barley bread", "pumpkin soup", "cheese pie"]
_INGREDIENTS = [
    "onions", "apples", "beans", "carrots", "potatoes", "leeks", "mushrooms", "peppers", "tomatoes", "turnips",
]
_COOKING = ["fry", "boil", "roast", "bake", "steam"]
_DAYS = ["Sundays", "Fridays", "feast days", "market days", "cold evenings"]
_NUMBER_WORDS = ["no", "one", "two", "three", "four", "five"]


def generate_demo_corpus(num_documents: int = NUM_DOCUMENTS, seed: int = 0) -> str:
    """The demo corpus text: `num_documents` documents of one sentence a line, separated by blank lines."""
    rng = random.Random(seed)
    writers = [_person, _town, _animal, _dish]
    documents = ["\n".join(writers[index % len(writers)](rng)) for index in range(num_documents)]
    return "\n\n".join(documents) + "\n"


def write_demo_corpus(path: str | Path = DEMO_CORPUS_FILE) -> Path:
    """Writes `generate_demo_corpus()` to `path` (by default the packaged file) and returns the path."""
    path = Path(path)
    path.write_text(generate_demo_corpus(), encoding="utf-8")
    return path


def demo_corpus_path() -> Path:
    """The packaged demo corpus, ready for `load_documents(CorpusSource(train_files=[str(demo_corpus_path())]))`."""
    if not DEMO_CORPUS_FILE.is_file():
        raise FileNotFoundError(
            f"The demo corpus is missing from the installed package: {DEMO_CORPUS_FILE}; "
            "write it with `python -m spanroberta.data.demo_corpus`."
        )
    return DEMO_CORPUS_FILE


def _some(rng: random.Random, first: list[str], rest: list[str], keep: float = 0.7) -> list[str]:
    """The first sentences, then a random subset of the others in their order (documents read in order)."""
    return first + [sentence for sentence in rest if rng.random() < keep]


def _town_name(rng: random.Random) -> str:
    return rng.choice(_TOWN_STARTS) + rng.choice(_TOWN_ENDS)


def _person(rng: random.Random) -> list[str]:
    first, pronoun = rng.choice(_FIRST_NAMES)
    possessive = "her" if pronoun == "she" else "his"
    last, town, other_town = rng.choice(_LAST_NAMES), _town_name(rng), _town_name(rng)
    field, job = rng.choice(_FIELDS), rng.choice(_JOBS)
    born = rng.randrange(1820, 1950)
    book_age, married_age, age = rng.randrange(24, 50), rng.randrange(20, 40), rng.randrange(55, 96)
    return _some(
        rng,
        [f"{first} {last} was born in {town} in {born}."],
        [
            f"{pronoun.capitalize()} grew up in a house near the {rng.choice(_RIVERS)} river.",
            f"As a child, {first} liked to {rng.choice(_HOBBIES)}.",
            f"{pronoun.capitalize()} studied {field} at the university of {rng.choice(_CITIES)}.",
            f"After {possessive} studies, {first} worked as a {job[0]} in {other_town} "
            f"for {rng.randrange(2, 20)} years.",
            f"In {born + book_age}, {pronoun} wrote a book about {rng.choice(_TOPICS)}. "
            f"The book was read by many {job[1]} and {rng.choice(_JOBS)[1]}.",
            f"{first} married in {born + married_age}, and they had {rng.choice(_NUMBER_WORDS)} children.",
            f"Later in life, {first} {last} returned to {town} and taught {field} to young students.",
            f"{pronoun.capitalize()} died in {town} in {born + age}, at the age of {age}.",
        ],
    )


def _town(rng: random.Random) -> list[str]:
    town, river = _town_name(rng), rng.choice(_RIVERS)
    product, jobs, buildings = rng.choice(_PRODUCTS), rng.sample(_JOBS, 2), rng.sample(_BUILDINGS, 2)
    built = rng.randrange(1100, 1800)
    return _some(
        rng,
        [f"{town} is a {rng.choice(_TOWN_SIZES)} town on the {river} river."],
        [
            f"It lies about {rng.randrange(5, 90)} kilometres {rng.choice(_DIRECTIONS)} of {rng.choice(_CITIES)}.",
            f"The town is known for its {product}.",
            f"Most people in {town} work as {jobs[0][1]} or {jobs[1][1]}.",
            f"The old {buildings[0]} in the centre of {town} was built in {built}.",
            f"Every {rng.choice(_SEASONS)}, the town holds a market where {jobs[0][1]} sell {product}.",
            f"In {built + rng.randrange(50, 200)}, a new {buildings[1]} was opened next to the {river}.",
            f"The {river} river often floods in {rng.choice(_SEASONS)}, "
            f"so many houses in {town} stand on stone walls.",
            f"Today, about {rng.randrange(2, 90) * 100} people live in {town}.",
        ],
    )


def _animal(rng: random.Random) -> list[str]:
    (animal, animals), color = rng.choice(_ANIMALS), rng.choice(_COLORS)
    habitat, other_habitat = rng.sample(_HABITATS, 2)
    foods = rng.sample(_FOODS, 3)
    return _some(
        rng,
        [f"The {color} {animal} is a {rng.choice(_ANIMAL_TRAITS)} animal that lives in the {habitat}."],
        [
            f"It eats {foods[0]} and {foods[1]}, and sometimes {foods[2]}.",
            f"An adult {color} {animal} weighs about {rng.randrange(1, 30)} kilograms.",
            f"{animals.capitalize()} are most active at {rng.choice(_TIMES)}.",
            f"In {rng.choice(_SEASONS)}, the {animals} move from the {habitat} to the {other_habitat}.",
            f"A female {animal} has {rng.choice(_NUMBER_WORDS[2:])} young each year.",
            f"The young {animals} stay with their mother for {rng.randrange(2, 12)} months.",
            f"People in {_town_name(rng)} say that the {color} {animal} brings good luck.",
        ],
    )


def _dish(rng: random.Random) -> list[str]:
    dish, (first, second, third, fourth) = rng.choice(_DISHES), rng.sample(_INGREDIENTS, 4)
    return _some(
        rng,
        [f"To make {dish}, you need {first}, {second} and {third}."],
        [
            f"First, wash the {first} and cut them into small pieces.",
            f"Then {rng.choice(_COOKING)} the {second} for {rng.randrange(5, 40)} minutes.",
            f"Add the {first} and the {third} with a little salt, and stir well.",
            f"Some cooks also add {fourth} to make the {dish} sweeter.",
            f"Cover the pan and cook everything for another {rng.randrange(5, 40)} minutes.",
            f"Let the {dish} cool for {rng.randrange(5, 30)} minutes before you serve it.",
            f"In {_town_name(rng)}, people eat {dish} on {rng.choice(_DAYS)}.",
        ],
    )


if __name__ == "__main__":
    print(f"wrote {write_demo_corpus()}")
