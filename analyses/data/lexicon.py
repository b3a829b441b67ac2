"""The toolkit's English word lists, in one place: the lexicon of the generated probe sentences
(``analyses.data.generated``) and the word lists of the causal-validation prompts and contrastive
pairs (``analyses.validation.prompts``), with the features the generators read off their words
(``noun_number``, ``noun_gender``, ``PRONOUN_FEATURES``).

The two sets are kept apart on purpose: each list's content and order are what its seeded
generator draws from, so merging two lists of the same kind would change every sentence drawn
after it. Where the prompts use a list of the same kind as a generator (subject and attractor
nouns, gendered nouns), they have their own, named ``PROMPT_...``, ``PAIR_...`` or
``GENDER_...`` here; the tests check that the two sets agree where they overlap (gender, number).

Nouns come as (singular, plural) and verbs as (3rd singular, plural). Edit a list and every
generated item and prompt set drawn from it changes.
"""

from __future__ import annotations

__all__ = [
    "ANIMATE",
    "INANIMATE",
    "INTRANSITIVE",
    "TRANSITIVE",
    "COPULA",
    "THING_ADJ",
    "PERSON_ADJ",
    "ANIMATE_ADJ",
    "ADVERBS",
    "PREPOSITIONS",
    "PLACES",
    "FRONT_PREPOSITIONS",
    "FRONT_EVENTS",
    "MALE_NOUNS",
    "FEMALE_NOUNS",
    "MALE_NAMES",
    "FEMALE_NAMES",
    "PLURAL_PEOPLE",
    "THINGS",
    "PERSON_PERSON_VERBS",
    "PERSON_THING_VERBS",
    "PERSON_PREDICATES",
    "THING_PREDICATES",
    "POSSESSED",
    "INTRANSITIVE_PAST",
    "COMPLEMENT_VERBS",
    "SUBORDINATORS",
    "COORDINATORS",
    "PRONOUN_FEATURES",
    "PRONOUNS",
    "noun_number",
    "noun_gender",
    "PROMPT_SV_SUBJECTS",
    "PROMPT_SV_ATTRACTORS",
    "PROMPT_SV_PREPOSITIONS",
    "GENDER_PAIRS",
    "GENDER_PLURALS",
    "PROMPT_PERSON_PREDICATES",
    "PROMPT_NOUNS",
    "PROMPT_PAST_VERBS",
    "PAIR_SV_SUBJECTS",
    "PAIR_SV_ATTRACTORS",
    "PAIR_SV_PEOPLE",
    "PAIR_SV_RC_VERBS",
    "PAIR_GENDER_PAIRS",
    "REFLEXIVE_VERBS",
    "MEET_VERBS",
    "PERSON_PREPOSITIONS",
    "IOI_NAMES",
    "IOI_PLACES",
    "IOI_OBJECTS",
]


# ---------------------------------------------------------------------------------------------
# The generators' lexicon (analyses.data.generated). No singular noun ends in "s", so that number
# can be read off a word by anyone (the tests do) without this table.
# ---------------------------------------------------------------------------------------------

