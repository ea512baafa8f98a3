"""jobhook: a verified, durable webhook receiver for document-processing APIs.

The packages follow a completion through the service, top to bottom; each imports only those
below it (tests/test_layers.py keeps it so):

    cli          the jobhook command
    service      the composition root: app, runtime (every resource a lifespan owns), serve
    console      the operator's web pages at /ui/, over what admin reads and does
    intake       news comes in: webhook route, fallback poller, one Ingestor   | admin | sim
    pipeline     a completion goes out: confirm, fetch the result, dispatch    | ops
    config       settings, validated once
    providers    signatures    store     what each provider speaks, how it signs, where it lands
    completion errors models secret files jsontext backoff loops    the shared vocabulary

``handlers`` (top level) sits between intake and pipeline: the dispatcher calls them through the
``Handler`` contract in ``receiver.completion``.
"""
