"""Agent side: the GAIA answer conventions, told to the model in QitOS's own words.

The scorer is strict (quasi-exact match), so the prompt's job is to make the model emit
answers in the shape the scorer expects: one `FINAL ANSWER:` line, bare numbers, short
strings, comma-separated lists.
"""

from __future__ import annotations

from qitos.benchmark.gaia.dataset import GaiaQuestion

__all__ = ["GAIA_SYSTEM_PROMPT", "ANSWER_RULES", "build_user_prompt"]

ANSWER_RULES = """\
How to write the answer:
- A number: digits only. No thousands separators (write 1700, not 1,700), no currency or \
percent signs, and no units unless the question asks for them.
- A word or phrase: as few words as possible, without leading articles (a, an, the) and \
without abbreviations (write city names in full, for instance) unless the question asks \
for them.
- A list: the items separated by commas, each item following the rules above; keep the \
order the question asks for.
"""

GAIA_SYSTEM_PROMPT = f"""\
You are a careful general assistant answering a question that has one short, exact answer.
Work step by step: read any attached file, compute with Python when arithmetic or data \
handling is involved, and use the web tools if they are available and the answer is not \
in the files. Check your result before answering.

When you are done, end your reply with a single line of this form and nothing after it:
FINAL ANSWER: <your answer>

{ANSWER_RULES}
If you cannot find the answer, still give your best guess on the FINAL ANSWER line."""


def build_user_prompt(question: GaiaQuestion) -> str:
    """The first user message: the question, plus where its attachment sits in the work dir."""
    text = question.question.strip()
    if question.file_name:
        text += (
            f"\n\nAttached file: {question.file_name} (in your work dir; "
            "open it with read_file, or process it with run_python)."
        )
    return text