ANIMATE = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("horse", "horses"),
    ("bird", "birds"),
    ("wolf", "wolves"),
    ("mouse", "mice"),
    ("child", "children"),
    ("man", "men"),
    ("woman", "women"),
    ("boy", "boys"),
    ("girl", "girls"),
    ("teacher", "teachers"),
    ("student", "students"),
    ("doctor", "doctors"),
    ("farmer", "farmers"),
    ("pilot", "pilots"),
    ("senator", "senators"),
    ("painter", "painters"),
    ("lawyer", "lawyers"),
    ("manager", "managers"),
    ("nurse", "nurses"),
    ("singer", "singers"),
    ("dancer", "dancers"),
    ("soldier", "soldiers"),
    ("worker", "workers"),
    ("guard", "guards"),
    ("neighbor", "neighbors"),
    ("officer", "officers"),
    ("customer", "customers"),
    ("driver", "drivers"),
    ("player", "players"),
    ("scientist", "scientists"),
    ("chef", "chefs"),
    ("clerk", "clerks"),
    ("baker", "bakers"),
    ("author", "authors"),
    ("actor", "actors"),
    ("king", "kings"),
    ("queen", "queens"),
    ("baby", "babies"),
    ("friend", "friends"),
    ("visitor", "visitors"),
    ("tourist", "tourists"),
    ("engineer", "engineers"),
    ("sailor", "sailors"),
    ("hunter", "hunters"),
    ("rabbit", "rabbits"),
    ("monkey", "monkeys"),
]
INANIMATE = [
    ("key", "keys"),
    ("book", "books"),
    ("picture", "pictures"),
    ("letter", "letters"),
    ("door", "doors"),
    ("window", "windows"),
    ("box", "boxes"),
    ("car", "cars"),
    ("road", "roads"),
    ("tree", "trees"),
    ("bridge", "bridges"),
    ("table", "tables"),
    ("cabinet", "cabinets"),
    ("house", "houses"),
    ("garden", "gardens"),
    ("river", "rivers"),
    ("building", "buildings"),
    ("lamp", "lamps"),
    ("chair", "chairs"),
    ("wall", "walls"),
    ("shelf", "shelves"),
    ("painting", "paintings"),
    ("bottle", "bottles"),
    ("cup", "cups"),
    ("map", "maps"),
    ("report", "reports"),
    ("computer", "computers"),
    ("machine", "machines"),
    ("bell", "bells"),
    ("flower", "flowers"),
    ("tower", "towers"),
    ("ship", "ships"),
    ("train", "trains"),
    ("village", "villages"),
    ("city", "cities"),
    ("school", "schools"),
    ("office", "offices"),
    ("station", "stations"),
    ("hill", "hills"),
    ("forest", "forests"),
    ("island", "islands"),
    ("farm", "farms"),
    ("kitchen", "kitchens"),
    ("library", "libraries"),
    ("museum", "museums"),
]
# intransitive verbs (3rd singular, plural) for animate subjects
INTRANSITIVE = [
    ("sleeps", "sleep"),
    ("runs", "run"),
    ("laughs", "laugh"),
    ("smiles", "smile"),
    ("waits", "wait"),
    ("sings", "sing"),
    ("works", "work"),
    ("swims", "swim"),
    ("arrives", "arrive"),
    ("leaves", "leave"),
    ("wins", "win"),
    ("stops", "stop"),
    ("jumps", "jump"),
    ("shouts", "shout"),
    ("cries", "cry"),
    ("rests", "rest"),
    ("returns", "return"),
    ("dances", "dance"),
    ("walks", "walk"),
    ("listens", "listen"),
    ("sits", "sit"),
    ("falls", "fall"),
]
TRANSITIVE = [
    ("chases", "chase"),
    ("sees", "see"),
    ("likes", "like"),
    ("follows", "follow"),
    ("helps", "help"),
    ("admires", "admire"),
    ("watches", "watch"),
    ("calls", "call"),
    ("visits", "visit"),
    ("knows", "know"),
    ("meets", "meet"),
    ("trusts", "trust"),
    ("loves", "love"),
    ("hates", "hate"),
    ("pushes", "push"),
    ("finds", "find"),
]
COPULA = [("is", "are"), ("was", "were")]
THING_ADJ = [
    "old",
    "broken",
    "heavy",
    "new",
    "red",
    "expensive",
    "empty",
    "open",
    "closed",
    "clean",
    "dirty",
    "small",
    "large",
    "famous",
    "beautiful",
    "cheap",
]
PERSON_ADJ = [
    "tired",
    "happy",
    "hungry",
    "late",
    "ready",
    "angry",
    "busy",
    "sick",
    "quiet",
    "lonely",
    "worried",
    "bored",
    "famous",
    "careful",
]
ANIMATE_ADJ = [
    "old",
    "young",
    "small",
    "tall",
    "happy",
    "quiet",
    "clever",
    "tired",
    "big",
    "little",
    "brave",
    "lazy",
    "friendly",
    "strange",
]
ADVERBS = ["often", "quietly", "always", "usually", "rarely", "never", "sometimes", "slowly"]
PREPOSITIONS = ["near", "behind", "beside", "of", "from", "with", "to", "under", "in", "above", "by"]
PLACES = [
    "garden",
    "kitchen",
    "park",
    "office",
    "library",
    "station",
    "village",
    "market",
    "church",
    "school",
    "hospital",
    "museum",
    "hotel",
    "harbor",
    "forest",
    "city",
]

