"""PostgreSQL functions the migrations create (``migrations``): each text here is a released
migration, never to be edited; a change is a new migration that replaces the function."""

from __future__ import annotations

# Migration 10: group commit of ingests (``group_commit``). One call runs a batch of events,
# each with exactly the statements of the one-event path (``ingest.ingest_one``: ``sql``'s
# text with each placeholder an array element, which tests/store/test_pg_batch.py checks; a
# change there needs a new migration replacing this function), in input order, answering one
# row per event in that order. The events come as parallel arrays, one element each; their
# handlers, ragged, as one flat array in event order with each event's count beside it (no
# separator that a handler's name could contain). The completion-order lock
# (sql.COMPLETION_ORDER_LOCK) is taken once, up front, when any event is terminal: before
# any row lock, so a stream reader queued for it exclusively never stands between two batches
# that wait for each other's rows.
INGEST_BATCH_FUNCTION = """
CREATE FUNCTION jobhook_ingest_batch(
    p_source text[], p_message_id text[], p_job_id text[], p_state text[],
    p_provider_status text[], p_metadata jsonb[], p_error text[], p_at double precision[],
    p_terminal_at double precision[], p_progress_done bigint[], p_progress_total bigint[],
    p_expected_pages bigint[], p_poll_at double precision[], p_error_code text[],
    p_phase text[], p_result_ref text[], p_traceparent text[], p_handler_count integer[],
    p_handlers text[]
) RETURNS TABLE (o_status text, o_state text, o_completed boolean,
                 o_took double precision, o_requeued integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_next_handler integer := 1;
    v_took double precision;
    v_completion bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_terminal_at) AS t WHERE t IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock_shared(7669456891120937730);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_source, 1), 0) LOOP
        o_status := 'accepted';
        o_completed := false;
        o_took := NULL;
        o_requeued := 0;
        IF p_message_id[i] IS NOT NULL THEN
            INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
                                    received_at)
            VALUES (p_source[i], p_message_id[i], p_job_id[i], p_state[i],
                    p_provider_status[i], p_at[i]) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                UPDATE dispatches SET state = 'pending', attempts = 0,
                    next_attempt_at = p_at[i], updated_at = p_at[i],
                    lease_owner = NULL, lease_until = NULL
                WHERE state = 'dead'
                  AND completion_id = (SELECT id FROM completions
                                       WHERE source = p_source[i] AND job_id = p_job_id[i]);
                GET DIAGNOSTICS o_requeued = ROW_COUNT;
                SELECT state INTO o_state FROM jobs
                WHERE source = p_source[i] AND job_id = p_job_id[i];
                o_status := 'duplicate';
            END IF;
        END IF;
        IF o_status = 'accepted' THEN
            INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
                              created_at, updated_at, last_news_at, terminal_at,
                              progress_done, progress_total, expected_pages, next_poll_at,
                              error_code)
            VALUES (p_source[i], p_job_id[i], p_state[i], p_provider_status[i],
                    p_metadata[i]::jsonb, p_error[i], p_at[i], p_at[i], p_at[i], p_terminal_at[i],
                    p_progress_done[i], p_progress_total[i], p_expected_pages[i],
                    p_poll_at[i], p_error_code[i])
            ON CONFLICT (source, job_id) DO UPDATE SET
                state = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.state ELSE jobs.state END,
                provider_status = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.provider_status ELSE jobs.provider_status END,
                error = CASE WHEN jobs.terminal_at IS NULL
                             THEN coalesce(excluded.error, jobs.error) ELSE jobs.error END,
                error_code = CASE WHEN jobs.terminal_at IS NULL
                                  THEN coalesce(excluded.error_code, jobs.error_code)
                                  ELSE jobs.error_code END,
                terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
                metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
                updated_at = excluded.updated_at,
                last_news_at = excluded.last_news_at,
                progress_done = coalesce(excluded.progress_done, jobs.progress_done),
                progress_total = coalesce(excluded.progress_total, jobs.progress_total),
                expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
                next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
                poll_attempts = CASE WHEN excluded.next_poll_at IS NULL
                                     THEN jobs.poll_attempts ELSE 0 END
            RETURNING state, terminal_at - created_at INTO o_state, v_took;
            IF p_terminal_at[i] IS NOT NULL AND o_state = p_state[i] THEN
                INSERT INTO completions (source, job_id, state, provider_status, metadata,
                                         error, created_at, next_attempt_at, phase,
                                         result_ref, error_code, traceparent)
                SELECT source, job_id, state, provider_status, metadata, error,
                       p_at[i]::double precision, p_at[i]::double precision,
                       p_phase[i]::text, p_result_ref[i]::text, error_code,
                       p_traceparent[i]::text
                FROM jobs WHERE source = p_source[i] AND job_id = p_job_id[i]
                ON CONFLICT (source, job_id) DO NOTHING RETURNING id INTO v_completion;
                IF v_completion IS NOT NULL THEN
                    o_completed := true;
                    o_took := v_took;
                    FOR h IN v_next_handler .. v_next_handler + p_handler_count[i] - 1 LOOP
                        INSERT INTO dispatches (completion_id, handler, next_attempt_at,
                                                updated_at)
                        VALUES (v_completion, p_handlers[h], p_at[i], p_at[i])
                        ON CONFLICT DO NOTHING;
                    END LOOP;
                END IF;
            END IF;
        END IF;
        v_next_handler := v_next_handler + p_handler_count[i];
        RETURN NEXT;
    END LOOP;
END $$;
"""


