"""Prompts and instructions, as text (no torch): a causal-LM reranker's prompt template and a
bi-encoder's query and document prompts.

**Templates** are filled in one pass (:func:`fill`): each ``{instruction}``, ``{query}`` or
``{document}`` slot of the template is replaced by its value, and the inserted values are never
scanned again, so a query or instruction holding ``{document}`` is text, not a slot.

**Embedder prompts** follow sentence-transformers (``config_sentence_transformers.json``:
``prompts``, ``default_prompt_name``): a prompt is text put before the input, counted in the
model's ``max_length``. The query prompt is ``prompts["query"]``; the document prompt the first of
``prompts["document"]``, ``["passage"]``, ``["corpus"]`` (the rule ``encode_document`` documents; e5's
folders name theirs ``passage``); where a role has none, the ``default_prompt_name``'s prompt, else
none. An empty prompt counts as none: sentence-transformers ≥ 6 saves ``"query": ""`` and
``"document": ""`` placeholders beside a model's own prompts (an e5 folder it saves holds
``{"query": "query: ", "document": "", "passage": "passage: "}``).

An **instruction** replaces the task inside an instruction-tuned embedder's query prompt:
``instruction_prompt`` is the query prompt with an ``{instruction}`` slot, derived from a query
prompt of the form ``Instruct: <task>\\nQuery:`` (Qwen3-Embedding, gte-Qwen2, e5-mistral) when
the settings give none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from steadyrank.serve.errors import InvalidInputError

_SLOT = re.compile(r"\{(instruction|query|document)\}")
_INSTRUCT = re.compile(r"^(?P<head>Instruct: ?)(?P<task>.+?)(?P<tail>\nQuery: ?)$", re.DOTALL)
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
PromptRole = Literal["query", "document"]


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each slot named in ``values`` replaced by its value, in one pass (a value is
    never re-scanned for slots); slots not in ``values`` stay as they are."""
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), template)


@dataclass(frozen=True)
class EmbedPrompts:
    """A bi-encoder's prompts: every named one, the query and document prompts resolved from them
    (module docstring), and the query prompt's instruction template (None: takes no instruction)."""

    named: Mapping[str, str] = field(default_factory=dict)
    query: str = ""
    document: str = ""
    instruction_template: str | None = None
    default: str = ""  # the default_prompt_name's prompt: what a text with no role gets

    @classmethod
    def resolve(cls, named: Mapping[str, str], default_name: str | None,
                instruction_template: str | None = None) -> EmbedPrompts:
        """The roles' prompts from sentence-transformers' ``prompts`` and ``default_prompt_name``;
        ``instruction_template`` (with one ``{instruction}``: the settings check it) or, when None,
        the one derived from an ``Instruct: …\\nQuery:`` query prompt."""
        default = named.get(default_name, "") if default_name is not None else ""
        query = named.get("query") or default
        document = next((named[n] for n in DOCUMENT_PROMPT_NAMES if named.get(n)), default)
        if instruction_template is None:
            match = _INSTRUCT.match(query)
            if match is not None:
                instruction_template = match["head"] + "{instruction}" + match["tail"]
        return cls(dict(named), query, document, instruction_template, default)

    @property
    def default_instruction(self) -> str | None:
        """The task of the query prompt when it is an instance of the instruction template."""
        if self.instruction_template is None:
            return None
        head, _, tail = self.instruction_template.partition("{instruction}")
        q = self.query
        if q.startswith(head) and q.endswith(tail) and len(q) > len(head) + len(tail):
            return q[len(head):len(q) - len(tail)]
        return None

    def by_name(self, name: str) -> str:
        """The prompt called ``name`` (TEI's ``prompt_name``); an unknown name is the client's error."""
        if name not in self.named:
            known = ", ".join(sorted(self.named)) or "none"
            raise InvalidInputError(f"prompt_name {name!r} is not one of this model's prompts ({known})")
        return self.named[name]

    def choose(self, role: PromptRole | None = None, name: str | None = None, instruction: str | None = None) -> str:
        """The prompt a request asks for: ``instruction`` (in the query prompt, :meth:`for_instruction`),
        else the prompt called ``name`` (:meth:`by_name`), else ``role``'s (``query``, ``document``),
        else the default prompt (sentence-transformers' ``encode`` without a prompt). Asking for two
        of them is the client's error, as is an instruction for documents."""
        asked = [what for what, value in (("instruction", instruction), ("prompt_name", name)) if value is not None]
        if len(asked) > 1:
            raise InvalidInputError(f"give one of {' or '.join(asked)}, not both")
        if instruction is not None:
            if role == "document":
                raise InvalidInputError("an instruction goes into the query prompt: not for documents")
            return self.for_instruction(instruction)
        if name is not None:
            return self.by_name(name)
        if role is None:
            return self.default
        return self.query if role == "query" else self.document

    def for_instruction(self, instruction: str) -> str:
        """The query prompt with ``instruction`` as its task."""
        if self.instruction_template is None:
            raise InvalidInputError("this embedder takes no instruction: its query prompt has no instruction "
                                    "(set instruction_prompt in its model settings)")
        return fill(self.instruction_template, {"instruction": instruction})
