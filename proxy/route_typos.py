"""A route name one slip away from a built-in one. `--route opnai=URL` adds a new route while
`openai` still goes to the real provider: the user believes they are on their fake provider while
real traffic leaves the machine. The proxy starts anyway (the name may be meant), and the banner
asks."""

from __future__ import annotations

from streamtap.proxy.config import DEFAULT_ROUTES, Route

MAX_SLIPS = 2


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): inserting, deleting or changing a
    letter, or swapping two neighbours, is one slip each (`opnai` -> `openai` is 1, `openia` 1)."""
    previous_row: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous_row, row = previous_row, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(previous_row[j] + 1, row[j - 1] + 1, previous_row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[len(b)]


def slips_allowed(builtin: str) -> int:
    """Up to MAX_SLIPS, and no more than a third of the built-in name: `api` is two slips from
    `xai`, but a three-letter name sharing one letter with another is no typo."""
    return min(MAX_SLIPS, len(builtin) // 3)


def meant_builtin(name: str) -> str | None:
    """The built-in route `name` is a slip away from, or None (never for a built-in's own name;
    a different case counts as a slip of no letters: routes are matched case-sensitively)."""
    if name in DEFAULT_ROUTES:
        return None
    distance, builtin = min((edit_distance(name.lower(), builtin), builtin)
                            for builtin in DEFAULT_ROUTES)
    return builtin if distance <= slips_allowed(builtin) else None


def typo_warnings(routes: dict[str, Route]) -> list[str]:
    """A banner line for each route whose name looks like a mistyped built-in, saying where the
    built-in still goes."""
    lines = []
    for name in routes:
        builtin = meant_builtin(name)
        if builtin is not None and builtin in routes:
            lines.append(f"WARNING: route `{name}` is new; did you mean to replace `{builtin}`? "
                         f"/{builtin} still goes to {routes[builtin].url}")
    return lines