# Migration 12: the same function keyed by jobhook's own id of each job (jobs.id): read
# first (or a fresh one from the job's sequence, for a job seen for the first time), it keys the
# delivery, the job's insert and its completion, like ``ingest.ingest_one``. A job first seen by
# two transactions at once keeps the id of the one that inserted it; the other moves its
# delivery to that id before it commits.
INGEST_BY_JOB_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION jobhook_ingest_batch(
    p_source text[], p_message_id text[], p_job_id text[], p_state text[],
    p_provider_status text[], p_metadata jsonb[], p_error text[], p_at double precision[],
    p_terminal_at double precision[], p_progress_done bigint[], p_progress_total bigint[],
    p_expected_pages bigint[], p_poll_at double precision[], p_error_code text[],
    p_phase text[], p_result_ref text[], p_traceparent text[], p_handler_count integer[],
    p_handlers text[]
) RETURNS TABLE (o_status text, o_state text, o_completed boolean,
                 o_took double precision, o_requeued integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_next_handler integer := 1;
    v_took double precision;
    v_completion bigint;
    v_job bigint;
    v_stored bigint;
    v_known text;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_terminal_at) AS t WHERE t IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock_shared(7669456891120937730);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_source, 1), 0) LOOP
        o_status := 'accepted';
        o_completed := false;
        o_took := NULL;
        o_requeued := 0;
        v_job := NULL;
        SELECT id, state INTO v_job, v_known FROM jobs
        WHERE source = p_source[i] AND job_id = p_job_id[i];
        IF v_job IS NULL THEN
            v_job := nextval('jobs_id_seq');
            v_known := p_state[i];
        END IF;
        IF p_message_id[i] IS NOT NULL THEN
            INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
                                    received_at, job)
            VALUES (p_source[i], p_message_id[i], p_job_id[i], p_state[i],
                    p_provider_status[i], p_at[i], v_job) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                UPDATE dispatches SET state = 'pending', attempts = 0,
                    next_attempt_at = p_at[i], updated_at = p_at[i],
                    lease_owner = NULL, lease_until = NULL
                WHERE state = 'dead'
                  AND completion_id = (SELECT id FROM completions WHERE job = v_job);
                GET DIAGNOSTICS o_requeued = ROW_COUNT;
                o_state := coalesce((SELECT state FROM jobs WHERE id = v_job), v_known);
                o_status := 'duplicate';
            END IF;
        END IF;
        IF o_status = 'accepted' THEN
            INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
                              created_at, updated_at, last_news_at, terminal_at,
                              progress_done, progress_total, expected_pages, next_poll_at,
                              error_code, id)
            VALUES (p_source[i], p_job_id[i], p_state[i], p_provider_status[i],
                    p_metadata[i]::jsonb, p_error[i], p_at[i], p_at[i], p_at[i], p_terminal_at[i],
                    p_progress_done[i], p_progress_total[i], p_expected_pages[i],
                    p_poll_at[i], p_error_code[i], v_job)
            ON CONFLICT (source, job_id) DO UPDATE SET
                state = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.state ELSE jobs.state END,
                provider_status = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.provider_status ELSE jobs.provider_status END,
                error = CASE WHEN jobs.terminal_at IS NULL
                             THEN coalesce(excluded.error, jobs.error) ELSE jobs.error END,
                error_code = CASE WHEN jobs.terminal_at IS NULL
                                  THEN coalesce(excluded.error_code, jobs.error_code)
                                  ELSE jobs.error_code END,
                terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
                metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
                updated_at = excluded.updated_at,
                last_news_at = excluded.last_news_at,
                progress_done = coalesce(excluded.progress_done, jobs.progress_done),
                progress_total = coalesce(excluded.progress_total, jobs.progress_total),
                expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
                next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
                poll_attempts = CASE WHEN excluded.next_poll_at IS NULL
                                     THEN jobs.poll_attempts ELSE 0 END
            RETURNING id, state, terminal_at - created_at INTO v_stored, o_state, v_took;
            IF v_stored <> v_job AND p_message_id[i] IS NOT NULL THEN
                -- another transaction saw the job first, after our read: its id, not ours
                UPDATE deliveries SET job = v_stored
                WHERE source = p_source[i] AND message_id = p_message_id[i];
            END IF;
            IF p_terminal_at[i] IS NOT NULL AND o_state = p_state[i] THEN
                INSERT INTO completions (job, source, job_id, state, provider_status, metadata,
                                         error, created_at, next_attempt_at, phase,
                                         result_ref, error_code, traceparent)
                SELECT id, source, job_id, state, provider_status, metadata, error,
                       p_at[i]::double precision, p_at[i]::double precision,
                       p_phase[i]::text, p_result_ref[i]::text, error_code,
                       p_traceparent[i]::text
                FROM jobs WHERE id = v_stored
                ON CONFLICT (job) DO NOTHING RETURNING id INTO v_completion;
                IF v_completion IS NOT NULL THEN
                    o_completed := true;
                    o_took := v_took;
                    FOR h IN v_next_handler .. v_next_handler + p_handler_count[i] - 1 LOOP
                        INSERT INTO dispatches (completion_id, handler, next_attempt_at,
                                                updated_at)
                        VALUES (v_completion, p_handlers[h], p_at[i], p_at[i])
                        ON CONFLICT DO NOTHING;
                    END LOOP;
                END IF;
            END IF;
        END IF;
        v_next_handler := v_next_handler + p_handler_count[i];
        RETURN NEXT;
    END LOOP;
