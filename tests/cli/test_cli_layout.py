"""The command's sources (programs/lik) depend one way, as the library's
layers do (docs/architecture.md): main.c parses and dispatches and nothing
calls into it; every function a header declares is defined in that header's
own .c file; and the include graph has no circle.  (index_cmd.h once
declared find_default_data and progress, defined in main.c, which in turn
called index_cmd.c: a circle through the linker.)  Reads the sources only:
no build needed."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "programs" / "lik"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRING = re.compile(r""""(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])+'""")


_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def _code(path: Path) -> str:
    """The text without comments, string / character contents and preprocessor lines."""
    return _DIRECTIVE.sub(" ", _STRING.sub('""', _COMMENT.sub(" ", path.read_text())))


def _top_level(text: str) -> str:
    """Only what is outside braces (function bodies, struct bodies, initialisers)."""
    out, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
            out.append(" {" if depth == 1 else "")
        elif ch == "}":
            depth -= 1
            out.append("}" if depth == 0 else "")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _functions(text: str, *, defined: bool) -> set[str]:
    """Names of the non-static functions declared (prototypes) or defined."""
    top = _top_level(text)
    end = r"\s*\{" if defined else r"\s*;"
    names = set()
    for m in re.finditer(r"(?:(?<=[;}])|^)\s*([A-Za-z_][\w \t\*]*?)\b(\w+)\s*\(([^;{}()]*)\)" + end, top):
        decl = m.group(1)
        if re.search(r"\b(static|typedef|return)\b", decl) or not decl.strip():
            continue
        names.add(m.group(2))
    return names


def _includes(path: Path) -> set[str]:
    return set(re.findall(r'^\s*#\s*include\s+"(\w+)\.h"', path.read_text(), re.M))


def test_main_exports_only_main():
    assert _functions(_code(SRC / "main.c"), defined=True) == {"main"}


def test_every_declared_function_is_defined_beside_its_header():
    checked = 0
    for h in sorted(SRC.glob("*.h")):
        declared = _functions(_code(h), defined=False)
        c = h.with_suffix(".c")
        defined = _functions(_code(c), defined=True) if c.exists() else set()
        assert declared <= defined, f"{h.name} declares {sorted(declared - defined)}, not defined in {c.name}"
        checked += len(declared)
    assert checked > 20  # the parse found the headers' functions


def test_includes_go_one_way():
    modules = {p.stem for p in SRC.glob("*.[ch]")}
    graph = {m: set() for m in modules}
    for p in SRC.glob("*.[ch]"):
        graph[p.stem] |= {i for i in _includes(p) if i in modules and i != p.stem}
    assert not any("main" in deps for deps in graph.values()), "a file includes main"
    state = {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, "include circle: " + " -> ".join(path + [d])
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