# fronted phrases before a sentence's subject: they put 0, 1 or 2 nouns before it, so that the
# subject (or antecedent) is not always the first or the k-th noun (no noun heuristic passes)
FRONT_PREPOSITIONS = ["near", "behind", "in", "outside", "after", "before"]
FRONT_EVENTS = ["the meeting", "the storm", "the game", "the party", "the concert", "the match"]


MALE_NOUNS = [
    "king",
    "prince",
    "man",
    "boy",
    "father",
    "son",
    "brother",
    "husband",
    "uncle",
    "nephew",
    "grandfather",
    "actor",
    "waiter",
    "monk",
    "duke",
    "gentleman",
    "groom",
    "emperor",
    "policeman",
    "businessman",
    "landlord",
    "headmaster",
    "steward",
]
FEMALE_NOUNS = [
    "queen",
    "princess",
    "woman",
    "girl",
    "mother",
    "daughter",
    "sister",
    "wife",
    "aunt",
    "niece",
    "grandmother",
    "actress",
    "waitress",
    "nun",
    "duchess",
    "lady",
    "bride",
    "empress",
    "policewoman",
    "businesswoman",
    "landlady",
    "headmistress",
    "stewardess",
]
MALE_NAMES = [
    "John",
    "David",
    "Michael",
    "James",
    "Robert",
    "Peter",
    "Thomas",
    "Daniel",
    "Paul",
    "Mark",
    "George",
    "Henry",
    "Edward",
    "Samuel",
    "Jack",
    "Oliver",
    "Harry",
    "William",
    "Richard",
    "Charles",
    "Frank",
    "Kevin",
    "Brian",
    "Steven",
    "Andrew",
]
FEMALE_NAMES = [
    "Mary",
    "Sarah",
    "Emma",
    "Anna",
    "Laura",
    "Alice",
    "Susan",
    "Linda",
    "Julia",
    "Rachel",
    "Emily",
    "Olivia",
    "Sophie",
    "Lucy",
    "Helen",
    "Karen",
    "Jessica",
    "Grace",
    "Hannah",
    "Claire",
    "Kate",
    "Rose",
    "Diana",
    "Nancy",
    "Amy",
]
# gender-neutral plural person nouns for "they"
PLURAL_PEOPLE = [
    "students",
    "soldiers",
    "workers",
    "children",
    "farmers",
    "tourists",
    "players",
    "visitors",
    "neighbors",
    "doctors",
    "teachers",
    "engineers",
    "guests",
    "pilots",
    "sailors",
    "dancers",
    "singers",
    "lawyers",
]
# inanimate singular nouns for "it"
THINGS = [
    "vase",
    "box",
    "bag",
    "phone",
    "letter",
    "ring",
    "cake",
    "lamp",
    "chair",
    "bottle",
    "painting",
    "clock",
    "mirror",
    "bicycle",
    "basket",
    "coat",
    "camera",
    "guitar",
    "map",
    "book",
]
PERSON_PERSON_VERBS = [
    "thanked",
    "called",
    "helped",
    "visited",
    "met",
    "praised",
    "blamed",
    "warned",
    "greeted",
    "followed",
    "admired",
    "ignored",
    "invited",
    "interviewed",
    "paid",
    "phoned",
    "watched",
    "saw",
    "hugged",
    "trusted",
]
PERSON_THING_VERBS = [
    "dropped",
    "carried",
    "sold",
    "bought",
    "lost",
    "found",
    "repaired",
    "opened",
    "hid",
    "wrapped",
    "cleaned",
    "painted",
]
PERSON_PREDICATES = [
    ["was", "tired"],
    ["was", "late"],
    ["was", "happy"],
    ["was", "angry"],
    ["was", "sick"],
    ["was", "lonely"],
    ["was", "worried"],
    ["was", "hungry"],
    ["was", "bored"],
    ["was", "busy"],
    ["smiled"],
    ["laughed"],
    ["left", "early"],
    ["cried"],
    ["waved"],
    ["was", "grateful"],
    ["was", "nervous"],
]
THING_PREDICATES = [
    ["was", "heavy"],
    ["was", "fragile"],
    ["was", "broken"],
    ["was", "old"],
    ["was", "expensive"],
    ["was", "wet"],
    ["was", "dirty"],
    ["was", "ugly"],
    ["was", "cheap"],
    ["was", "too", "small"],
]
POSSESSED = ["house", "car", "garden", "office", "room", "kitchen", "shop", "boat", "studio", "apartment"]
INTRANSITIVE_PAST = ["arrived", "cried", "laughed", "fell", "left", "smiled", "returned", "shouted", "woke", "sang"]
# the clause families of subject-verb (analyses.data.clauses): a past-tense verb that takes a "that"
# clause (no agreement of its own), the words that open a fronted clause, and those that join two
COMPLEMENT_VERBS = ["said", "thought", "knew", "heard", "noticed", "believed", "claimed", "explained", "felt", "wrote"]
SUBORDINATORS = ["when", "because", "while", "although", "if", "since", "before", "after", "unless", "until"]
COORDINATORS = ["and", "but"]

