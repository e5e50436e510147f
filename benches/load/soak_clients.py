"""The soak's watchers, writer and probe, through the gateway over mTLS (standard library only).

    python3 soak_clients.py GATEWAY_URL CA CERT KEY NAMESPACE SECONDS OUT_JSON

- WATCHES (50) watchers: each watches ServiceInstances from the last resourceVersion it saw
  (allowWatchBookmarks), reading newline-delimited events over HTTP/1.1 chunked encoding.
  When a watch ends it is resumed from that resourceVersion, as client-go's reflector does.
  Ends are counted as "clean" (the terminating chunk), "between events" (the connection
  closed after a complete event without the terminating chunk, as Go's reverse proxy
  aborts a response whose backend went away: resumable, nothing lost) or "truncated"
  (broken inside an event). A 410
  Gone restarts from a fresh list, a 503 while the backend is down is retried after 0.5 s.
- a writer: merge-patches one object's label every 0.5 s (its events feed the watches);
- a probe: one GET every 0.1 s on a fresh connection, recording (Unix time of the answer, status), so the
  report can say how soon after each backend restart every request succeeded again.

Writes a JSON summary to OUT_JSON: per-watcher counts, the probe's samples, the writer's
status counts.
"""

import http.client
import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse

WATCHES = 50
GROUP_VERSION = "servicecatalog.example.io/v1beta1"


def main():
    url, ca, cert, key, namespace, seconds, out = sys.argv[1:8]
    seconds = float(seconds)
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname, parsed.port
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    base = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/serviceinstances"
    deadline = time.monotonic() + seconds
    stop = threading.Event()

    def connect(timeout=10):
        return http.client.HTTPSConnection(host, port, context=ctx, timeout=timeout)

    def request(method, path, body=None, headers=None):
        conn = connect()
        try:
            conn.request(method, path, body=body, headers=headers or {})
            res = conn.getresponse()
            data = res.read()
            return res.status, data
        finally:
            conn.close()

    def list_rv():
        while not stop.is_set():
            try:
                status, data = request("GET", base)
                if status == 200:
                    return json.loads(data)["metadata"]["resourceVersion"]
            except (OSError, http.client.HTTPException, ValueError):
                pass
            time.sleep(0.5)
        return None

    watchers = [
        {"events": 0, "bookmarks": 0, "clean_ends": 0, "between_events": 0, "truncated": 0, "gone": 0,
         "unavailable": 0, "other_status": {}, "connect_errors": 0, "streaming_at_end": False}
        for _ in range(WATCHES)
    ]

    def open_watch(rv):
        """Sends the watch request on a raw TLS socket; returns (status, reader)."""
        raw = socket.create_connection((host, port), timeout=30)
        tls = ctx.wrap_socket(raw, server_hostname=host)
        path = f"{base}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=3600"
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n".encode())
        reader = tls.makefile("rb")
        status = int(reader.readline().split()[1])
        headers = {}
        while True:
            line = reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers, reader, tls

    def chunks(reader):
        """Yields the chunks of a chunked body; returns "clean" after the terminating chunk
        or "broken" when the connection ended first (StopIteration's value)."""
        while True:
            size_line = reader.readline()
            if not size_line.endswith(b"\n"):
                return "broken"
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return "clean"
            data = reader.read(size)
            if len(data) < size:
                if data:
                    yield data
                return "broken"
            yield data
            if reader.read(2) != b"\r\n":
                return "broken"

    def watcher(i):
        w = watchers[i]
        rv = list_rv()
        while not stop.is_set() and rv is not None:
            tls = None
            try:
                status, headers, reader, tls = open_watch(rv)
                if status != 200:
                    if status == 410:
                        w["gone"] += 1
                        rv = list_rv()
                        continue
                    key = "unavailable" if status == 503 else None
                    if key:
                        w[key] += 1
                    else:
                        w["other_status"][str(status)] = w["other_status"].get(str(status), 0) + 1
                    time.sleep(0.5)
                    continue
                w["streaming_at_end"] = True
                pending = b""
                body = chunks(reader)
                ended = None
                while True:
                    try:
                        data = next(body)
                    except StopIteration as end:
                        ended = end.value
                        break
                    pending += data
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        event = json.loads(line)
                        rv = event["object"]["metadata"].get("resourceVersion", rv)
                        if event["type"] == "BOOKMARK":
                            w["bookmarks"] += 1
                        elif event["type"] == "ERROR":
                            if event["object"].get("code") == 410:
                                w["gone"] += 1
                                rv = list_rv()
                        else:
                            w["events"] += 1
                if pending:
                    w["truncated"] += 1
                elif ended == "clean":
                    w["clean_ends"] += 1
                else:
                    w["between_events"] += 1
                w["streaming_at_end"] = False
            except (OSError, ValueError, IndexError):
                w["streaming_at_end"] = False
                w["connect_errors"] += 1
                time.sleep(0.5)
            finally:
                if tls is not None:
                    tls.close()

    writes = {}

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            body = json.dumps({"metadata": {"labels": {"soak": str(n)}}})
            try:
                status, _ = request("PATCH", f"{base}/soak-0", body=body,
                                    headers={"Content-Type": "application/merge-patch+json"})
                key = str(status)
            except (OSError, http.client.HTTPException) as e:
                key = type(e).__name__
            writes[key] = writes.get(key, 0) + 1
            time.sleep(0.5)

    samples = []

    def probe():
        while not stop.is_set():
            try:
                status, _ = request("GET", f"{base}/soak-0")
            except (OSError, http.client.HTTPException):
                status = 0
            # When the answer came: a request sent just before a kill may be answered 503.
            samples.append((round(time.time(), 3), status))
            time.sleep(0.1)

    threads = [threading.Thread(target=watcher, args=(i,), daemon=True) for i in range(WATCHES)]
    threads += [threading.Thread(target=writer, daemon=True), threading.Thread(target=probe, daemon=True)]
    for t in threads:
        t.start()
    while time.monotonic() < deadline:
        time.sleep(0.5)
    stop.set()
    # Watches still open at the end are counted as streaming; give the rest a moment.
    time.sleep(1)
    with open(out, "w") as f:
        json.dump({"watchers": watchers, "writes": writes, "probe": samples}, f)


if __name__ == "__main__":
    main()
