#!/usr/bin/env python3
"""bench_serve.mjs for machines without Node.js (a GPU box, say): the same workload for the
same seed, at a fixed concurrency, against any OpenAI-compatible server; the same report
(throughput, TTFT, inter-token and end-to-end latency percentiles). Python 3.8+, standard
library only.

  python3 bench/bench_serve.py --url http://127.0.0.1:8080 -n 64 -c 16 --prompt-len 128 --output-len 64
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

WORDS = ('the a little girl boy dog cat sun park tree ball red big happy sad ran saw said played found went home '
         'friend mom day time once upon toy box water sky bird flower').split()
MASK = (1 << 64) - 1


class Lcg:
    """bench_serve.mjs's 64-bit LCG: the same prompts for the same seed."""

    def __init__(self, seed):
        self.state = (seed * 6364136223846793005 + 1442695040888963407) & MASK

    def random(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & MASK
        return (self.state >> 11) / 2**53

    def draw(self, spec):
        parts = [int(x) for x in spec.split(':')]
        return parts[0] if len(parts) == 1 else parts[0] + int(self.random() * (parts[1] - parts[0] + 1))

    def text(self, n):
        return ' '.join(WORDS[int(self.random() * len(WORDS))] for _ in range(n))


def connect(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)


def chat(args, model, headers, messages, max_tokens):
    """One streamed chat request: its timings and token counts, or {'error': ...}."""
    body = json.dumps({'model': model, 'messages': messages, 'max_tokens': max_tokens,
                       'temperature': args.temperature, 'stream': True,
                       'stream_options': {'include_usage': True}})
    t0 = time.perf_counter()
    conn = connect(args.url)
    try:
        conn.request('POST', '/v1/chat/completions', body, headers)
        r = conn.getresponse()
        if r.status != 200:
            return {'error': f'{r.status} {r.read().decode(errors="replace")}'}
        content, first, last, usage, gaps = '', None, None, None, []
        for raw in r:
            line = raw.decode(errors='replace').strip()
            if not line.startswith('data:') or line[5:].strip() == '[DONE]':
                continue
            j = json.loads(line[5:])
            usage = j.get('usage') or usage
            choices = j.get('choices') or [{}]
            delta = (choices[0].get('delta') or {}).get('content')
            if delta:
                now = time.perf_counter()
                if first is None:
                    first = now
                else:
                    gaps.append((now - last) * 1000)
                last = now
                content += delta
    except (OSError, http.client.HTTPException, ValueError) as e:
        return {'error': f'transport: {e}'}
    finally:
        conn.close()
    usage = usage or {}
    return {'ttft': None if first is None else (first - t0) * 1000, 'gaps': gaps,
            'e2e': (time.perf_counter() - t0) * 1000, 'content': content,
            'output': usage.get('completion_tokens', 0), 'prompt': usage.get('prompt_tokens', 0),
            'cached': (usage.get('prompt_tokens_details') or {}).get('cached_tokens', 0)}


def pct(xs, p):
    if not xs:
        return float('nan')
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--url', default='http://127.0.0.1:8080')
    ap.add_argument('--model', default='')
    ap.add_argument('--api-key', default='')
    ap.add_argument('-n', type=int, default=32)
    ap.add_argument('-c', '--concurrency', type=int, default=4)
    ap.add_argument('--prompt-len', default='64', help='words; a:b draws uniformly')
    ap.add_argument('--output-len', default='64', help='max_tokens; a:b draws uniformly')
    ap.add_argument('--turns', type=int, default=1)
    ap.add_argument('--returning', action='store_true',
                    help='round by round: each conversation returns after the others took their turn')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--temperature', type=float, default=0)
    args = ap.parse_args()

    headers = {'Content-Type': 'application/json'}
    if args.api_key:
        headers['Authorization'] = f'Bearer {args.api_key}'
    model = args.model
    if not model:
        conn = connect(args.url)
        conn.request('GET', '/v1/models', headers=headers)
        model = json.loads(conn.getresponse().read())['data'][0]['id']
        conn.close()

    rng = Lcg(args.seed)
    jobs = [[(rng.text(rng.draw(args.prompt_len)), rng.draw(args.output_len)) for _ in range(args.turns)]
            for _ in range(args.n)]
    results, errors, lock = [], [], threading.Lock()
    conversations = [{'turns': turns, 'messages': [], 'failed': False} for turns in jobs]

    def run_turn(conversation, index):
        """One turn: its user message, then the reply kept for the next turn."""
        if conversation['failed']:
            return
        prompt, max_tokens = conversation['turns'][index]
        messages = conversation['messages']
        messages.append({'role': 'user', 'content': prompt})
        r = chat(args, model, headers, messages, max_tokens)
        with lock:
            if 'error' in r:
                errors.append(r['error'])
                conversation['failed'] = True
                return
            results.append(dict(r, turn=index))
        messages.append({'role': 'assistant', 'content': r['content']})

    def run_all(task):
        """task(conversation) for each conversation, `concurrency` at a time."""
        pending = iter(conversations)

        def worker():
            while True:
                with lock:
                    conversation = next(pending, None)
                if conversation is None:
                    return
                task(conversation)

        threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    t0 = time.perf_counter()
    if args.returning:
        for index in range(args.turns):
            run_all(lambda conversation: run_turn(conversation, index))
    else:
        run_all(lambda conversation: [run_turn(conversation, index) for index in range(args.turns)])
    seconds = time.perf_counter() - t0

    out_tokens = sum(r['output'] for r in results)
    prompt_tokens = sum(r['prompt'] for r in results)
    cached = sum(r['cached'] for r in results)
    print(f'server {args.url}  model {model}')
    print(f'requests {len(results)} ok, {len(errors)} failed; concurrency {args.concurrency}; turns {args.turns}')
    print(f'duration {seconds:.2f} s; throughput {len(results) / seconds:.3f} req/s, '
          f'{out_tokens / seconds:.2f} output tok/s')
    share = 100 * cached / prompt_tokens if prompt_tokens else 0
    print(f'prompt tokens {prompt_tokens}, cached by the server {cached} ({share:.1f}%)')
    print(f'{"latency (ms)":<22} ' + ' '.join(f'{s:>9}' for s in ('p50', 'p90', 'p99')))

    def row(name, xs):
        print(f'{name:<22} ' + ' '.join(f'{pct(xs, p):9.1f}' for p in (50, 90, 99)))

    row('time to first token', [r['ttft'] for r in results if r['ttft'] is not None])
    row('inter-token latency', [g for r in results for g in r['gaps']])
    row('end to end', [r['e2e'] for r in results])
    if args.turns > 1:
        later = [r for r in results if r['turn'] > 0]
        word = 'returning' if args.returning else 'later'
        row('TTFT, first turns', [r['ttft'] for r in results if r['turn'] == 0 and r['ttft'] is not None])
        row(f'TTFT, {word} turns', [r['ttft'] for r in later if r['ttft'] is not None])
        later_prompt, later_cached = sum(r['prompt'] for r in later), sum(r['cached'] for r in later)
        share = 100 * later_cached / later_prompt if later_prompt else 0
        print(f'{word} turns: prompt tokens {later_prompt}, cached by the server {later_cached} ({share:.1f}%)')
    if errors:
        print(f'first error: {errors[0]}')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