_SG = {s: "sg" for s, _ in ANIMATE + INANIMATE}
_PL = {p: "pl" for _, p in ANIMATE + INANIMATE}
_NUMBER = {**_SG, **_PL, **{w: "pl" for w in PLURAL_PEOPLE}, **{w: "sg" for w in THINGS}}
_GENDER = {**{w: "m" for w in MALE_NOUNS + MALE_NAMES}, **{w: "f" for w in FEMALE_NOUNS + FEMALE_NAMES}}

PRONOUN_FEATURES = {  # pronoun -> (gender or None, number, animate)
    "he": ("m", "sg", True),
    "his": ("m", "sg", True),
    "him": ("m", "sg", True),
    "she": ("f", "sg", True),
    "her": ("f", "sg", True),
    "they": (None, "pl", True),
    "their": (None, "pl", True),
    "them": (None, "pl", True),
    "it": (None, "sg", False),
    "its": (None, "sg", False),
}
# the closed class of English pronouns the "nearest noun or pronoun" heuristic counts
# (``analyses.heads.design``), matched on the lower-cased word: the personal pronouns in their subject
# and object forms (possessives such as "his", "their", "mine" left out: they stand for a noun but
# are determiners in front of one, or rare), and the relative pronouns that UD tags PRON. A word list
# cannot see the tag: "her" counts as a pronoun where it is a possessive, and "that" where it is a
# determiner ("that book") or a complementiser ("said that"), as the surface form a head could key on.
PRONOUNS = frozenset(
    ("i", "you", "he", "she", "it", "we", "they")  # subject forms
    + ("me", "him", "her", "us", "them")  # object forms ("you", "it": both)
    + ("who", "whom", "which", "that")  # relative pronouns
)


def noun_number(word: str) -> str | None:
    """ "sg" / "pl" for a noun of the generators' lexicon (names and gendered nouns are "sg"),
    None for a word it does not know."""
    if word in _GENDER:
        return "sg"
    return _NUMBER.get(word, _NUMBER.get(word.lower()))


