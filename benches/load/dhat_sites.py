#!/usr/bin/env python3
"""The allocation sites of a DHAT file (valgrind --tool=dhat) that run about once or more
per request, with the first frames of their call stacks, and the allocations per request
by the crate that asked for them.

    python3 dhat_sites.py dhat.json REQUESTS [ROWS]

A site counts when it made at least 0.9 allocations per request. Its crate is that of the
first frame outside the allocator and the standard library's collections (the code that
asked for the memory, not the `Vec` or `HashMap` that grew)."""

import json
import re
import sys
from collections import Counter

# Frames that are the allocation's mechanics, not its reason.
MECHANICS = re.compile(
    r"^(alloc::|core::|std::|hashbrown::|__rust|malloc|calloc|realloc|posix_memalign|"
    r"<alloc::|<core::|<std::|<hashbrown::|smallvec::|<smallvec::)"
)
CRATE = re.compile(r"^<?(?:<[^ ]+ as )?([a-z_][a-z0-9_]*)::")


def function(frame):
    """The function name of a DHAT frame (`0x...: name (file:line)`)."""
    m = re.match(r"^0x[0-9A-F]+: (.*?)(?: \(.*\))?$", frame)
    return m.group(1) if m else frame


def shorten(frame):
    """`<kube_aggregator::a::B<S> as kube_aggregator::f::Filter<S,B>>::filter` as
    `a::B as Filter::filter`: the paths and generic arguments dropped."""
    text = frame
    for _ in range(3):
        text = re.sub(r"<[^<>\s]*>", "", text)
    text = re.sub(r"\{\{closure\}\}", "closure", text)
    text = re.sub(r"\b[a-z_]+::(?=[a-z_]+::[A-Z])", "", text.replace("kube_aggregator::", ""))
    return text.replace("<", "").replace(">", "")


def main():
    path, requests = sys.argv[1], int(sys.argv[2])
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    data = json.load(open(path))
    frames = data["ftbl"]
    sites = []
    for pp in data["pps"]:
        if pp["tbk"] < 0.9 * requests:
            continue
        stack = [function(frames[i]) for i in pp["fs"]]
        reason = [f for f in stack if not MECHANICS.match(f)]
        sites.append((pp["tbk"] / requests, pp["tb"] / pp["tbk"], reason or stack))
    sites.sort(key=lambda s: -s[0])
    by_crate = Counter()
    for per, _, reason in sites:
        m = CRATE.match(reason[0])
        by_crate[m.group(1) if m else "other"] += per
    # The first of our frames on each stack: which of our functions the allocation is
    # made for, whichever crate makes it.
    ours = Counter()
    for per, _, reason in sites:
        frame = next((f for f in reason if "kube_aggregator::" in f), None)
        ours[shorten(frame) if frame else "(none of ours on the stack)"] += per
    total = sum(s[0] for s in sites)
    print(f"Allocations per request at sites that run once or more per request: {total:.1f}\n")
    print("| crate asking | allocations per request |\n|---|---:|")
    for crate, per in by_crate.most_common():
        print(f"| {crate} | {per:.1f} |")
    print("\n| our first frame on the stack | allocations per request |\n|---|---:|")
    for frame, per in ours.most_common():
        print(f"| `{frame}` | {per:.1f} |")
    print(f"\n| per request | bytes each | first frames (callee <- caller) |\n|---:|---:|---|")
    for per, size, reason in sites[:rows]:
        shown = " <- ".join(f"`{f[:80]}`" for f in reason[:3])
        print(f"| {per:.2f} | {size:.0f} | {shown} |")


if __name__ == "__main__":
    main()
