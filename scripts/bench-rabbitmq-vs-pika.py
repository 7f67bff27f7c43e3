#!/usr/bin/env python3
"""Browse throughput on a RabbitMQ DLQ: dlq-triage against a plain pika consumer with
the same prefetch (unlimited, 0), side by side in one run, each browsing ALL the
letters. Both hold every message unacked and release them (requeue), so the DLQ is
left as it was. Prints dlq-triage's peak RSS too.

    pip install pika
    scripts/bench-rabbitmq-vs-pika.py [LETTERS]      # default 100000; needs 127.0.0.1:5672 guest/guest
    ROUNDS=7 scripts/bench-rabbitmq-vs-pika.py …     # rounds (default 5), who goes first alternating

The DLQ is filled by real dead-lettering: messages published to a work queue with a 1 ms
TTL expire into it, so every letter carries the broker's own x-death.
"""
import os
import statistics
import subprocess
import sys
import time

import pika

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
ROUNDS = int(os.environ.get("ROUNDS", "5"))
PREFETCH = 0  # unlimited on both sides: what dlq-triage uses for a whole-queue browse
SUFFIX = f"{os.getpid()}"
DLQ, WORK = f"bench.dlq.{SUFFIX}", f"bench.work.{SUFFIX}"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "dlq-triage")

params = pika.ConnectionParameters("127.0.0.1", 5672, "/", pika.PlainCredentials("guest", "guest"))
conn = pika.BlockingConnection(params)
ch = conn.channel()
ch.queue_declare(DLQ, durable=False)
ch.queue_declare(WORK, durable=False, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DLQ, "x-message-ttl": 1})
body = ('{"message_id":"m","event_type":"invoice.issue.requested","payload":{"customer":{"email":"jane@example.com"},"amount":"1,500.00"},'
        '"failure":{"reason_code":"amount_not_a_number","consumer":"invoice-worker","consumer_version":"release-2026-09-21","attempt":4}}')
print(f"filling {DLQ} with {N} dead letters…", flush=True)
for i in range(N):
    ch.basic_publish("", WORK, body.replace('"m"', f'"m-{i}"'), pika.BasicProperties(message_id=f"m-{i}"))
while ch.queue_declare(DLQ, passive=True).method.message_count < N:
    time.sleep(0.2)


def pika_browse():
    c = pika.BlockingConnection(params)
    b = c.channel()
    b.basic_qos(prefetch_count=PREFETCH)
    got = 0
    for method, props, payload in b.consume(DLQ, auto_ack=False, inactivity_timeout=10):
        if method is None:
            break
        got += 1
        if got >= N:
            break
    b.cancel()
    c.close()  # unacked messages go back to the queue
    return got


def ours():
    out = subprocess.run([BIN, "summary", f"amqp://guest:guest@127.0.0.1:5672/%2f?queue={DLQ}", "--json",
                          "--queue-type", "classic"],
                         capture_output=True, text=True, check=True)
    total = [l for l in out.stdout.splitlines() if '"total"' in l][0]
    return int(total.split(":")[1].strip().strip(","))


def settled():
    """Wait until every message the last browse released is back and ready, so both
    sides start from the same broker state (a browse that starts while the broker is
    still requeueing the previous one's 100,000 messages is slowed by it)."""
    c = pika.BlockingConnection(params)
    q = c.channel()
    while q.queue_declare(DLQ, passive=True).method.message_count < N:
        time.sleep(0.1)
    c.close()
    time.sleep(1)


# A run counts only if it browsed all N letters: pika stops after 10 s without a delivery
# (seen once at 1,000,000, when the broker paused delivering to it), and a rate over part
# of the queue is not the whole job.
pika_times, our_times = [], []
for r in range(ROUNDS):
    # Who goes first alternates: the broker's pace drifts within a run (its garbage
    # collector on a heap of N held messages; rounds a minute apart differ by up to 2x).
    order = [("pika", pika_browse, pika_times), ("dlq-triage", ours, our_times)]
    if r % 2:
        order.reverse()
    line = []
    for who, browse, times in order:
        settled()
        t0 = time.time()
        got = browse()
        took = time.time() - t0
        line.append(f"{who} {got} in {took:.2f}s")
        if got == N:
            times.append(took)
        else:
            line.append(f"({who} browsed {got} of {N}: left out of the median)")
    print(f"round {r + 1}: " + ", ".join(line), flush=True)
if not pika_times or not our_times:
    sys.exit("no complete run on one side: no ratio")
pk = statistics.median(pika_times)
us = statistics.median(our_times)
print(f"median of complete runs ({len(pika_times)} pika, {len(our_times)} dlq-triage): pika {N} letters in "
      f"{pk:.2f}s ({N / pk:.0f}/s), dlq-triage {N} in {us:.2f}s ({N / us:.0f}/s) — ratio {pk / us:.2f}; "
      f"dlq-triage also extracts conventions, masks previews and groups")
import resource
print(f"dlq-triage peak RSS: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB")
# The filling connection sat idle through the rounds (pika's blocking adapter does not
# answer heartbeats while idle): a fresh one for the check and the clean-up.
conn = pika.BlockingConnection(params)
ch = conn.channel()
left = ch.queue_declare(DLQ, passive=True).method.message_count
print(f"{DLQ} still holds {left} messages (browsing released them)")
ch.queue_delete(DLQ)
ch.queue_delete(WORK)
conn.close()
