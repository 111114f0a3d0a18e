"""Word lists of the ``rules`` query denoiser (:mod:`retrieval.denoise`), English and French.

Two kinds of list:

* **phrases** (regular expressions, matched case-insensitively as whole words) removed at the start or
  the end of a clause: greetings, fillers and discourse markers, apologies and hedges, sign-offs,
  interjections, meta-requests ("can you tell me", "je voudrais savoir"); ``SET_OFF`` ones only when
  set off, ``START_ONLY`` ones never at the end;
* **words** (lower-case tokens, apostrophes split: "i'm" → ``i``, ``m``): ``STOP`` (function words),
  ``NOISE`` (pleasantries, fillers, interjections, hedges, meta-request verbs), ``FIRST_PERSON`` and
  ``INTERROGATIVE``. A clause made only of ``STOP`` ∪ ``NOISE`` words, at least one of them ``NOISE``,
  carries no content word; a set-off first-person remark is recognised through ``FIRST_PERSON``.

These lists are written for general conversational noise, apart from the measurement templates of
``steadyrank probe noise`` (serve/tools/probes/data): the benchmark must not grade the lists against
themselves.
"""

from __future__ import annotations

GREETINGS = [
    r"(hi|hello|hey|heya|hiya|howdy|greetings|yo|sup|ahoy)( (there|again|all|everyone|everybody|folks|guys|gang|fam|friends"
    r"|peeps|team|y'all|you all|world))*",
    r"(morning|evening)( (all|everyone|everybody|folks|guys|gang|fam|friends|peeps|team|y'all|you all))+",
    r"good (morning|afternoon|evening|day)( to you)?( all| everyone| folks)?", r"dear (all|team|sir|madam|colleagues)",
    r"bonjour( à tous| à toutes| tout le monde)?", r"bonsoir( à tous| tout le monde)?", r"salut( à tous| tout le monde)?",
    r"coucou( tout le monde)?", r"cher(e|s|es)? (collègues|amis)", r"bien le bonjour",
]
FILLERS = [
    r"um+", r"uh+", r"erm+", r"hmm+", r"so", r"basically", r"actually", r"anyway",
    r"you know", r"i mean", r"i was wondering", r"i wonder", r"quick question", r"just curious",
    r"euh+", r"bref", r"en fait", r"du coup", r"voilà", r"je me demandais", r"petite question", r"tu vois",
]
#: Fillers and sign-offs that are also content words ("well water", "what does it look like", "a
#: presidential pardon", "genre musical"): removed only when set off — a whole clause ("Well, …"), or
#: at the start right before another noise phrase ("okay so …").
SET_OFF = [
    r"well", r"like", r"okay", r"ok", r"ben", r"bon", r"genre", r"alors", r"enfin", r"quoi",
    r"pardon", r"cheers", r"regards", r"ty", r"ta", r"bless",
]
#: Discourse markers removed at the start of a clause but never at its end ("I think so").
START_ONLY = [r"so"]
APOLOGIES = [
    r"sorry", r"so sorry", r"apologies", r"my apologies", r"excuse me", r"pardon me",
    r"sorry (to|for) (bother(ing)?|disturb(ing)?|trouble|the trouble)( you| everyone| all)?",
    r"(sorry|apologies) (if|in case) this (is|sounds) (a )?(dumb|stupid|silly|basic|obvious) question",
    r"sorry for (the|my|this) (long|late|naive|basic) (message|post|question)",
    r"désolée?s?", r"navrée?s?", r"excusez-moi", r"excuse-moi", r"je m'excuse",
    r"désolée?s? de (vous|te) déranger", r"pardon (de|pour) (la|cette) question (bête|naïve)",
    r"(pardon|désolée?s?) si (la|ma|cette) question (est|paraît|semble) (bête|naïve|idiote|basique)",
    r"excusez-moi (pour|de) (le|ce) (long )?message",
]
SIGNOFFS = [
    r"(thank you|thanks?|thx|ty)( so)*( much| a lot| very much| a bunch| a million| a ton| kindly| again)?"
    r"( (folks|all|everyone|guys|y'all))?( in advance)?", r"tia",
    r"best (regards|wishes)", r"all the best", r"kind regards", r"(many|big) thanks( in advance)?", r"much (appreciated|love)",
    r"(any|all) (help|advice|tips|pointers)( (is|are|would be))?( (much|greatly|really))? appreciated",
    r"appreciate (it|you all|you guys|the help)", r"(grateful|thankful) for any (help|advice|tips|pointers)",
    r"have a (nice|good|great) (day|one|weekend|evening|night)", r"take care( (all|everyone|folks))?", r"stay safe",
    r"peace out", r"cheers( mate| all| everyone| folks)?", r"bless( you)?", r"ta",
    r"merci( beaucoup| bien| mille fois)?( d'avance| par avance)?", r"cordialement", r"bien à vous",
    r"bonne (journée|soirée)", r"à (bientôt|plus)", r"je vous remercie", r"bisous",
]
INTERJECTIONS = [
    r"oh+", r"ah+", r"wow", r"lol", r"(ha){2,}", r"(he){2,}", r"oops", r"ugh", r"meh", r"yay", r"argh+", r"phew",
    r"omg", r"btw", r"by the way",
    r"bah", r"pf+", r"mdr", r"ptdr", r"hein", r"ouf", r"oups", r"waouh", r"au fait", r"d'ailleurs",
]
#: Requests about the asking rather than the need; removed at the start of a clause ("can you tell me
#: what …" → "what …") or as a whole clause.
META_REQUESTS = [
    r"(can|could|would) (you|anyone|someone|somebody)( guys| all| folks)?( please)? "
    r"(tell|explain to|show|help) me( out)?( with| about)?",
    r"(can|could) (anyone|someone|somebody)( please)? explain", r"(does|do) (anyone|anybody|someone|somebody|you) know",
    r"i('d| would) (like|love) to (know|understand)( about)?", r"i want(ed)? to know( about)?", r"i need to know( about)?",
    r"i('m| am) (looking for|trying to find)( (some )?info(rmation)?)?( (on|about))?", r"i have a question( about)?",
    r"please (tell me|explain)( about)?", r"help me understand", r"please", r"pls", r"plz",
    r"(pouvez|pourriez)-vous (me dire|m'expliquer|m'aider)", r"(peux|pourrais)-tu (me dire|m'expliquer|m'aider)",
    r"(est-ce que )?quelqu'un (sait|saurait|peut me dire|pourrait me dire)", r"je (voudrais|veux|souhaiterais) savoir",
    r"j'aimerais (savoir|comprendre)", r"je cherche des (infos|informations)( sur)?", r"j'ai une question( sur)?",
    r"dites-moi", r"dis-moi", r"s'il vous plaît", r"s'il te plaît", r"svp", r"stp",
]
#: Every phrase, longest first (an alternation tries them in order).
PHRASES = sorted(GREETINGS + FILLERS + SET_OFF + APOLOGIES + SIGNOFFS + INTERJECTIONS + META_REQUESTS, key=len, reverse=True)

