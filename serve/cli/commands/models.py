"""``steadyrank models pull``: download models from the Hugging Face Hub into its cache ahead of time
(an init container, or a machine with network before an air-gapped one), so that
``steadyrank serve --reranker ID`` later starts without reaching the Hub (``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Download models into the Hugging Face Hub cache (HF_HOME, else ~/.cache/huggingface; HF_HUB_CACHE
overrides), the same cache `steadyrank serve` reads. HF_TOKEN authenticates (private and gated models),
HF_ENDPOINT selects a mirror. Prints each model's local folder on stdout.

  steadyrank models pull BAAI/bge-reranker-v2-m3
  steadyrank models pull BAAI/bge-reranker-v2-m3 --revision 953dc6f6
  steadyrank models pull --config settings.yaml          # every model the settings name

Air-gapped nodes: pull where the Hub is reachable, copy the cache folder over (or mount it), and
start the server with HF_HUB_OFFLINE=1: ids are then found in the cache without any request.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("models", help="download Hub models into the local cache ahead of time",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    pull = actions.add_parser("pull", help="download models by Hub id (or every Hub id of a settings file)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    pull.add_argument("ids", nargs="*", metavar="ID", help="Hub model ids (org/name)")
    pull.add_argument("--revision", default=None, help="branch, tag or commit to download (one ID only; default: main)")
    pull.add_argument("--config", metavar="FILE", default=None,
                      help="a steadyrank settings file: download every model it names by Hub id (with its revision)")
    pull.set_defaults(func=run_pull)


def _wanted(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """``(id, revision)`` pairs to download: the ids given, then the settings' Hub ids."""
    if args.revision is not None and len(args.ids) != 1:
        raise ValueError(f"--revision needs exactly one ID, got {len(args.ids)}")
    wanted = [(model_id, args.revision) for model_id in args.ids]
    if args.config is not None:
        from pathlib import Path

        from steadyrank.serve.server.model_refs import MODEL_FIELDS
        from steadyrank.serve.settings import load_settings

        settings = load_settings(args.config)
        for field in MODEL_FIELDS:
            model = getattr(settings, field)
            if model is not None and model.path is not None and not Path(model.path).is_dir():
                wanted.append((model.path, model.revision))
    if not wanted:
        raise ValueError("name at least one model ID or a --config whose models are Hub ids")
    return wanted


def run_pull(args: argparse.Namespace) -> int:
    from steadyrank.serve.runtime import hub

    for model_id, revision in _wanted(args):
        if not hub.is_hub_id(model_id):
            raise ValueError(f"{model_id}: not a Hub model id (org/name)")
        found = hub.download(model_id, revision)
        print(f"steadyrank models: {model_id} at commit {found.commit} in {found.path}", file=sys.stderr)
        print(found.path, flush=True)
    return 0
