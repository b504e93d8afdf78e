"""A loopback webhook receiver for webhook_failover.sh: checks each call's signature as
docs/api.md says (HMAC-SHA256 of timestamp "." body, $WEBHOOK_SECRET), appends one JSON line
per call to $WEBHOOK_CALLS, and holds the first "started" call open for 60 s so that the
replica delivering it is mid-call when it is killed.

  python3 scripts/bench/webhook_receiver.py PORT"""
import hashlib, hmac, http.server, json, os, sys, time, threading
SECRET = os.environ["WEBHOOK_SECRET"].encode()
log = open(os.environ["WEBHOOK_CALLS"], "a", buffering=1)
held = threading.Event()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ts = self.headers["Marspec-Webhook-Timestamp"]
        want = "v1=" + hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        ok = want in self.headers["Marspec-Webhook-Signature"].split()
        p = json.loads(body)
        rec = dict(at=time.time(), id=self.headers["Marspec-Webhook-Id"], event=p["event"], ok=ok,
                   status=p["generation"]["status"], sha=hashlib.sha256(body).hexdigest()[:16])
        if p["event"] == "started" and not held.is_set():
            held.set(); rec["held"] = True; log.write(json.dumps(rec) + "\n"); time.sleep(60)
            return
        log.write(json.dumps(rec) + "\n")
        self.send_response(200 if ok else 401); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
