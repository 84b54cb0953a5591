"""MoE name rules as data: which op category (dispatch, expert GEMM...) an event name is.

Rules live in moetrace/rules/*.toml, one file per framework, plus the user's own (`--rules
FILE`, tried first). Each file is schema-checked: a `[[rule]]` table per category with its
regexes, and optional `expert_patterns` / `layer_patterns` whose first group is an expert id
or a layer index. A broken file is a `RulesError` naming the file and the place.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from moetrace.errors import MoetraceError

CATEGORIES = (
    "attention",
    "router",
    "topk_permute",
    "dispatch",
    "expert_gemm",
    "activation",
    "combine",
    "shared_expert",
    "norm",
    "comm",
    "other",
)
"""The MoE op categories (stages), in display order; `comm` is communication that is not an
EP dispatch/combine (tensor-parallel all-reduce, gradient collectives); `other` is everything
no rule names."""

ROLES = ("compute", "comm", "memory", "sync", "host")
"""What an event does for the device: the role a rule may assign (labels.py derives it from
the reader's kind when no rule does)."""

COLLECTIVE_KINDS = (
    "all_to_all",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "send_recv",
    "other",
)
"""Collective kinds a comm rule may name."""

PACKAGED_RULES = (
    "moetrace",
    "comm_libraries",
    "deepep",
    "trtllm",
    "flashinfer",
    "deepgemm",
    "aiter",
    "vllm",
    "sglang",
    "megatron",
    "torch_npu",
    "torch",
    "kernels_generic",
)
"""Rule files shipped in moetrace/rules, in the order they are tried (first match wins): the
libraries' kernel names before the frameworks' op names, generic kernel families last."""

_RULE_KEYS = {"category", "patterns", "role", "family", "collective", "source"}
_TOP_KEYS = {"framework", "expert_patterns", "layer_patterns", "rule"}


class RulesError(MoetraceError, ValueError):
    """A rules file breaks the schema: names the file, the place and what is wrong."""


@dataclass(frozen=True)
class RuleInfo:
    """One rule pattern with what it says: stage, role (None = keep the reader's kind), comm
    family and collective kind (comm rules), and the rule's name `file:index` (for `classify`)."""

    category: str
    pattern: str
    role: str | None = None
    family: str | None = None
    collective: str | None = None
    name: str = ""
    source: str = ""


@dataclass(frozen=True)
class Rules:
    """Ordered (category, regex) pairs, and regexes whose first group is an expert id or a
    layer index."""

    rules: tuple[tuple[str, str], ...]
    expert_patterns: tuple[str, ...]
    sources: tuple[str, ...]
    layer_patterns: tuple[str, ...] = ()
    info: tuple[RuleInfo, ...] = ()

    def details(self) -> tuple[RuleInfo, ...]:
        """One RuleInfo per (category, pattern) of `rules`, in order (rules built without
        `info` get bare ones)."""
        if len(self.info) == len(self.rules):
            return self.info
        return tuple(RuleInfo(c, p, name=f"rule:{i}") for i, (c, p) in enumerate(self.rules))


def parse_rules(text: str, source: str) -> Rules:
    """Check one TOML rules file against the schema and return its rules.

    Schema: `framework` (string), optional `expert_patterns` (list of regexes with one
    capture group), `[[rule]]` tables with `category` (one of CATEGORIES) and `patterns`
    (non-empty list of regexes), and optionally `role` (one of ROLES), `family` (comm library,
    string), `collective` (one of COLLECTIVE_KINDS) and `source` (where the names come from).
    Unknown keys are errors (a typo must not pass silently)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{source}: not valid TOML: {exc}") from exc
    extra = set(doc) - _TOP_KEYS
    if extra:
        raise RulesError(f"{source}: unknown key(s) {sorted(extra)} (allowed: {sorted(_TOP_KEYS)})")
    if not isinstance(doc.get("framework"), str):
        raise RulesError(f"{source}: 'framework' must be a string")
    groups: dict[str, list[str]] = {}
    for key in ("expert_patterns", "layer_patterns"):
        found = doc.get(key, [])
        if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
            raise RulesError(f"{source}: '{key}' must be a list of strings")
        for p in found:
            _check_regex(p, f"{source}: {key}", groups=1)
        groups[key] = found
    table = doc.get("rule", [])
    if not isinstance(table, list):
        raise RulesError(f"{source}: 'rule' must be an array of tables ([[rule]])")
    out: list[tuple[str, str]] = []
    info: list[RuleInfo] = []
    for i, rule in enumerate(table):
        where = f"{source}: rule[{i}]"
        if not isinstance(rule, dict):
            raise RulesError(f"{where}: must be a table")
        bad = set(rule) - _RULE_KEYS
        if bad:
            raise RulesError(
                f"{where}: unknown key(s) {sorted(bad)} (allowed: {sorted(_RULE_KEYS)})"
            )
        category = rule.get("category")
        if category not in CATEGORIES:
            raise RulesError(
                f"{where}: category {category!r} is not one of {', '.join(CATEGORIES)}"
            )
        patterns = rule.get("patterns")
        if (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) for p in patterns)
        ):
            raise RulesError(f"{where}: 'patterns' must be a non-empty list of strings")
        role = _optional(rule, "role", ROLES, where)
        collective = _optional(rule, "collective", COLLECTIVE_KINDS, where)
        family = rule.get("family")
        if family is not None and not isinstance(family, str):
            raise RulesError(f"{where}: 'family' must be a string")
        cite = rule.get("source", "")
        if not isinstance(cite, str):
            raise RulesError(f"{where}: 'source' must be a string")
        if role is not None and role != "comm" and (family is not None or collective is not None):
            raise RulesError(f"{where}: 'family' and 'collective' need role = \"comm\"")
        for p in patterns:
            _check_regex(p, where)
            out.append((str(category), p))
            info.append(RuleInfo(str(category), p, role, family, collective, f"{source}:{i}", cite))
    return Rules(
        tuple(out),
        tuple(groups["expert_patterns"]),
        (source,),
        tuple(groups["layer_patterns"]),
        tuple(info),
    )


def _optional(
    rule: dict[str, object], key: str, allowed: tuple[str, ...], where: str
) -> str | None:
    """An optional key whose value must be one of `allowed`."""
    value = rule.get(key)
    if value is None:
        return None
    if value not in allowed:
        raise RulesError(f"{where}: {key} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _check_regex(pattern: str, where: str, groups: int = 0) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise RulesError(f"{where}: bad regex {pattern!r}: {exc}") from exc
    if groups and compiled.groups < groups:
        raise RulesError(f"{where}: regex {pattern!r} needs a capture group (the expert/layer)")


def load_rules(extra: Sequence[str | Path] = ()) -> Rules:
    """The user's rule files (first, so they win) followed by the packaged ones."""
    parts: list[Rules] = []
    for path in extra:
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise RulesError(f"{p}: cannot read rules file: {exc.strerror or exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RulesError(
                f"{p}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            ) from None
        parts.append(parse_rules(text, str(p)))
    base = resources.files("moetrace").joinpath("rules")
    for name in PACKAGED_RULES:
        parts.append(
            parse_rules(base.joinpath(f"{name}.toml").read_text(encoding="utf-8"), f"{name}.toml")
        )
    return Rules(
        tuple(r for part in parts for r in part.rules),
        tuple(p for part in parts for p in part.expert_patterns),
        tuple(s for part in parts for s in part.sources),
        tuple(p for part in parts for p in part.layer_patterns),
        tuple(i for part in parts for i in part.details()),
    )


@functools.cache
def default_rules() -> Rules:
    """The packaged rules, read once per process (they never change while it runs)."""
    return load_rules()
