"""Versioned schema migrations, applied in order at startup; never edit a released one."""

from __future__ import annotations

import sqlite3

SQLITE_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        source          TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        provider_status TEXT NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        error           TEXT,
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        last_news_at    REAL NOT NULL,
        terminal_at     REAL,
        progress_done   INTEGER,
        progress_total  INTEGER,
        expected_pages  INTEGER,
        next_poll_at    REAL,
        poll_attempts   INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (source, job_id)
    );
    CREATE INDEX jobs_poll ON jobs (source, next_poll_at) WHERE terminal_at IS NULL;
    CREATE INDEX jobs_created ON jobs (created_at);

    CREATE TABLE deliveries (
        source          TEXT NOT NULL,
        message_id      TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        provider_status TEXT NOT NULL,
        received_at     REAL NOT NULL,
        PRIMARY KEY (source, message_id)
    );
    CREATE INDEX deliveries_job ON deliveries (source, job_id);

    CREATE TABLE completions (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        source          TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        provider_status TEXT NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        error           TEXT,
        created_at      REAL NOT NULL,
        phase           TEXT NOT NULL DEFAULT 'resolving',
        result_path     TEXT,
        result_sha256   TEXT,
        result_bytes    INTEGER,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error      TEXT,
        lease_owner     TEXT,
        lease_until     REAL,
        resolved_at     REAL,
        result_ref      TEXT,
        UNIQUE (source, job_id)
    );
    CREATE INDEX completions_due ON completions (next_attempt_at) WHERE phase = 'resolving';

    CREATE TABLE dispatches (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        completion_id   INTEGER NOT NULL REFERENCES completions (id) ON DELETE CASCADE,
        handler         TEXT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending',
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error      TEXT,
        lease_owner     TEXT,
        lease_until     REAL,
        updated_at      REAL NOT NULL,
        finished_at     REAL,
        UNIQUE (completion_id, handler)
    );
    CREATE INDEX dispatches_due ON dispatches (state, next_attempt_at);

    CREATE TABLE leases (
        name            TEXT PRIMARY KEY,
        owner           TEXT NOT NULL,
        until           REAL NOT NULL
    );
    """,
    # 2: the admin API: a job-level confidence, keyset listing and retention by age.
    """
    ALTER TABLE completions ADD COLUMN confidence REAL;
    CREATE INDEX jobs_listing ON jobs (created_at, source, job_id);
    CREATE INDEX jobs_terminal ON jobs (terminal_at) WHERE terminal_at IS NOT NULL;
    CREATE INDEX completions_results ON completions (id) WHERE result_path IS NOT NULL;
    """,
    # 3: jobs_listing (created_at, source, job_id) serves every query jobs_created served;
    # the second index only cost each new job an extra b-tree insert.
    """
    DROP INDEX IF EXISTS jobs_created;
    """,
    # 4: replicas say they are alive (receiver.pipeline.heartbeat); the claims of one whose
    # heartbeat went stale are taken back by the others instead of waiting out their leases.
    """
    CREATE TABLE replicas (
        owner           TEXT PRIMARY KEY,
        started_at      REAL NOT NULL,
        heartbeat_at    REAL NOT NULL
    );
    """,
    # 5: the provider's error code (DOCUMENT_CORRUPT, PARSE_ERROR...) beside its error text, on
    # the job (from webhooks and polls) and its completion (from the confirming job API call).
    """
    ALTER TABLE jobs ADD COLUMN error_code TEXT;
    ALTER TABLE completions ADD COLUMN error_code TEXT;
    """,
    # 6: the trace a completion belongs to (W3C traceparent of the span that stored it), so the
    # dispatcher continues it later or on another replica; NULL while tracing is off.
    """
    ALTER TABLE completions ADD COLUMN traceparent TEXT;
    """,
    # 7: job quality: where a completion's error arose (provider | fetch), each
    # dispatch's last failure as a normalised code (http_5xx, connect_error...), and one circuit
    # per handler (closed | open | half_open), shared by every replica.
    """
    ALTER TABLE completions ADD COLUMN error_where TEXT;
    ALTER TABLE dispatches ADD COLUMN error_code TEXT;
    CREATE TABLE circuits (
        handler         TEXT PRIMARY KEY,
        state           TEXT NOT NULL,
        failures        INTEGER NOT NULL,
        opened_at       REAL,
        retry_at        REAL,
        updated_at      REAL NOT NULL
    );
    """,
    # 8: per-field confidence: a resolved job's extracted fields, their confidence
    # and value (bounded, receiver.pipeline.fields), with the job's source and creation time
    # copied for the stats; a table of its own, so the hot tables stay as they are.
    """
    CREATE TABLE job_fields (
        completion_id   INTEGER NOT NULL REFERENCES completions (id) ON DELETE CASCADE,
        field           TEXT NOT NULL,
        source          TEXT NOT NULL,
        created_at      REAL NOT NULL,
        confidence      REAL,
        value           TEXT,
        PRIMARY KEY (completion_id, field)
    );
    CREATE INDEX job_fields_created ON job_fields (created_at, source, field, confidence);
    CREATE INDEX job_fields_weak ON job_fields (field, confidence);
    """,
    # 9 (reprocess): one link per finished job
    # submitted again at its provider, claimed before the POST so it is never sent twice.
    """
    CREATE TABLE reprocesses (
        source          TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        new_job_id      TEXT,
        attempts        INTEGER NOT NULL,
        error           TEXT,
        owner           TEXT,
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        PRIMARY KEY (source, job_id)
    );
    CREATE INDEX reprocesses_new ON reprocesses (source, new_job_id);
    """,
    # 10 (the console): each handler attempt as it ended, written by the dispatcher
    # with the dispatch's own update (never on the webhook path), for a job's timeline.
    """
    CREATE TABLE attempts (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        dispatch_id     INTEGER NOT NULL REFERENCES dispatches (id) ON DELETE CASCADE,
        attempt         INTEGER NOT NULL,
        outcome         TEXT NOT NULL,
        error           TEXT,
        error_code      TEXT,
        next_attempt_at REAL,
        ended_at        REAL NOT NULL
    );
    CREATE INDEX attempts_dispatch ON attempts (dispatch_id);
    """,
    # 11 (the console's timeline): how long the attempt that resolved a completion took to
    # confirm with the job API and fetch the result.
    """
    ALTER TABLE completions ADD COLUMN resolve_seconds REAL;
    """,
    # 12: a single-use result (Docling Serve's, LandingAI's under zero data retention) is
    # requested at most once: this row, committed before the request, says it was.
    """
    CREATE TABLE result_fetches (
        completion_id   INTEGER PRIMARY KEY REFERENCES completions (id) ON DELETE CASCADE,
        started_at      REAL NOT NULL
    );
    """,
    # 13: one random key per webhook. A job gets jobhook's own sequential id at
    # first sight (jobs.id, its rowid made explicit so VACUUM keeps it); its deliveries and its
    # completion are keyed by that id (``job``), which is recent for every webhook of a live job,
    # so their index entries append at the right edge of their B-trees. Only jobs' (source,
    # job_id), the lookup from the provider's id, stays random. The provider's ids stay on the
    # rows that have them, for the reads that show them. jobs and completions are rebuilt (a
    # table constraint cannot be dropped in SQLite), each row keeping its id; the migration
    # runs with foreign keys off and is checked by foreign_key_check before it commits.
    """
    CREATE TABLE jobs_13 (
        id              INTEGER PRIMARY KEY,
        source          TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        provider_status TEXT NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        error           TEXT,
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        last_news_at    REAL NOT NULL,
        terminal_at     REAL,
        progress_done   INTEGER,
        progress_total  INTEGER,
        expected_pages  INTEGER,
        next_poll_at    REAL,
        poll_attempts   INTEGER NOT NULL DEFAULT 0,
        error_code      TEXT,
        UNIQUE (source, job_id)
    );
    INSERT INTO jobs_13 (id, source, job_id, state, provider_status, metadata, error, created_at,
                         updated_at, last_news_at, terminal_at, progress_done, progress_total,
                         expected_pages, next_poll_at, poll_attempts, error_code)
    SELECT rowid, source, job_id, state, provider_status, metadata, error, created_at,
           updated_at, last_news_at, terminal_at, progress_done, progress_total,
           expected_pages, next_poll_at, poll_attempts, error_code
    FROM jobs ORDER BY rowid;
    DROP TABLE jobs;
    ALTER TABLE jobs_13 RENAME TO jobs;
    CREATE INDEX jobs_poll ON jobs (source, next_poll_at) WHERE terminal_at IS NULL;
    CREATE INDEX jobs_listing ON jobs (created_at, source, job_id);
    CREATE INDEX jobs_terminal ON jobs (terminal_at) WHERE terminal_at IS NOT NULL;

    ALTER TABLE deliveries ADD COLUMN job INTEGER;
    UPDATE deliveries SET job = (SELECT j.id FROM jobs j
                                 WHERE j.source = deliveries.source
                                   AND j.job_id = deliveries.job_id);
    DROP INDEX deliveries_job;
    CREATE INDEX deliveries_job ON deliveries (job);

    CREATE TABLE completions_13 (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        job             INTEGER UNIQUE,
        source          TEXT NOT NULL,
        job_id          TEXT NOT NULL,
        state           TEXT NOT NULL,
        provider_status TEXT NOT NULL,
        metadata        TEXT NOT NULL DEFAULT '{}',
        error           TEXT,
        created_at      REAL NOT NULL,
        phase           TEXT NOT NULL DEFAULT 'resolving',
        result_path     TEXT,
        result_sha256   TEXT,
        result_bytes    INTEGER,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error      TEXT,
        lease_owner     TEXT,
        lease_until     REAL,
        resolved_at     REAL,
        result_ref      TEXT,
        confidence      REAL,
        error_code      TEXT,
        traceparent     TEXT,
        error_where     TEXT,
        resolve_seconds REAL
    );
    INSERT INTO sqlite_sequence (name, seq)
    SELECT 'completions_13', seq FROM sqlite_sequence WHERE name = 'completions';
    INSERT INTO completions_13 (id, job, source, job_id, state, provider_status, metadata, error,
                                created_at, phase, result_path, result_sha256, result_bytes,
                                attempts, next_attempt_at, last_error, lease_owner, lease_until,
                                resolved_at, result_ref, confidence, error_code, traceparent,
                                error_where, resolve_seconds)
    SELECT c.id, j.id, c.source, c.job_id, c.state, c.provider_status, c.metadata, c.error,
           c.created_at, c.phase, c.result_path, c.result_sha256, c.result_bytes, c.attempts,
           c.next_attempt_at, c.last_error, c.lease_owner, c.lease_until, c.resolved_at,
           c.result_ref, c.confidence, c.error_code, c.traceparent, c.error_where,
           c.resolve_seconds
    FROM completions c LEFT JOIN jobs j ON j.source = c.source AND j.job_id = c.job_id
    ORDER BY c.id;
    DROP TABLE completions;
    ALTER TABLE completions_13 RENAME TO completions;
    CREATE INDEX completions_due ON completions (next_attempt_at) WHERE phase = 'resolving';
    CREATE INDEX completions_results ON completions (id) WHERE result_path IS NOT NULL;
    """,
    # 14: the audit trail (receiver.store.audit): admin actions, each written before its effect
    # and finished after it, and refused attempts counted on one row per address, reason and
    # hour (``refusal``, NULL for actions, is that row's key).
    """
    CREATE TABLE audit (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        at              REAL NOT NULL,
        last_at         REAL NOT NULL,
        token           TEXT NOT NULL,
        role            TEXT NOT NULL,
        action          TEXT NOT NULL,
        target          TEXT NOT NULL,
        source          TEXT,
        job_id          TEXT,
        jobs            INTEGER,
        outcome         TEXT NOT NULL,
        ref             TEXT,
        request_id      TEXT NOT NULL,
        client          TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 1,
        refusal         TEXT UNIQUE
    );
    CREATE INDEX audit_last ON audit (last_at);
    CREATE INDEX audit_token ON audit (token, id);
    """,
)


def statements(script: str) -> list[str]:
    """A migration's statements one by one, to run inside a transaction of the caller's
    (``executescript`` would commit it first)."""
    found: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    if pending.strip():
        found.append(pending.strip())
    return found
