#!/usr/bin/env python3
"""Instructions per request of a callgrind profile, split by component.

    python3 cg_split.py REQUESTS NAME=FILE [NAME=FILE ...]

Each FILE is a callgrind dump covering REQUESTS requests (instructions.sh writes them,
KEEP=1 keeps them). Every function's own instructions (not those of what it calls) are
put in one component, by the crate its name starts with (Rust), the library it was loaded
from (C) or its name prefix (HAProxy), and a Markdown table with one column per FILE is
printed. Callgrind counts user-space instructions only: the kernel's socket work is in
neither proxy's figures.
"""
import collections
import re
import sys

COMPONENTS = [
    "TLS records and crypto",
    "HTTP/2 framing and HPACK",
    "HTTP/1.1 parsing and writing",
    "HTTP glue (hyper's connection and stream tasks)",
    "header maps and request types",
    "the proxy's own logic",
    "async runtime and I/O calls",
    "allocator",
    "libc copies and compares",
    "other",
]

RUST_CRATES = {
    "rustls": 0, "tokio_rustls": 0, "ring": 0, "rustls_pki_types": 0, "webpki": 0,
    "h2": 1,
    "httparse": 2,
    "hyper": 3, "hyper_util": 3,
    "http": 4, "http_body": 4, "http_body_util": 4,
    "kube_aggregator": 5, "gateway": 5,
    "tokio": 6, "mio": 6,
    "mimalloc": 7, "libmimalloc_sys": 7,
}
HAPROXY_PREFIXES = [
    (r"^(ssl_sock|ssl_)", 0),
    (r"^(h2|h2c|h2s|hpack|mux_h2)_|^huff_", 1),
    (r"^(h1|h1c|h1s|mux_h1)_", 2),
    (r"^(__)?pool_", 7),
    (r"^(fd_|_do_poll|run_tasks|run_poll|tasklet_|task_|__task_|sock_conn|raw_sock)", 6),
]


def crate_of(name):
    """The crate a Rust function's name starts with, past `<` and `drop_in_place<`."""
    name = re.sub(r"^(core::ptr::drop_in_place<|<|\[|&)+", "", name)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return m.group(1) if m else None


def component(name, obj):
    if re.search(r"libcrypto|libssl", obj):
        return 0
    crate = crate_of(name)
    if crate in RUST_CRATES:
        return RUST_CRATES[crate]
    if re.match(r"^(ring_core_|_?aes|_aesni|gcm_|_*ecp_nistz|x25519|sha|fe_|ge_|"
                r"table_select)", name):
        return 0
    if re.match(r"^_?mi_|^(malloc|free|calloc|realloc|cfree|_int_malloc|_int_free|"
                r"_int_realloc|malloc_consolidate|__rust_(alloc|dealloc|realloc))$", name):
        return 7
    if re.match(r"^__(mem|str)|^(mem|str)(cpy|move|cmp|set|len|chr)", name):
        return 8
    if re.search(r"/haproxy$", obj):
        for pattern, c in HAPROXY_PREFIXES:
            if re.match(pattern, name):
                return c
        return 5
    if re.search(r"libc\.so", obj) and re.match(r"^(__)?(libc_)?(recv|send|read|write|"
                                                 r"epoll|clock_gettime|syscall)", name):
        return 6
    return 9


def split(path):
    names, objs = {}, {}
    costs = collections.Counter()
    fn, obj, after_call = None, "", False

    def resolve(table, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), text)

    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        key, _, rest = line.partition("=")
        if key == "ob":
            obj = resolve(objs, rest)
        elif key == "fn":
            fn = (resolve(names, rest), obj)
        elif key in ("cob",):
            resolve(objs, rest)
        elif key in ("cfn", "cfl", "cfi"):
            if key == "cfn":
                resolve(names, rest)
        elif key == "calls":
            after_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if after_call:
                after_call = False
                continue
            parts = line.split()
            if fn is not None and len(parts) >= 2:
                costs[component(*fn)] += int(parts[1])
    return costs


def main():
    requests = int(sys.argv[1])
    columns = [arg.split("=", 1) for arg in sys.argv[2:]]
    splits = [split(path) for _, path in columns]
    print("| component | " + " | ".join(name for name, _ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for i, label in enumerate(COMPONENTS):
        cells = [f"{s[i] // requests:,}" for s in splits]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| **total** | " + " | ".join(f"**{sum(s.values()) // requests:,}**" for s in splits) + " |")


if __name__ == "__main__":
    main()
