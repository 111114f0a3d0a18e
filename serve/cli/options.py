"""Options shared by several subcommands, so one concept has one flag everywhere.

The CLI conventions (docs/guides/indexing.md, "CLI conventions"):

- ``--out DIR`` is always a folder a command writes into (``index build``, ``golden build``,
  ``clq sweep``); a single file a command writes is named by its kind, the same flag that reads it
  elsewhere (``search --run FILE`` → ``evaluate --run FILE``; ``route calibrate --route-settings
  FILE`` → ``search --route-settings FILE``; ``precision-report --plot FILE``).
- ``--corpus`` with ``--id-field/--text-field/--title-field`` and ``--strict`` wherever a command
  reads a corpus (:func:`add_corpus_arguments`).
- ``--grade-map G:R,...`` wherever grades are mapped onto the 1-5 rubric.
- ``--batch-size`` states its unit in its metavar and help (documents, sequences or passages).
- ``$STEADYRANK_API_KEYS`` is the one API-key variable (the server's keys; clients use the first).

Renamed flags and variables keep working for a while: a deprecated name still sets the same
value and prints a one-line deprecation warning on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from steadyrank.retrieval.corpus import Corpus, Fields, read_corpus
from steadyrank.retrieval.records import FORMATS

API_KEYS_ENV = "STEADYRANK_API_KEYS"
DEPRECATED_API_KEY_ENV = "STEADYRANK_API_KEY"


def deprecation(message: str) -> None:
    """Print ``warning: … is deprecated …`` on stderr (one line)."""
    print(f"warning: {message}", file=sys.stderr)


class _DeprecatedAlias(argparse.Action):
    """Stores like the flag it stands for, after a deprecation warning naming the new flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        deprecation(f"{option_string} is deprecated; use {self.new}")
        setattr(namespace, self.dest, values)


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """``old`` sets ``dest`` like ``new`` does, hidden from the help, warning when used."""
    parser.add_argument(old, dest=dest, action=_DeprecatedAlias, new=new, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS, **kwargs)


def require(parser: argparse.ArgumentParser, dest: str, flag: str) -> None:
    """Mark ``flag`` (whose ``dest`` a deprecated alias may also set) as required: checked by
    :func:`missing_required` after parsing, as argparse cannot require one of two spellings."""
    required = parser.get_default("_required") or ()
    parser.set_defaults(_required=(*required, (dest, flag)))


def missing_required(args: argparse.Namespace) -> list[str]:
    """The flags marked by :func:`require` that the command line did not give."""
    return [flag for dest, flag in getattr(args, "_required", ()) if getattr(args, dest, None) is None]


def parse_grade_map(text: str) -> dict[float, float]:
    """``"3:5,2:4,1:3,0:1"`` → {3: 5, 2: 4, 1: 3, 0: 1}."""
    mapping: dict[float, float] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        source, sep, target = pair.partition(":")
        try:
            mapping[float(source)] = float(target)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad grade mapping {pair!r}: expected FROM:TO, e.g. 3:5") from None
        if not sep:
            raise argparse.ArgumentTypeError(f"bad grade mapping {pair!r}: expected FROM:TO, e.g. 3:5")
    return mapping


def add_grade_map_argument(parser: argparse.ArgumentParser, *, default: str | None, help: str) -> None:
    """``--grade-map G:R,...`` (grades → the 1-5 rubric), with ``--rubric-map`` a deprecated alias."""
    parser.add_argument("--grade-map", type=parse_grade_map, dest="grade_map", metavar="G:R,...",
                        default=None if default is None else parse_grade_map(default), help=help)
    add_deprecated_alias(parser, "--rubric-map", "--grade-map", "grade_map", type=parse_grade_map)


def add_corpus_arguments(parser: argparse.ArgumentParser, *, flag: str = "--corpus", required: bool = True,
                         help: str = "the corpus") -> None:
    """The corpus file and how to read it: ``flag``, ``--id-field``, ``--text-field``,
    ``--title-field`` and ``--strict`` (the empty-document rule)."""
    parser.add_argument(flag, required=required, metavar="PATH", help=f"{help}: {FORMATS}, or a BEIR folder")
    parser.add_argument("--id-field", default=None, metavar="NAME",
                        help="field (column) holding the document id (default: '_id', else 'id')")
    parser.add_argument("--text-field", default="text", metavar="NAME",
                        help="field holding the document text (default %(default)s; Pyserini JSONL: contents)")
    parser.add_argument("--title-field", default=None, metavar="NAME",
                        help="field holding the title, prepended to the text (default: 'title' when present)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse a corpus holding documents with an empty text (default: skip them with a "
                             "warning that counts them and names the first five)")


def load_corpus(args: argparse.Namespace, path: str) -> Corpus:
    """Read the corpus at ``path`` with the fields and ``--strict`` of ``args``; the skipped-empty
    warning goes to stderr."""
    corpus = read_corpus(path, strict=args.strict,
                         fields=Fields(id=args.id_field, text=args.text_field, title=args.title_field))
    warning = corpus.warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return corpus


def api_key_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The first key of ``$STEADYRANK_API_KEYS`` (comma-separated, as the server reads it), else
    ``$STEADYRANK_API_KEY`` (deprecated, with a warning), else None."""
    environ = os.environ if environ is None else environ
    keys = [k.strip() for k in environ.get(API_KEYS_ENV, "").split(",") if k.strip()]
    if keys:
        return keys[0]
    old = environ.get(DEPRECATED_API_KEY_ENV, "").strip()
    if old:
        deprecation(f"${DEPRECATED_API_KEY_ENV} is deprecated; set ${API_KEYS_ENV} (comma-separated, the "
                    "server's variable; a client sends the first key)")
        return old
    return None


def fetch_json(url: str, path: str, api_key: str | None, timeout: float, params: dict[str, Any] | None = None) -> Any:
    """``GET url + path`` of a running server with the bearer ``api_key``: its JSON answer; a
    ValueError naming the URL when the server cannot be reached or answers other than 200."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    target = url.rstrip("/") + path
    try:
        response = httpx.get(target, headers=headers, params=params, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        raise ValueError(f"{target} answered {response.status_code}: {response.text[:200]}")
    return response.json()