STOP = frozenset("""
a an the and or but if then so as of to in on at by for with about from into over after before while than
this that these those it its is are was were be been being am do does did done have has had having
i me my mine myself we us our ours you your yours he him his she her they them their there here
what who whom whose which when where why how all any some just very really quite too also not no yes
can could would should will shall may might must s t m d ll ve re don doesn didn isn im ive
again still now one anyone anybody someone somebody everyone everybody something anything
le la les l un une des de du d et ou mais si donc car ni que qu qui quoi quel quelle quels quelles
ce c cet cette ces ça cela je j me m moi tu te t toi il elle on nous vous ils elles se s
mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs à au aux en dans sur sous par pour avec
sans chez est suis es sont être été ai as a avons avez ont avoir ne n pas plus très bien tout tous toute
toutes y là ici comment pourquoi quand où oui non peu encore déjà aussi
""".split())
NOISE = frozenset("""
hi hello hey hiya howdy greetings dear folks guys team morning afternoon evening
thanks thank thx ty cheers regards appreciated appreciate advance
sorry apologies apologize apologise pardon excuse bother bothering disturb disturbing trouble
question dumb stupid silly naive obvious newbie noob lurker poster
yo sup heya ahoy gang fam peeps tia ta bless edit typo honest genuine genuinely serious seriously quick random weird
help needed
um umm uh erm hmm basically actually anyway anyways okay ok wondering curious
please pls plz btw oh ah wow lol haha hehe oops ugh meh yay argh phew omg idk tbh
bonjour bonsoir salut coucou cher chère chers chères amis collègues monde
merci remercie cordialement bisous avance journée soirée bonne
désolé désolée désolés désolées navré navrée excusez excuse excuses déranger bête idiote naïve basique
euh heu bah ben bon bref alors voilà enfin genre demandais svp stp plaît
ouf oups pff mdr ptdr hein waouh
""".split())
#: Words of a request about the asking (tuned on the development half of serve/tools/probes/data/phrasings_en.json):
#: a clause opening with function, noise and these words, one of them ``ASKING``, up to a ``HINGE`` ("would
#: love some input on …", "what do you all know about …") loses that opening (retrieval.denoise).
ASKING = frozenset("""
know knows knew wonder wondered wondering curious learn explain explaining clarify understand input idea ideas clue
info information tell figure wrap head break point asking ask question questions hoping hope confused deal thoughts
opinion opinions advice insight insights love appreciate pointers
""".split())
#: Words that may sit inside such an opening besides function and noise words.
FRAME = frozenset("""
always more little bit got get any really just kind sort lot guys folks y all everyone anyone anybody someone somebody
please mind would love some down trying want wanted need needed help looking find happen happens
""".split())
HINGES = frozenset("about on with regarding around re".split())
#: The writer's words (first person, "this", "here"): a segment holding one (and no content shared
#: with the rest) is a personal remark, not the need. Words addressing the reader ("anybody", "you")
#: are not among them: a sentence asking someone is the need, even when its frame was not recognised.
PERSONAL = frozenset("""
i me my mine myself we us our ours ourselves je j m moi mon ma mes nous notre nos this here ici
""".split())
#: Words addressing the reader: with the writer's, they make a request opening ("does anyone happen to know …").
ADDRESSING = frozenset("you your yours y everyone anyone someone somebody anybody guys folks vous tu te toi quelqu".split())
FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves je j m moi mon ma mes nous notre nos".split())
INTERROGATIVE = frozenset("""
what who whom whose which when where why how is are was were do does did can could should would will
que qu quel quelle quels quelles qui quoi quand où pourquoi comment combien lequel laquelle est
""".split())
#: The interrogative words that open a question by themselves (no auxiliary: "would love some input on").
WH = frozenset("""
what who whom whose which when where why how que qu quel quelle quels quelles qui quoi quand où pourquoi comment combien
""".split())
