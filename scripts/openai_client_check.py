#!/usr/bin/env python3
"""Talk to an OpenAI-compatible server with the official `openai` client: one non-streamed and
one streamed chat completion. Prints one JSON object with what came back.

    python scripts/openai_client_check.py BASE_URL [--api-key KEY]
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("--api-key", default="unused")
    ap.add_argument("--max-tokens", type=int, default=12)
    a = ap.parse_args()
    try:
        import openai
    except ImportError:
        sys.exit("the openai package is missing: pip install openai")
    client = openai.OpenAI(base_url=a.base_url.rstrip("/") + "/v1", api_key=a.api_key, max_retries=0, timeout=120)
    models = [m.id for m in client.models.list().data]
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    r = client.chat.completions.create(
        model=models[0], messages=messages, max_tokens=a.max_tokens, temperature=0, seed=1
    )
    whole = {
        "id": r.id,
        "object": r.object,
        "content": r.choices[0].message.content,
        "role": r.choices[0].message.role,
        "finish_reason": r.choices[0].finish_reason,
        "usage": r.usage.model_dump() if r.usage else None,
    }
    pieces, finish, usage, roles = [], None, None, []
    stream = client.chat.completions.create(
        model=models[0],
        messages=messages,
        max_tokens=a.max_tokens,
        temperature=0,
        seed=1,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    streamed = {
        "pieces": pieces,
        "content": "".join(pieces),
        "roles": roles,
        "finish_reason": finish,
        "usage": usage,
    }
    # A bad request comes back as the client's typed error.
    try:
        client.chat.completions.create(model=models[0], messages=[], max_tokens=4)
        bad = None
    except openai.BadRequestError as e:
        bad = {"status": e.status_code, "message": str(e)}
    print(json.dumps({"openai_version": openai.__version__, "models": models, "whole": whole, "streamed": streamed, "bad_request": bad}))


if __name__ == "__main__":
    main()