END $$;
"""


# Migration 14: the batch as a few statements over all of its events instead of five to eight
# statements an event. The function of migration 12 stays, renamed jobhook_ingest_each, for a
# batch in which a job or a message comes twice (its events must see each other's effects, one
# after the other), and for a batch of fewer than eight events, which it stores with less work
# (the statements over all events cost more to start than a few events' statements do).
# Otherwise the events touch distinct rows, and each step runs once for all,
# in the events' order (so concurrent batches take their row locks in the same order, as the
# loop did): the jobs' ids (known, or fresh from the sequence), the deliveries (those that
# conflict are duplicates), the upserts of the accepted events' jobs with their completions and
# dispatches. What is rare stays one event at a time, with the loop's own statements: the dead
# dispatches a duplicate requeues, and a delivery moved to the id another transaction gave its
# job first. The answers are the loop's, row for row (tests/store/test_pg_batch.py compares
# both with one event per transaction). The statements are planned once, generically (a plan
# made afresh for every call costs more than running it), and read the tables only by key,
# through a subquery an event (LIMIT 1 keeps the planner from making it a join), so that no
# generic plan can turn a lookup into a scan of a table.
INGEST_SET_FUNCTION = """
ALTER FUNCTION jobhook_ingest_batch(
    text[], text[], text[], text[], text[], jsonb[], text[], double precision[],
    double precision[], bigint[], bigint[], bigint[], double precision[], text[], text[],
    text[], text[], integer[], text[]
) RENAME TO jobhook_ingest_each;

