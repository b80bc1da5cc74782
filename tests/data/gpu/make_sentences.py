"""Writes sentences.txt: 32 calibration sentences, then 200 validation sentences, one per line.

Deterministic (fixed seed). Varied on purpose: questions, exclamations, numbers and dates (read out
by talker's normaliser), lists, long clauses up to the largest length bucket, and one-word lines.
Run: python3 make_sentences.py > sentences.txt
"""
import random

rng = random.Random(2026)
subjects = ["The engineer", "A quiet librarian", "My neighbour", "The old lighthouse keeper", "Our team",
            "A curious child", "The night train", "Every scientist", "The committee", "Her grandmother",
            "The orchestra", "A stray cat", "The pilot", "This small village", "The new manager"]
verbs = ["carefully explained", "suddenly remembered", "quietly measured", "never understood", "finally repaired",
         "proudly announced", "slowly painted", "loudly questioned", "happily shared", "barely noticed"]
objects = ["the broken clock", "a forgotten letter", "the results of the experiment", "the map of the harbour",
           "an unusual recipe", "the schedule for tomorrow", "a very old photograph", "the budget for next year",
           "the sound of distant thunder", "the rules of the game"]
tails = ["before the sun went down", "while everyone was asleep", "during the long winter",
         "after the meeting ended", "in front of the whole class", "without saying a word",
         "as the rain grew heavier", "despite the terrible noise", "on the first day of spring",
         "because nobody else would"]
extras = ["and then everyone went home", "but the story did not end there", "which surprised almost nobody",
          "so we had to start again from the beginning", "although the weather was against us",
          "and the crowd applauded for several minutes", "yet nobody could explain why it happened"]
fixed = [
    "Yes.", "No, thank you.", "Hello!", "Wait a moment.", "Is that really true?",
    "It costs $12.50, or about 11 euros.", "The meeting starts at 9:30 on March 3rd, 2025.",
    "Roughly 3.5% of the samples failed the test.", "Chapter XIV begins on page 212.",
    "She ran 42 kilometres in 3 hours and 15 minutes.", "Why would anyone build a bridge there?",
    "Red, orange, yellow, green, blue, indigo and violet.",
    "Please read the instructions twice before you begin.",
    "The quick brown fox jumps over the lazy dog.",
    "Do you hear that? It sounds like music from far away.",
    "Temperatures reached 38 degrees in the afternoon.",
    "I can't believe it's already December!",
    "Mr. Smith and Dr. Jones arrived at 10 p.m.",
    "One, two, three, four, five, six, seven, eight, nine, ten.",
    "Photosynthesis converts light energy into chemical energy stored in sugar.",
]

def sentence():
    kind = rng.random()
    s = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
    if kind < 0.25:
        return s + "."
    s += f" {rng.choice(tails)}"
    if kind < 0.5:
        return s + "."
    if kind < 0.6:
        return "Did " + s[0].lower() + s[1:] + "?"
    s += f", {rng.choice(extras)}"
    if kind < 0.85:
        return s + "."
    return s + f", and {rng.choice(subjects).lower()} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)}."

lines = fixed[:]
while len(lines) < 232:
    lines.append(sentence())
rng.shuffle(lines)
print("\n".join(lines))