def noun_gender(word: str) -> str | None:
    """ "m" / "f" for a gendered noun or name of the generators' lexicon, else None."""
    return _GENDER.get(word, _GENDER.get(word.lower()))


# ---------------------------------------------------------------------------------------------
# The causal-validation prompts and contrastive pairs (analyses.validation.prompts): their own
# lists, drawn in this order by their seeded builders
# ---------------------------------------------------------------------------------------------

PROMPT_SV_SUBJECTS = [
    ("key", "keys"),
    ("dog", "dogs"),
    ("book", "books"),
    ("teacher", "teachers"),
    ("car", "cars"),
    ("girl", "girls"),
    ("picture", "pictures"),
    ("student", "students"),
    ("bird", "birds"),
    ("song", "songs"),
]
PROMPT_SV_ATTRACTORS = [
    ("cabinet", "cabinets"),
    ("table", "tables"),
    ("tree", "trees"),
    ("house", "houses"),
    ("window", "windows"),
    ("door", "doors"),
    ("garden", "gardens"),
    ("box", "boxes"),
]
PROMPT_SV_PREPOSITIONS = ["to", "near", "behind", "next to", "on", "under", "by", "beside"]
GENDER_PAIRS = [
    ("king", "queen"),
    ("man", "woman"),
    ("father", "mother"),
    ("boy", "girl"),
    ("brother", "sister"),
    ("husband", "wife"),
    ("son", "daughter"),
    ("uncle", "aunt"),
    ("prince", "princess"),
    ("actor", "actress"),
]
GENDER_PLURALS = {0: ["men", "boys", "kings", "brothers"], 1: ["women", "girls", "queens", "sisters"]}
PROMPT_PERSON_PREDICATES = ["was late", "was tired", "left early", "smiled", "was happy", "laughed"]
PROMPT_NOUNS = ["dog", "cat", "bird", "boy", "girl", "car", "tree", "child", "man", "horse"]
PROMPT_PAST_VERBS = ["slept", "ran", "sang", "waited", "stopped", "fell", "jumped", "left"]
PAIR_SV_SUBJECTS = PROMPT_SV_SUBJECTS + [
    ("letter", "letters"),
    ("player", "players"),
    ("doctor", "doctors"),
    ("friend", "friends"),
    ("painting", "paintings"),
    ("report", "reports"),
]
PAIR_SV_ATTRACTORS = PROMPT_SV_ATTRACTORS + [
    ("wall", "walls"),
    ("lake", "lakes"),
    ("road", "roads"),
    ("shelf", "shelves"),
]
PAIR_SV_PEOPLE = [("man", "men"), ("woman", "women"), ("child", "children"), ("teacher", "teachers"), ("boy", "boys")]
PAIR_SV_RC_VERBS = ["liked", "saw", "found", "wanted", "painted", "praised"]
PAIR_GENDER_PAIRS = GENDER_PAIRS + [("nephew", "niece"), ("grandfather", "grandmother"), ("groom", "bride")]
REFLEXIVE_VERBS = ["blamed", "hurt", "praised", "introduced", "reminded", "taught", "saw", "asked"]
MEET_VERBS = ["met", "saw", "called", "helped", "visited", "thanked"]
PERSON_PREPOSITIONS = ["near", "behind", "next to", "beside", "with"]
IOI_NAMES = [
    "Mary", "John", "Tom", "James", "Anna", "Sarah", "Mike", "David", "Lisa", "Emma", "Paul", "Kate",
    "Peter", "Jane", "Mark", "Laura", "Alex", "Chris", "Sam", "Ben", "Dan", "Tim", "Amy", "Kevin",
    "Daniel", "Michael", "Rachel", "Jessica",
]  # fmt: skip
IOI_PLACES = ["store", "park", "school", "garden", "station", "restaurant", "office", "hospital", "beach"]
IOI_OBJECTS = ["drink", "book", "ring", "gift", "bottle", "snack", "necklace", "computer"]