CREATE FUNCTION jobhook_ingest_batch(
    p_source text[], p_message_id text[], p_job_id text[], p_state text[],
    p_provider_status text[], p_metadata jsonb[], p_error text[], p_at double precision[],
    p_terminal_at double precision[], p_progress_done bigint[], p_progress_total bigint[],
    p_expected_pages bigint[], p_poll_at double precision[], p_error_code text[],
    p_phase text[], p_result_ref text[], p_traceparent text[], p_handler_count integer[],
    p_handlers text[]
) RETURNS TABLE (o_status text, o_state text, o_completed boolean,
                 o_took double precision, o_requeued integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_count integer := coalesce(array_length(p_source, 1), 0);
    v_distinct boolean;
    v_job bigint[];
    v_known text[];
    v_accepted boolean[];
    v_requeued integer[];
    v_rows integer;
    v_stored bigint[];
    v_state text[];
    v_took double precision[];
    v_completion bigint[];
BEGIN
    SELECT count(DISTINCT (e.source, e.job_id)) = v_count
           AND count(DISTINCT (e.source, e.message_id)) FILTER (WHERE e.message_id IS NOT NULL)
               = count(e.message_id)
    INTO v_distinct
    FROM unnest(p_source, p_job_id, p_message_id) AS e(source, job_id, message_id);
    IF v_count < 8 OR NOT v_distinct THEN
        RAISE DEBUG 'jobhook_ingest_batch: one event at a time';
        RETURN QUERY SELECT * FROM jobhook_ingest_each(
            p_source, p_message_id, p_job_id, p_state, p_provider_status, p_metadata, p_error,
            p_at, p_terminal_at, p_progress_done, p_progress_total, p_expected_pages, p_poll_at,
            p_error_code, p_phase, p_result_ref, p_traceparent, p_handler_count, p_handlers);
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_terminal_at) AS t WHERE t IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock_shared(7669456891120937730);
    END IF;
    SELECT array_agg(coalesce(k.id, nextval('jobs_id_seq')) ORDER BY e.n),
           array_agg(coalesce(k.state, e.state) ORDER BY e.n)
    INTO v_job, v_known
    FROM unnest(p_source, p_job_id, p_state) WITH ORDINALITY AS e(source, job_id, state, n)
    LEFT JOIN LATERAL (SELECT id, state FROM jobs
                       WHERE source = e.source AND job_id = e.job_id LIMIT 1) AS k ON true;

    WITH inserted AS (
        INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
                                received_at, job)
        SELECT e.source, e.message_id, e.job_id, e.state, e.provider_status, e.at, e.job
        FROM unnest(p_source, p_message_id, p_job_id, p_state, p_provider_status, p_at, v_job)
            WITH ORDINALITY AS e(source, message_id, job_id, state, provider_status, at, job, n)
        WHERE e.message_id IS NOT NULL
        ORDER BY e.n
        ON CONFLICT DO NOTHING
        RETURNING source, message_id
    )
    SELECT array_agg(e.message_id IS NULL OR i.message_id IS NOT NULL ORDER BY e.n)
    INTO v_accepted
    FROM unnest(p_source, p_message_id) WITH ORDINALITY AS e(source, message_id, n)
    LEFT JOIN inserted i ON i.source = e.source AND i.message_id = e.message_id;

    v_requeued := array_fill(0, ARRAY[v_count]);
    FOR i IN 1 .. v_count LOOP
        IF NOT v_accepted[i] THEN
            UPDATE dispatches SET state = 'pending', attempts = 0,
                next_attempt_at = p_at[i], updated_at = p_at[i],
                lease_owner = NULL, lease_until = NULL
            WHERE state = 'dead'
              AND completion_id = (SELECT id FROM completions WHERE job = v_job[i]);
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            v_requeued[i] := v_rows;
        END IF;
    END LOOP;

    WITH upserted AS (
        INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
                          created_at, updated_at, last_news_at, terminal_at,
                          progress_done, progress_total, expected_pages, next_poll_at,
                          error_code, id)
        SELECT e.source, e.job_id, e.state, e.provider_status, e.metadata, e.error,
               e.at, e.at, e.at, e.terminal_at, e.progress_done, e.progress_total,
               e.expected_pages, e.poll_at, e.error_code, e.job
        FROM unnest(p_source, p_job_id, p_state, p_provider_status, p_metadata, p_error, p_at,
                    p_terminal_at, p_progress_done, p_progress_total, p_expected_pages,
                    p_poll_at, p_error_code, v_job, v_accepted)
            WITH ORDINALITY AS e(source, job_id, state, provider_status, metadata, error, at,
                                 terminal_at, progress_done, progress_total, expected_pages,
                                 poll_at, error_code, job, accepted, n)
        WHERE e.accepted
        ORDER BY e.n
        ON CONFLICT (source, job_id) DO UPDATE SET
            state = CASE WHEN jobs.terminal_at IS NULL
                AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                     ELSE 2 END)
                    >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                        ELSE 2 END)
                THEN excluded.state ELSE jobs.state END,
            provider_status = CASE WHEN jobs.terminal_at IS NULL
                AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                     ELSE 2 END)
                    >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                        ELSE 2 END)
                THEN excluded.provider_status ELSE jobs.provider_status END,
            error = CASE WHEN jobs.terminal_at IS NULL
                         THEN coalesce(excluded.error, jobs.error) ELSE jobs.error END,
            error_code = CASE WHEN jobs.terminal_at IS NULL
                              THEN coalesce(excluded.error_code, jobs.error_code)
                              ELSE jobs.error_code END,
            terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
            metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
            updated_at = excluded.updated_at,
            last_news_at = excluded.last_news_at,
            progress_done = coalesce(excluded.progress_done, jobs.progress_done),
            progress_total = coalesce(excluded.progress_total, jobs.progress_total),
            expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
            next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
            poll_attempts = CASE WHEN excluded.next_poll_at IS NULL
                                 THEN jobs.poll_attempts ELSE 0 END
        RETURNING id, source, job_id, state, provider_status, metadata, error, error_code,
                  terminal_at - created_at AS took
    ), events AS (
        SELECT e.n, e.at, e.phase, e.result_ref, e.traceparent, u.id, u.source, u.job_id,
               u.state, u.provider_status, u.metadata, u.error, u.error_code, u.took,
               e.terminal_at IS NOT NULL AND u.state = e.state AS completes
        FROM unnest(p_source, p_job_id, p_state, p_terminal_at, p_at, p_phase, p_result_ref,
                    p_traceparent)
            WITH ORDINALITY AS e(source, job_id, state, terminal_at, at, phase, result_ref,
                                 traceparent, n)
        LEFT JOIN upserted u ON u.source = e.source AND u.job_id = e.job_id
    ), completed AS (
        INSERT INTO completions (job, source, job_id, state, provider_status, metadata,
                                 error, created_at, next_attempt_at, phase,
                                 result_ref, error_code, traceparent)
        SELECT id, source, job_id, state, provider_status, metadata, error,
               at, at, phase, result_ref, error_code, traceparent
        FROM events WHERE completes
        ORDER BY n
        ON CONFLICT (job) DO NOTHING
        RETURNING id, job
    )
    SELECT array_agg(e.id ORDER BY e.n), array_agg(e.state ORDER BY e.n),
           array_agg(e.took ORDER BY e.n), array_agg(c.id ORDER BY e.n)
    INTO v_stored, v_state, v_took, v_completion
    FROM events e LEFT JOIN completed c ON c.job = e.id;

    FOR i IN 1 .. v_count LOOP
        IF v_stored[i] <> v_job[i] AND p_message_id[i] IS NOT NULL THEN
            -- another transaction saw the job first, after our read: its id, not ours
            UPDATE deliveries SET job = v_stored[i]
            WHERE source = p_source[i] AND message_id = p_message_id[i];
        END IF;
    END LOOP;

    IF coalesce(array_length(p_handlers, 1), 0) > 0
       AND cardinality(array_remove(v_completion, NULL)) > 0 THEN
        INSERT INTO dispatches (completion_id, handler, next_attempt_at, updated_at)
        SELECT e.completion, p_handlers[h], e.at, e.at
        FROM (SELECT x.completion, x.at, x.handlers, x.n,
                     sum(x.handlers) OVER (ORDER BY x.n) - x.handlers AS before
              FROM unnest(v_completion, p_at, p_handler_count)
                  WITH ORDINALITY AS x(completion, at, handlers, n)) AS e,
             generate_series(e.before + 1, e.before + e.handlers) AS h
        WHERE e.completion IS NOT NULL
        ORDER BY e.n, h
        ON CONFLICT DO NOTHING;
    END IF;

    RETURN QUERY
    SELECT CASE WHEN e.accepted THEN 'accepted' ELSE 'duplicate' END,
           CASE WHEN e.accepted THEN e.stored_state ELSE e.known END,
           e.completion IS NOT NULL,
           CASE WHEN e.completion IS NOT NULL THEN e.took END,
           e.requeued
    FROM unnest(v_accepted, v_state, v_known, v_completion, v_took, v_requeued)
        WITH ORDINALITY AS e(accepted, stored_state, known, completion, took, requeued, n)
    ORDER BY e.n;
END $$;
"""
