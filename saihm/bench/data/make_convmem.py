"""Writes convmem.json, the conversational-memory set of ``saihm bench recall``.

Each fact is stated once, in a dialogue turn, inside a conversation of filler turns; its
question asks for it in other words (other word forms, other phrasing, stop words). Run this
file to regenerate the JSON deterministically (``python make_convmem.py``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# (turn stating the fact, question asking for it)
FACTS = [
    (
        "User: I prefer dark mode in every editor, the bright themes hurt my eyes.",
        "What theme does the user like for their editors?",
    ),
    (
        "User: My daughter Maya started violin lessons last month.",
        "Which instrument is the user's daughter learning?",
    ),
    ("User: We moved to Lisbon in March, still unpacking boxes.", "Where did the user move to?"),
    (
        "User: I'm allergic to peanuts, so please never suggest satay.",
        "What allergies does the user have?",
    ),
    (
        "User: I go climbing at the bouldering gym every Saturday morning.",
        "What does the user do on Saturday mornings?",
    ),
    (
        "User: Our team switched the backend from Flask to FastAPI.",
        "Which framework does the user's team use for the backend now?",
    ),
    ("User: I drive an old green Volvo estate.", "What car does the user drive?"),
    (
        "User: My sister's wedding is on the 14th of June in Porto.",
        "When is the wedding of the user's sister?",
    ),
    ("User: I'm vegetarian, but I still eat eggs and cheese.", "What diet does the user follow?"),
    (
        "User: I've been learning Japanese with flashcards for two years.",
        "Which language is the user studying?",
    ),
    (
        "User: The production database is PostgreSQL 16 on a managed service.",
        "What database runs in production?",
    ),
    ("User: My cat is called Biscuit and she is nine.", "What is the name of the user's cat?"),
    (
        "User: I usually wake up at 5:30 to run before work.",
        "When does the user get up in the morning?",
    ),
    (
        "User: I'm reading The Left Hand of Darkness at the moment.",
        "What book is the user currently reading?",
    ),
    ("User: My manager is Priya, she joined from the payments team.", "Who manages the user?"),
    (
        "User: I play bass guitar in a small jazz trio.",
        "Which instrument does the user play in a band?",
    ),
    (
        "User: We deploy on Fridays only after the freeze is lifted.",
        "What is the rule for deploying on Friday?",
    ),
    ("User: I broke my wrist skiing in February.", "How did the user injure their wrist?"),
    (
        "User: My favourite food is ramen, especially tonkotsu.",
        "What dish does the user love most?",
    ),
    ("User: I take the 7:40 train to the office in Utrecht.", "How does the user commute to work?"),
    ("User: Our anniversary is in October, we married in 2016.", "When did the user get married?"),
    ("User: I use Neovim with a handful of Lua plugins.", "Which text editor does the user use?"),
    ("User: My grandmother taught me to bake sourdough bread.", "Who taught the user baking?"),
    (
        "User: I'm saving for a trip to Patagonia next winter.",
        "Where is the user planning to travel?",
    ),
    (
        "User: The quarterly report is due on the last Thursday of the month.",
        "When must the quarterly report be submitted?",
    ),
    (
        "User: I can't drink coffee after noon or I don't sleep.",
        "Why does the user avoid afternoon coffee?",
    ),
    (
        "User: My son plays goalkeeper for the under-twelve football team.",
        "What position does the user's son play?",
    ),
    ("User: We adopted a rescue greyhound named Pepper.", "What kind of dog did the user adopt?"),
    ("User: I volunteer at the food bank on Tuesday evenings.", "Where does the user volunteer?"),
    ("User: The API keys rotate every ninety days by policy.", "How often are API keys rotated?"),
    (
        "User: I'm colour blind, red and green look the same to me.",
        "Which colours can the user not tell apart?",
    ),
    (
        "User: My brother lives in Toronto and works as a nurse.",
        "What is the job of the user's brother?",
    ),
    ("User: I meditate for twenty minutes before bed.", "What does the user do before sleeping?"),
    (
        "User: Our office plants are watered by Tomasz on Mondays.",
        "Who waters the plants in the office?",
    ),
    (
        "User: I studied marine biology at the University of Plymouth.",
        "What did the user study at university?",
    ),
    (
        "User: I'm training for the Berlin marathon in September.",
        "Which race is the user preparing for?",
    ),
    (
        "User: My laptop is a ThinkPad X1 Carbon, the sixth generation.",
        "What computer does the user work on?",
    ),
    ("User: I always book aisle seats on flights.", "Which seat does the user prefer when flying?"),
    (
        "User: The staging cluster runs in the Frankfurt region.",
        "In which region is staging hosted?",
    ),
    ("User: My partner is a pediatric dentist.", "What does the user's partner do for a living?"),
    ("User: I collect vintage fountain pens, mostly Pelikan.", "What does the user collect?"),
    (
        "User: I speak Portuguese at home with my parents.",
        "Which language does the user speak with family?",
    ),
    (
        "User: Our sprint planning happens every second Wednesday.",
        "How often is sprint planning held?",
    ),
    ("User: I grow tomatoes and basil on the balcony.", "What vegetables does the user grow?"),
    ("User: I hate cilantro, it tastes like soap to me.", "Which herb does the user dislike?"),
    (
        "User: My dentist appointment got moved to the 3rd of May.",
        "When is the user's dental appointment?",
    ),
    (
        "User: The on-call rotation changes hands on Monday at 10.",
        "When does the on-call shift hand over?",
    ),
    ("User: I knit scarves for my nieces every winter.", "What does the user make for the nieces?"),
    ("User: I was born in Nairobi and grew up in Mombasa.", "Where was the user born?"),
    (
        "User: Our company uses Linear for issue tracking.",
        "Which tool tracks issues at the user's company?",
    ),
]

FILLER = [
    "User: Thanks, that helps a lot.",
    "Assistant: Happy to help. Anything else you want to go over?",
    "User: Can you summarise what we discussed so far?",
    "Assistant: Sure, here is a short summary of the main points.",
    "User: Let me think about it and get back to you.",
    "Assistant: Of course, take your time.",
    "User: The weather has been awful all week.",
    "Assistant: That sounds frustrating; I hope it clears up soon.",
    "User: I need to write an email to my landlord about the heating.",
    "Assistant: Here is a polite draft you could start from.",
    "User: What's a good way to structure a status update?",
    "Assistant: Lead with the outcome, then risks, then next steps.",
    "User: Remind me to check the invoices tomorrow.",
    "Assistant: Noted. I will bring up the invoices next time.",
    "User: How long should I boil an egg for a soft yolk?",
    "Assistant: About six and a half minutes from boiling water.",
    "User: Can you explain what a Merkle tree is?",
    "Assistant: It is a tree of hashes where each parent hashes its children.",
    "User: I'm tired today, slept badly.",
    "Assistant: Sorry to hear that. Maybe keep today's plan light.",
    "User: Could you translate 'good morning' into French?",
    "Assistant: 'Bonjour' is the usual greeting.",
    "User: What's the difference between a list and a tuple in Python?",
    "Assistant: Lists are mutable; tuples are not.",
    "User: I keep forgetting my umbrella at work.",
    "Assistant: A hook by the door might help you remember it.",
    "User: Any tips for a long meeting with many people?",
    "Assistant: Share an agenda and keep a time box for each item.",
    "User: My phone battery drains very fast lately.",
    "Assistant: Check which apps use the most battery in settings.",
]


def main() -> None:
    rng = random.Random(13)
    facts = FACTS[:]
    rng.shuffle(facts)
    conversations = []
    per = 5
    for c in range(len(facts) // per):
        chosen = facts[c * per : (c + 1) * per]
        turns = rng.sample(FILLER, 20)
        questions = []
        for statement, _question in chosen:
            at = rng.randrange(len(turns) + 1)
            turns.insert(at, statement)
        for statement, question in chosen:
            questions.append({"question": question, "evidence": [turns.index(statement)]})
        conversations.append({"turns": turns, "questions": questions})
    out = {
        "about": "saihm bench recall: facts stated in dialogue turns, asked in other words",
        "generator": "saihm/bench/data/make_convmem.py (seed 13)",
        "conversations": conversations,
    }
    path = Path(__file__).with_name("convmem.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
